#!/usr/bin/env python3
"""Plots the JSON lines of `hinoki virtual-ranks` (one line per number of virtual ranks P).

Usage: scripts/virtual_ranks_plot.py LINES.jsonl -o PNG [--measured SCALING.csv] [--title TEXT]

Left panel: LET bytes each rank receives (mean and max over the ranks) and sends (max) versus P,
log-log. Right panel: load imbalance max/mean over the ranks of the particle count and of the
weight (the cost the domains were balanced on) versus P. With --measured, a strong-scaling CSV of
scripts/scaling_csv.py run on the same particles adds the real runs' LET bytes received and
particle imbalance as open markers: the prediction next to the measurement.
"""
import argparse
import csv
import json

from scaling_plot import fail, need_matplotlib, save_figure


def read_lines(path):
    try:
        with open(path) as f:
            lines = [(i, line) for i, line in enumerate(f, 1) if line.strip()]
    except OSError as e:
        fail(f"cannot read {path}: {e.strerror}")
    rows = []
    for i, line in lines:
        try:
            r = json.loads(line)
        except json.JSONDecodeError as e:
            fail(f"{path} line {i} is not JSON ({e.msg})")
        for key in ("ranks", "particles", "weight", "let_bytes_received", "let_bytes_sent"):
            if key not in r:
                fail(f"{path} line {i} has no '{key}': not a 'hinoki virtual-ranks' line")
        rows.append(r)
    if not rows:
        fail(f"{path} has no lines")
    return sorted(rows, key=lambda r: r["ranks"])


def read_measured(path):
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        fail(f"cannot read {path}: {e.strerror}")
    cols = ("np", "let_bytes_received_mean", "let_bytes_received_max", "imbalance_particles")
    if not rows or any(c not in rows[0] for c in cols):
        fail(f"{path} is not a scripts/scaling_csv.py CSV (needs {', '.join(cols)})")
    return [r for r in rows if int(r["np"]) > 1]


def imbalance(spread):
    return spread["max"] / spread["mean"] if spread["mean"] > 0 else 1.0


def plot(rows, measured, out, title):
    plt = need_matplotlib()
    ps = [r["ranks"] for r in rows]
    multi = [r for r in rows if r["ranks"] > 1]
    pm = [r["ranks"] for r in multi]
    fig, (ab, ai) = plt.subplots(1, 2, figsize=(11, 4.6))
    ab.plot(pm, [r["let_bytes_received"]["mean"] for r in multi], "o-", color="tab:purple",
            label="received, mean")
    ab.plot(pm, [r["let_bytes_received"]["max"] for r in multi], "s-", color="tab:red",
            label="received, max")
    ab.plot(pm, [r["let_bytes_sent"]["max"] for r in multi], "^--", color="tab:gray",
            label="sent, max")
    ai.plot(ps, [imbalance(r["particles"]) for r in rows], "o-", color="tab:green",
            label="particles max/mean")
    ai.plot(ps, [imbalance(r["weight"]) for r in rows], "s-", color="tab:blue",
            label="weight (cost) max/mean")
    if measured:
        mp = [int(r["np"]) for r in measured]
        ab.plot(mp, [float(r["let_bytes_received_mean"]) for r in measured], "o", mfc="none",
                ms=10, color="tab:purple", label="measured run, mean")
        ab.plot(mp, [float(r["let_bytes_received_max"]) for r in measured], "s", mfc="none",
                ms=10, color="tab:red", label="measured run, max")
        ai.plot(mp, [float(r["imbalance_particles"]) for r in measured], "o", mfc="none",
                ms=10, color="tab:green", label="measured run, particles")
    for ax in (ab, ai):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("P (ranks)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    ab.set_yscale("log")
    ab.set_ylabel("LET bytes per rank")
    ai.set_ylabel("imbalance (max / mean over ranks)")
    ai.axhline(1.0, color="k", ls="--", lw=0.8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    save_figure(fig, out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("lines", help="output of hinoki virtual-ranks (JSON lines)")
    ap.add_argument("-o", "--output", required=True, help="PNG to write")
    ap.add_argument("--measured", help="strong-scaling CSV of real runs on the same particles")
    ap.add_argument("--title", help="figure title")
    a = ap.parse_args()
    rows = read_lines(a.lines)
    n = rows[0]["particles"]["mean"] * rows[0]["ranks"]
    title = a.title or f"virtual ranks: N = {int(round(n)):,}, {rows[0].get('let_boxes', '?')} LET boxes per rank"
    plot(rows, read_measured(a.measured) if a.measured else None, a.output, title)


if __name__ == "__main__":
    main()
