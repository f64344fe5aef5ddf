#!/usr/bin/env python3
"""Force errors of `hinoki forces --check` at the edges of float32 (docs/performance.md, "Far
from the origin"): a Plummer sphere moved by a common offset 0, 1e1, ..., 1e8, a Plummer
sphere of 2000 particles with one more particle at a distance d on the x axis, and two such
spheres at a distance d. Prints three Markdown tables: median and p99 relative acceleration errors against float64 direct summation,
or that the job was refused, and the ratio a warning or the error names (m / λ: the closest
particles' distance from the frame's centre over max(separation, softening); or L / λ, the
cube's side over it, where float32's exponent range ends first).

usage: scripts/float32_edges.py HINOKI [--backend cpu|gpu] [--n N] [--check K]
       (HINOKI_GPU_EMULATOR=1 runs --backend gpu on the CPU kernel emulator)
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import tempfile

import h5py
import numpy as np


def forces(hinoki, path, backend, check):
    """One evaluation of the particles in `path`: its --json report (None where it failed),
    and the ratio its warning or error names (None without either): the pair's distance from
    the frame's centre, or the cube's side, over max(separation, softening)."""
    r = subprocess.run(
        [hinoki, "forces", "--input", path, "--check", str(check), "--backend", backend, "--json"],
        capture_output=True, text=True, env=dict(os.environ, HINOKI_LOG="warn"),
    )
    said = re.search(r"is ([-+.e0-9]+) times max\(separation, softening\)", r.stderr)
    report = json.loads(r.stdout) if r.returncode == 0 else None
    return report, said and float(said.group(1))


def row(label, report, range_):
    """A table row: the errors, or that the job was refused; the range where it was named."""
    named = f"{range_:.1e}" if range_ else ""
    if report is None:
        return f"| {label} | refused | | {named} |"
    e = {k: "NaN" if v is None else f"{v:.2e}" for k, v in report["error"].items()}
    return f"| {label} | {e['p50']} | {e['p99']} | {named} |"


def append(src, path, place, k):
    """Writes to `path` the particles of `src` and copies of its first `k`, placed at
    place(their positions), with new ids."""
    shutil.copy(src, path)
    with h5py.File(path, "r+") as f:
        g = f["PartType1"]
        ids = g["ParticleIDs"][...]
        extra = {
            "Coordinates": place(g["Coordinates"][:k]),
            "Velocities": g["Velocities"][:k],
            "Masses": g["Masses"][:k],
            "ParticleIDs": ids.max() + 1 + np.arange(k, dtype=ids.dtype),
        }
        for name, new in extra.items():
            data = np.concatenate([g[name][...], new])
            del g[name]
            g.create_dataset(name, data=data)
        for key in ["NumPart_ThisFile", "NumPart_Total"]:
            counts = f["Header"].attrs[key].copy()
            counts[1] += k
            f["Header"].attrs[key] = counts


def main():
    a = argparse.ArgumentParser()
    a.add_argument("hinoki")
    a.add_argument("--backend", default="cpu")
    a.add_argument("--n", type=int, default=20000)
    a.add_argument("--check", type=int, default=2000)
    o = a.parse_args()
    tmp = tempfile.mkdtemp()
    base = os.path.join(tmp, "plummer.hdf5")
    subprocess.run([o.hinoki, "ics", "plummer", "-n", str(o.n), "-o", base], check=True,
                   capture_output=True)
    print(f"Plummer {o.n}, offsets ({o.backend}):\n")
    print("| offset | p50 | p99 | ratio (warned) |\n| --- | --- | --- | --- |")
    for k in range(9):
        offset = 0.0 if k == 0 else 10.0 ** k
        path = os.path.join(tmp, "offset.hdf5")
        shutil.copy(base, path)
        with h5py.File(path, "r+") as f:
            f["PartType1/Coordinates"][...] += offset
        print(row(f"{offset:.0e}", *forces(o.hinoki, path, o.backend, o.check)))
    small = os.path.join(tmp, "small.hdf5")
    subprocess.run([o.hinoki, "ics", "plummer", "-n", "2000", "-o", small], check=True,
                   capture_output=True)
    print(f"\nPlummer 2000 and one particle at distance d ({o.backend}):\n")
    print("| d | p50 | p99 | ratio (warned or refused) |\n| --- | --- | --- | --- |")
    for d in [1e2, 1e4, 1e6, 1e7, 1e8, 1e10, 1e15, 1e20, 1e300]:
        path = os.path.join(tmp, "far.hdf5")
        append(small, path, lambda x: np.array([[d, 0.0, 0.0]]), 1)
        print(row(f"{d:.0e}", *forces(o.hinoki, path, o.backend, 2001)))
    print(f"\nTwo Plummer spheres of 2000 at distance d ({o.backend}):\n")
    print("| d | p50 | p99 | ratio (warned or refused) |\n| --- | --- | --- | --- |")
    for d in [1e2, 1e3, 1e4, 3e4, 1e5, 3e5, 1e6]:
        path = os.path.join(tmp, "two.hdf5")
        append(small, path, lambda x: x + np.array([d, 0.0, 0.0]), 2000)
        print(row(f"{d:.0e}", *forces(o.hinoki, path, o.backend, 4000)))
    shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
