#!/usr/bin/env python3
"""Time to solution of `hinoki run`, from a run's diagnostics.jsonl and the summary its stdout
ends with: the wall time from the start of the first force evaluation to the end of the last
step (initial conditions and output writing not counted) and per step, the force time and the
integrator phases (kick, drift, timestep, diagnostics) as a share of it (the summary's "time
per phase"), the refit phase, and |dE/E| at the end.

usage: scripts/step_summary.py RUN_DIR [RUN_DIR ...]
       (each RUN_DIR holds diagnostics.jsonl and RUN_DIR.log the run's stdout; prints one
       Markdown row per run)
"""
import json
import os
import re
import sys


def phases(log):
    """The seconds per phase of the summary line `time per phase [s]: sort 0.01, ...`."""
    for line in open(log):
        if line.startswith("time per phase [s]:"):
            pairs = re.findall(r"([a-z_]+) ([0-9.]+)", line.split(":", 1)[1])
            return {k: float(v) for k, v in pairs}
    raise SystemExit(f"{log}: no 'time per phase' line")


def summary(run_dir):
    run_dir = os.path.normpath(run_dir)
    rows = [json.loads(line) for line in open(os.path.join(run_dir, "diagnostics.jsonl"))]
    start = rows[0]["wall_seconds"] - rows[0]["phase_seconds"]["total"]
    steps = rows[-1]["step"]
    wall = rows[-1]["wall_seconds"] - start
    p = phases(run_dir + ".log")
    force = p.get("total", 0.0)
    integrator = sum(p.get(k, 0.0) for k in ["kick", "drift", "timestep", "diagnostics"])
    share = f"{100 * integrator / force:.1f} %" if force else "-"
    return (f"| {os.path.basename(run_dir)} | {steps} | {wall:.3f} | {1e3 * wall / max(steps, 1):.1f} "
            f"| {force:.2f} | {share} | {p.get('refit', 0.0):.2f} "
            f"| {abs(rows[-1]['energy_error']):.2e} |")


print("| run | steps | wall from the first evaluation [s] | per step [ms] | force time [s] "
      "| integrator / force | refit [s] | \\|ΔE/E\\| |")
print("|---|---|---|---|---|---|---|---|")
for d in sys.argv[1:]:
    print(summary(d))
