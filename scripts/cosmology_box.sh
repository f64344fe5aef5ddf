#!/usr/bin/env bash
# The periodic 256³ ΛCDM box of examples/cosmology-box.toml end to end, as docs/performance.md
# records it: initial conditions (extra flags go to `hinoki ics cosmology`, e.g. --lpt 1 or
# --fixed-amplitudes), the run from z = 49 to 0, and the power spectrum of every snapshot
# against Halofit (`plot power --grid 512 --json`), then the mode-weighted P/P_Halofit in the
# bands of k (h/Mpc) that performance.md's table shows.
#
# Usage: scripts/cosmology_box.sh WORKDIR [ics flags...]
# HINOKI names the binary (default: target/release/hinoki of this checkout).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
hinoki=${HINOKI:-$repo/target/release/hinoki}
work=${1:?usage: scripts/cosmology_box.sh WORKDIR [ics flags...]}
shift
mkdir -p "$work" && cd "$work"
"$hinoki" ics cosmology --grid 256 --box 256 "$@" -o box-ics.hdf5
( time "$hinoki" run "$repo/examples/cosmology-box.toml" ) 2>&1 | tee run.txt | tail -4
for s in box-out/snapshots/snapshot_*.hdf5; do
    n=$(basename "$s" .hdf5)
    "$hinoki" plot power "$s" --grid 512 --json -o "$n-power.png" 2>/dev/null > "$n-power.json"
done
python3 - snapshot_*-power.json <<'PY'
import json, sys
bands = [(0.02, 0.1), (0.1, 0.3), (0.3, 0.5), (0.5, 0.75), (0.75, 1.0)]
print("file z " + " ".join(f"{lo}-{hi}" for lo, hi in bands))
for name in sys.argv[1:]:
    d = json.load(open(name))
    row = []
    for lo, hi in bands:
        s = [x for x in d["shells"] if lo <= x["k"] < hi and x.get("halofit")]
        w = sum(x["modes"] for x in s)
        row.append(f"{sum(x['modes'] * x['power'] / x['halofit'] for x in s) / w:.3f}" if w else "-")
    print(name, f"{d['redshift']:.2f}", " ".join(row))
PY
