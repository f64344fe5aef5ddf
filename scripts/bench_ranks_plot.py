#!/usr/bin/env python3
"""Draws the CSV of scripts/bench_ranks.sh: one PNG per set, phases per (Np, binding).

Usage: scripts/bench_ranks_plot.py CSV --out-dir DIR     (writes DIR/SET.png for every set)

Left panel: for each Np (groups) and binding (bars side by side), the seconds of the phases on
the evaluation's critical path stacked (the slowest rank's of each phase, so the stack can exceed
the slowest rank's total, drawn as a black tick): wait, domain, tree (sort + build + moments +
refit + thread), targets, upload + download + unsort, local walk, wait for the LETs,
LET walk, and any other phase. Right panel: the LET construction and exchange, which run in a
communication thread during the local walk and so are not stacked.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from scaling_plot import need_matplotlib, read_csv, save_figure  # noqa: E402

# (label, phases, colour) stacked bottom to top; "other" takes every phase not named here.
STACK = [("wait", ["wait"], "tab:gray"),
         ("domain", ["domain"], "tab:orange"),
         ("tree", ["sort", "build", "moments", "refit", "thread"], "tab:green"),
         ("targets", ["targets", "tune"], "tab:olive"),
         ("upload, download, unsort", ["upload", "download", "unsort"], "tab:cyan"),
         ("walk (local)", ["walk"], "tab:blue"),
         ("LET wait", ["let_wait"], "tab:pink"),
         ("walk (LET)", ["walk_let"], "tab:purple")]
OVERLAPPED = [("LET construction", "let", "tab:red"), ("LET exchange", "exchange", "tab:brown")]
NOT_PHASES = {"total", "tree", "comm", "walks"} | {p for _, p, _ in OVERLAPPED}


def seconds(row, phase):
    v = row.get(f"{phase}_s", "")
    return float(v) if v else 0.0


def plot_set(plt, rows, name, out):
    nps = sorted({int(r["np"]) for r in rows})
    bindings = list(dict.fromkeys(r["binding"] for r in rows))
    named = {p for _, phases, _ in STACK for p in phases}
    others = sorted({c[:-2] for c in rows[0] if c.endswith("_s")} - named - NOT_PHASES)
    stack = STACK + ([("other", others, "gold")] if others else [])
    width = 0.8 / len(bindings)
    fig, (ax, al) = plt.subplots(1, 2, figsize=(12, 4.8), gridspec_kw={"width_ratios": [3, 2]})
    for panel in (ax, al):
        panel.set_xticks(range(len(nps)), [f"Np = {p}" for p in nps])
        panel.set_ylabel("seconds (slowest rank)")
        panel.grid(True, axis="y", alpha=0.3)
    for b, binding in enumerate(bindings):
        offset = (b - (len(bindings) - 1) / 2) * width
        for i, np_ in enumerate(nps):
            row = next((r for r in rows if r["binding"] == binding and int(r["np"]) == np_), None)
            if row is None:
                continue
            x, bottom = i + offset, 0.0
            for label, phases, colour in stack:
                h = sum(seconds(row, p) for p in phases)
                ax.bar(x, h, width * 0.9, bottom=bottom, color=colour, edgecolor="white",
                       hatch="//" if b % 2 else None,
                       label=label if (b, i) == (0, 0) else None)
                bottom += h
            ax.plot([x - width * 0.45, x + width * 0.45], [seconds(row, "total")] * 2, "k-",
                    lw=2, label="total" if (b, i) == (0, 0) else None)
            ax.annotate(binding, (x, bottom), ha="center", va="bottom", fontsize=7,
                        rotation=90, xytext=(0, 2), textcoords="offset points")
            for k, (label, phase, colour) in enumerate(OVERLAPPED):
                al.bar(x + (k - 0.5) * width / 2, seconds(row, phase), width / 2 * 0.9,
                       color=colour, hatch="//" if b % 2 else None,
                       label=label if (b, i) == (0, 0) else None)
            top = max(seconds(row, phase) for _, phase, _ in OVERLAPPED)
            if top > 0:
                al.annotate(binding, (x, top), ha="center", va="bottom", fontsize=7,
                            rotation=90, xytext=(0, 2), textcoords="offset points")
    ax.set_title("phases on the critical path, per Np and binding", fontsize=9)
    al.set_title("LET construction and exchange (comm thread, overlapped)", fontsize=9)
    for panel in (ax, al):
        panel.margins(y=0.15)
    fig.legend(fontsize=7, ncol=6, loc="lower center")
    r0 = rows[0]
    device = r0.get("device", "").split(" (")[0]  # "cpu (2 threads)": threads vary by run
    fig.suptitle(f"{name}: {r0.get('model', '')}, N = {int(r0['n']):,}, theta = "
                 f"{r0.get('theta', '')}, {device}; bars of the 2nd, 4th, ... binding hatched",
                 fontsize=10)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    save_figure(fig, out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv", help="CSV of scripts/bench_ranks.sh")
    ap.add_argument("--out-dir", required=True, help="directory for SET.png")
    a = ap.parse_args()
    rows = read_csv(a.csv, ("set", "binding", "np", "n", "total_s"), "scripts/bench_ranks.sh")
    plt = need_matplotlib()
    for name in dict.fromkeys(r["set"] for r in rows):
        plot_set(plt, [r for r in rows if r["set"] == name], name, os.path.join(a.out_dir, f"{name}.png"))


if __name__ == "__main__":
    main()
