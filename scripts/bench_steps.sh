#!/usr/bin/env bash
# Time to solution of whole runs on the GPU (issue 18, docs/performance.md "The whole step on
# the device"): the configurations in benches/runs/ (disk galaxy N = 2^23 in block steps and in
# shared steps of 0.01 and 0.02; Plummer N = 2^22 in shared steps of 1/128 with rebuild = 1 and
# "auto"), each run once, then one Markdown row per run (scripts/step_summary.py).
#
# usage: scripts/bench_steps.sh [HINOKI [OUT_DIR [RUN ...]]]
#        (defaults: target/release/hinoki, bench-steps, every benches/runs/*.toml)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BIN=${1:-target/release/hinoki}
OUT=${2:-bench-steps}
shift $(( $# < 2 ? $# : 2 ))
RUNS=("$@")
if [ ${#RUNS[@]} -eq 0 ]; then
  for f in "$HERE"/../benches/runs/*.toml; do RUNS+=("$(basename "$f" .toml)"); done
fi
mkdir -p "$OUT"
for r in "${RUNS[@]}"; do
  echo "== $r" >&2
  HINOKI_LOG=${HINOKI_LOG:-warn} "$BIN" run "$HERE/../benches/runs/$r.toml" -o "$OUT/$r" \
    > "$OUT/$r.log" 2>&1 || { echo "$r failed: $(tail -1 "$OUT/$r.log")" >&2; exit 1; }
done
python3 "$HERE/step_summary.py" "${RUNS[@]/#/$OUT/}"
