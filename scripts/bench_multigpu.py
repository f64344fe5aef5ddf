#!/usr/bin/env python3
"""One Markdown row per run of scripts/bench_multigpu.sh: for `forces` reports (NAME.out, one
JSON object) the slowest rank's seconds per phase of the third evaluation, its `evaluation`
(`total` less returning the results, `download` and `unsort`: what a scaling study compares),
the sum of the named phases, and the ratio to the one-GPU row of the same series (weak:
efficiency T1/T; strong: speed-up T1/T) of the evaluation and of the whole `total`; for runs
(NAME.out, the run's summary lines) the wall time, the force time and the phases, against the
one-GPU run: the disk galaxy's (`run-`) force time, the whole cosmological runs' (`whole-`)
wall time.

usage: scripts/bench_multigpu.py OUT
"""
import json
import os
import re
import sys

PHASES = ["domain", "wait", "results", "sort", "build", "moments", "targets", "let", "exchange", "walk",
          "let_wait", "walk_let", "unsort", "download"]


def evaluation(report):
    """The last evaluation less returning its results (seconds, slowest rank)."""
    t = report["time"]
    e = report.get("evaluation", {}).get("seconds")
    return e if e is not None else t["total"] - t.get("download", 0.0) - t.get("unsort", 0.0)


def forces_row(name, report, base):
    t = report["time"]
    total, ev = t["total"], evaluation(report)
    named = sum(v for k, v in t.items() if k != "total")
    ratios = ""
    if base is not None:
        ratios = f"{evaluation(base) / ev:.2f} / {base['time']['total'] / total:.2f}"
    lets = report.get("lets", {})
    cols = [name, str(report["ranks"]), str(report["n"]), f"{total:.4f}", f"{ev:.4f}"]
    cols += [f"{t.get(p, 0.0):.4f}" for p in PHASES]
    cols += [f"{named:.4f}", ratios,
             lets.get("exchange") or "",
             f"{report['error']['p99']:.2e}" if report.get("error") else ""]
    return "| " + " | ".join(cols) + " |"


def wall_and_phases(text):
    """A run's wall time (seconds, as its summary gives it) and its phases (seconds)."""
    m = re.search(r"steps to .*? in ([0-9.]+) s", text)
    wall = float(m.group(1)) if m else float("nan")
    phases = {}
    for line in text.splitlines():
        if line.startswith("time per phase [s]:"):
            phases = {k: float(v) for k, v in re.findall(r"([a-z_]+) ([0-9.]+)", line.split(":", 1)[1])}
    return wall, phases


def run_row(name, text, base, by_wall):
    """One run's row: wall, force time, the ratio of the force time (or with `by_wall` of the
    wall time) to the one-GPU run's `base` (wall, force time), and its phases."""
    wall, phases = wall_and_phases(text)
    force = phases.get("total", float("nan"))
    ratio = ""
    if base is not None:
        ratio = f"{wall / base[0]:.3f}" if by_wall else f"{force / base[1]:.2f}"
    shown = ", ".join(f"{k} {v:.2f}" for k, v in phases.items())
    return f"| {name} | {wall:.2f} | {force:.3f} | {ratio} | {shown} |"


def run_table(reports, names, prefix, by_wall):
    """The rows of the runs named `prefix`..., each against its series' one-GPU run."""
    for n in names:
        if not n.startswith(prefix):
            continue
        one = reports.get(n.split("-np")[0] + "-np1")
        base = None
        if one is not None:
            wall, phases = wall_and_phases(one)
            base = (wall, phases.get("total", float("nan")))
        print(run_row(n, reports[n], base, by_wall))


def main(out):
    names = sorted(f[:-4] for f in os.listdir(out) if f.endswith(".out"))
    reports = {}
    for n in names:
        text = open(os.path.join(out, n + ".out")).read()
        if n.startswith(("run-", "whole-")):
            reports[n] = text + open(os.path.join(out, n + ".log")).read()
        elif text.strip():
            reports[n] = json.loads(text)
    print("| run | ranks | N | total | evaluation | " + " | ".join(PHASES) +
          " | named | T1/T evaluation / total (weak: efficiency, strong: speed-up) | exchange | p99 |")
    print("|" + "---|" * (len(PHASES) + 9))
    for n in names:
        if n.startswith(("run-", "whole-")) or n not in reports:
            continue
        series = n.split("-np")[0]
        one = reports.get(series + "-np1")
        print(forces_row(n, reports[n], one))
    print()
    print("| run | wall s | force time s | force time / 1 GPU | phases (s) |")
    print("|---|---|---|---|---|")
    run_table(reports, names, "run-", False)
    print()
    print("| whole run | wall s | force time s | wall / 1 GPU | phases (s) |")
    print("|---|---|---|---|---|")
    run_table(reports, names, "whole-", True)


if __name__ == "__main__":
    main(sys.argv[1])
