#!/usr/bin/env python3
"""Collects `hinoki forces --json` reports of a scaling study into one CSV, one row per Np.

Usage: scripts/scaling_csv.py --mode strong|weak [--model NAME] [--label NAME=VALUE]... [--append]
                              -o OUT.csv REPORT.json...

Columns (times in seconds, the slowest rank's, of the last evaluation of each run):
  NAME of every --label, with its VALUE (e.g. set=cube binding=default: which series a row is of)
  mode, model (as given: the reports do not name it), np, n, n_per_rank, backend, device, threads, theta
  PHASE_s for every phase any report holds (domain, sort, build, moments, let, exchange, upload,
    walk, walk_let, download, unsort, total, ...); a phase a run did not have (no LETs on one
    rank) is 0
  tree_s = sort_s + build_s + moments_s, let_s (LET construction), comm_s = exchange_s +
    domain_s (particle and LET traffic), walks_s = walk_s + walk_let_s: the curves of the plots
  speedup, efficiency: of total_s against the row with the fewest ranks (np0, T0); strong:
    speedup = T0/T, efficiency = np0*T0/(np*T); weak: speedup = np*T0/(np0*T), efficiency = T0/T
  efficiency_walk: the same efficiency for walks_s
  evaluation_s: the slowest rank's last evaluation less the return of its results (download,
    unsort; the report's evaluation.seconds), efficiency_evaluation: the efficiency of it
  coverage_min: the least share over the ranks of the whole command's wall time in named phases
  imbalance_walk (max/mean walk time over the ranks), imbalance_particles (max/mean)
  let_bytes_sent_mean/_max, let_bytes_received_mean/_max (bytes per rank)
  interactions (whole job), interactions_per_second (job interactions / slowest walk time)
  error_p50, error_p99 (relative acceleration error, with --check; else empty)
  every other number whose name holds "bytes", named by its path (memory_device_bytes,
    domain_bytes_moved_max, ...: device memory and the traffic over the bus where a report has them)
With --append the rows are added to those OUT.csv already holds (the columns of both; a column one
of them lacks is empty). The CSV is written atomically (temporary file, then rename).
"""
import argparse
import csv
import json
import os
import sys

# hinoki's phases of an evaluation in pipeline order (src/diag/ranks.rs PHASES), after the
# command's around it that the report of the last one holds; others are appended.
PHASES = ["wait", "domain", "sort", "build", "moments", "refit", "probe", "thread", "targets",
          "tune", "let", "exchange", "upload", "walk", "let_wait", "walk_let", "download",
          "unsort", "integrate", "total"]
# The curves of seed 001 Figs. 11-12: column name -> phases summed.
GROUPS = {"tree_s": ["sort", "build", "moments", "refit"], "let_s": ["let"],
          "comm_s": ["exchange", "domain"], "walks_s": ["walk", "walk_let"]}


def fail(msg):
    sys.exit(f"scaling_csv.py: error: {msg}")


def load(path):
    try:
        with open(path) as f:
            report = json.load(f)
    except OSError as e:
        fail(f"cannot read {path}: {e.strerror}")
    except json.JSONDecodeError as e:
        fail(f"{path} is not one JSON object ({e.msg} at line {e.lineno}); see its .log")
    for key in ("n", "time"):
        if key not in report:
            fail(f"{path} has no '{key}': not a 'hinoki forces --json' report")
    if "total" not in report["time"]:
        fail(f"{path} has no time.total")
    return report


def dig(report, *keys):
    """Nested lookup that gives None when any level is missing."""
    for k in keys:
        if not isinstance(report, dict) or k not in report:
            return None
        report = report[k]
    return report


def byte_counts(report, path=()):
    """(column, value) of every number whose key path holds "bytes", outside `lets` (the
    let_bytes_* columns): device memory, particles moved, bytes over the bus."""
    for key, value in report.items():
        here = path + (key,)
        if isinstance(value, dict) and here != ("lets",):
            yield from byte_counts(value, here)
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and any(
                "bytes" in k for k in here):
            yield "_".join(here), value


