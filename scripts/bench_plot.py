#!/usr/bin/env python3
"""Plots the N sweep of scripts/bench_gpu.sh: time per phase versus N for each model, walk
interactions per second and relative acceleration error percentiles versus N.

Usage: scripts/bench_plot.py GPU_BENCH.csv OUT.png
Reads the rows with bench == "nsweep" (columns model, n, time.<phase>, interactions.per_second,
error.p50, error.p99, device), as written by scripts/bench_csv.py.
"""
import csv
import sys

from scaling_plot import fail, need_matplotlib, save_figure

PHASES = ["sort", "build", "moments", "targets", "upload", "walk", "download", "unsort", "total"]


def number(row, key):
    try:
        return float(row.get(key) or "nan")
    except ValueError:
        return float("nan")


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: bench_plot.py GPU_BENCH.csv OUT.png")
    try:
        with open(sys.argv[1]) as f:
            rows = [r for r in csv.DictReader(f) if r.get("bench") == "nsweep"]
    except OSError as e:
        fail(f"cannot read {sys.argv[1]}: {e.strerror}")
    if not rows:
        fail(f"{sys.argv[1]}: no nsweep rows")
    plt = need_matplotlib()
    models = sorted({r["model"] for r in rows})
    fig, axes = plt.subplots(2, max(len(models), 2), figsize=(5 * max(len(models), 2), 8.5))
    for ax, model in zip(axes[0], models):
        mine = sorted((r for r in rows if r["model"] == model), key=lambda r: number(r, "n"))
        n = [number(r, "n") for r in mine]
        for phase in PHASES:
            t = [number(r, f"time.{phase}") for r in mine]
            style = "k-" if phase == "total" else "o-"
            ax.loglog(n, t, style, label=phase, markersize=3, linewidth=2 if phase == "total" else 1)
        ax.set_title(f"{model}: time per phase")
        ax.set_xlabel("N")
        ax.set_ylabel("seconds")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].legend(fontsize=8)
    ips, err = axes[1][0], axes[1][1]
    for model in models:
        mine = sorted((r for r in rows if r["model"] == model), key=lambda r: number(r, "n"))
        n = [number(r, "n") for r in mine]
        ips.semilogx(n, [number(r, "interactions.per_second") for r in mine], "o-", label=model)
        checked = [r for r in mine if r.get("error.p50")]
        nc = [number(r, "n") for r in checked]
        line = err.loglog(nc, [number(r, "error.p50") for r in checked], "o-", label=f"{model} p50")
        err.loglog(nc, [number(r, "error.p99") for r in checked], "s--",
                   color=line[0].get_color(), label=f"{model} p99")
    ips.set_title("walk interactions per second")
    ips.set_xlabel("N")
    ips.set_ylabel("(p2p + m2p) / s")
    ips.grid(True, which="both", alpha=0.3)
    ips.legend(fontsize=8)
    err.set_title("relative acceleration error vs float64 direct")
    err.set_xlabel("N")
    err.grid(True, which="both", alpha=0.3)
    err.legend(fontsize=7)
    for ax in axes[1][2:]:
        ax.axis("off")
    fig.suptitle(f"hinoki forces, defaults, {rows[0].get('device', '')}")
    fig.tight_layout()
    save_figure(fig, sys.argv[2])


if __name__ == "__main__":
    main()
