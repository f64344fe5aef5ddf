#!/usr/bin/env python3
"""Plots a scaling CSV of scripts/scaling_csv.py in the style of seed 001 Figs. 11-12.

Usage: scripts/scaling_plot.py CSV -o PNG [--title TEXT]

Left panel: seconds (slowest rank) versus Np, log-log, for the whole force evaluation (total,
red), the tree (sort + build + moments, green), the walk (local + LET walk, blue), LET
construction (purple) and traffic (domain + LET exchange, orange), with the ideal line in black
(strong: T(1)/Np; weak: flat at T(1)). Right panel: parallel efficiency of the total and of the
walk (strong: T1/(Np*T); weak: T1/T), against the run with the fewest ranks.
"""
import argparse
import csv
import os
import sys

ME = os.path.basename(sys.argv[0])
# (CSV column, label, colour) as in seed 001: total red, tree green, kernel blue, LET purple.
CURVES = [("total_s", "total", "tab:red"),
          ("tree_s", "tree (sort+build+moments)", "tab:green"),
          ("walks_s", "walk (local+LET)", "tab:blue"),
          ("let_s", "LET construction", "tab:purple"),
          ("comm_s", "exchange (domain+LET)", "tab:orange")]


def fail(msg):
    sys.exit(f"{ME}: error: {msg}")


def save_figure(fig, out):
    """Writes `fig` to the PNG `out` atomically (a temporary file renamed over it)."""
    tmp = out + ".tmp.png"
    try:
        fig.savefig(tmp, dpi=110)
        os.replace(tmp, out)
    except OSError as e:
        fail(f"cannot write {out}: {e.strerror}")


def need_matplotlib():
    try:
        import matplotlib
    except ImportError:
        fail("matplotlib is missing; install it with: python3 -m pip install --user matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def read_csv(path, columns, maker):
    """The rows of the CSV at `path`; fails unless it has rows and `columns` (a CSV of `maker`)."""
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        fail(f"cannot read {path}: {e.strerror}")
    if not rows:
        fail(f"{path} has no rows")
    for col in columns:
        if col not in rows[0]:
            fail(f"{path} has no column '{col}': not a {maker} CSV")
    return rows


def read_rows(path):
    columns = ("mode", "np", "n", "efficiency", "efficiency_walk") + tuple(c for c, _, _ in CURVES)
    rows = read_csv(path, columns, "scripts/scaling_csv.py")
    rows.sort(key=lambda r: int(r["np"]))
    return rows


def positive(xs, ys):
    """The points a log axis can show (zero times, e.g. no LETs on one rank, are left out)."""
    pts = [(x, y) for x, y in zip(xs, ys) if y is not None and y > 0]
    return [p[0] for p in pts], [p[1] for p in pts]


def title_of(rows):
    r0 = rows[0]
    mode = r0["mode"]
    model = r0.get("model") or "?"
    n = f"N = {int(r0['n']):,}" if mode == "strong" else f"N/rank = {int(float(r0['n_per_rank'])):,}"
    return f"{mode} scaling, {model}, {n}, {r0.get('device', '')} at Np = {r0['np']}"


def plot(rows, out, title):
    plt = need_matplotlib()
    mode = rows[0]["mode"]
    if mode not in ("strong", "weak"):
        fail(f"mode must be strong or weak (got '{mode}')")
    nps = [int(r["np"]) for r in rows]
    fig, (ax, ae) = plt.subplots(1, 2, figsize=(11, 4.6))
    for col, label, colour in CURVES:
        x, y = positive(nps, [float(r[col]) for r in rows])
        if x:
            ax.plot(x, y, "o-", color=colour, label=label)
    t = [float(r["total_s"]) for r in rows]
    ideal = [t[0] * nps[0] / p if mode == "strong" else t[0] for p in nps]
    ax.plot(nps, ideal, "k--", label="ideal " + ("∝ 1/Np" if mode == "strong" else "(flat)"))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("Np (ranks)")
    ax.set_ylabel("time per force evaluation [s] (slowest rank)")
    ax.set_xticks(nps, [str(p) for p in nps])
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    for col, label, colour in (("efficiency", "total", "tab:red"),
                               ("efficiency_walk", "walk", "tab:blue")):
        x, y = positive(nps, [float(r[col]) if r[col] else None for r in rows])
        if x:
            ae.plot(x, y, "o-", color=colour, label=label)
    ae.axhline(1.0, color="k", ls="--", label="ideal")
    ae.set_xscale("log", base=2)
    ae.set_xticks(nps, [str(p) for p in nps])
    ae.set_ylim(0, max([1.15] + [float(r["efficiency"]) + 0.1 for r in rows if r["efficiency"]]))
    ae.set_xlabel("Np (ranks)")
    ae.set_ylabel("parallel efficiency " + ("T1/(Np·T)" if mode == "strong" else "T1/T"))
    ae.grid(True, which="both", alpha=0.3)
    ae.legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    save_figure(fig, out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv", help="CSV of scripts/scaling_csv.py")
    ap.add_argument("-o", "--output", required=True, help="PNG to write")
    ap.add_argument("--title", help="figure title (default: mode, model, N, device)")
    a = ap.parse_args()
    rows = read_rows(a.csv)
    plot(rows, a.output, a.title or title_of(rows))


if __name__ == "__main__":
    main()