def row_of(report, mode, model, phases, labels):
    np_ = report.get("ranks", 1)
    n = report["n"]
    times = report["time"]
    row = dict(labels)
    row.update({"mode": mode, "model": model, "np": np_, "n": n,
                "n_per_rank": n // np_ if n % np_ == 0 else n / np_,
                "backend": report.get("backend", ""), "device": report.get("device", ""),
                "threads": report.get("threads", ""),
                "theta": round(report["theta"], 6) if "theta" in report else ""})
    for ph in phases:
        row[f"{ph}_s"] = times.get(ph, 0.0)
    for col, parts in GROUPS.items():
        row[col] = sum(times.get(ph, 0.0) for ph in parts)
    imb = report.get("imbalance", {})
    row["imbalance_walk"] = imb.get("walk", 1.0 if np_ == 1 else "")
    row["imbalance_particles"] = imb.get("particles", 1.0 if np_ == 1 else "")
    for way in ("sent", "received"):
        for stat in ("mean", "max"):
            v = dig(report, "lets", f"bytes_{way}", stat)
            row[f"let_bytes_{way}_{stat}"] = v if v is not None else (0 if np_ == 1 else "")
    job = report.get("interactions_job") or report.get("interactions") or {}
    row["interactions"] = job.get("total", "")
    row["interactions_per_second"] = job.get("per_second", "")
    for p in ("p50", "p99"):
        v = dig(report, "error", p)
        row[f"error_{p}"] = "" if v is None else v
    row["evaluation_s"] = dig(report, "evaluation", "seconds") or times["total"]
    cov = dig(report, "command", "coverage", "min")
    row["coverage_min"] = "" if cov is None else cov
    row.update(byte_counts(report))
    return row


def add_efficiency(rows, mode):
    """speedup and efficiency of the total, efficiency_walk of walks_s, against rows[0]."""
    np0 = rows[0]["np"]
    for col, names in (("total_s", ("speedup", "efficiency")), ("walks_s", (None, "efficiency_walk")),
                       ("evaluation_s", (None, "efficiency_evaluation"))):
        t0 = rows[0][col]
        for r in rows:
            t, np_ = r[col], r["np"]
            ok = t > 0 and t0 > 0
            speedup = (t0 / t if mode == "strong" else np_ * t0 / (np0 * t)) if ok else ""
            if names[0]:
                r[names[0]] = speedup
            r[names[1]] = speedup * np0 / np_ if ok else ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mode", choices=["strong", "weak"], required=True)
    ap.add_argument("--model", default="", help="the particle model, for the CSV's model column")
    ap.add_argument("--label", action="append", default=[], metavar="NAME=VALUE",
                    help="a column NAME holding VALUE in every row (repeatable)")
    ap.add_argument("--append", action="store_true",
                    help="add the rows to those the CSV already holds")
    ap.add_argument("-o", "--output", required=True, help="CSV to write")
    ap.add_argument("reports", nargs="+", help="hinoki forces --json reports")
    a = ap.parse_args()
    labels = []
    for label in a.label:
        name, eq, value = label.partition("=")
        if not (name and eq):
            fail(f"--label takes NAME=VALUE (got '{label}')")
        labels.append((name, value))
    reports = [load(p) for p in a.reports]
    seen = {}
    for path, r in zip(a.reports, reports):
        np_ = r.get("ranks", 1)
        if np_ in seen:
            fail(f"{path} and {seen[np_]} are both Np={np_}")
        seen[np_] = path
    phases = [p for p in PHASES if any(p in r["time"] for r in reports)]
    phases += sorted({p for r in reports for p in r["time"]} - set(phases))
    rows = sorted((row_of(r, a.mode, a.model, phases, labels) for r in reports),
                  key=lambda r: r["np"])
    add_efficiency(rows, a.mode)
    if a.append and os.path.exists(a.output):
        try:
            with open(a.output, newline="") as f:
                rows = list(csv.DictReader(f)) + rows
        except OSError as e:
            fail(f"cannot read {a.output}: {e.strerror}")
    columns = list(dict.fromkeys(c for r in rows for c in r))
    tmp = a.output + ".tmp"
    try:
        with open(tmp, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=columns, restval="")
            writer.writeheader()
            writer.writerows(rows)
        os.replace(tmp, a.output)
    except OSError as e:
        fail(f"cannot write {a.output}: {e.strerror}")


if __name__ == "__main__":
    main()
