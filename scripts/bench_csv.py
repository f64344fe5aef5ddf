#!/usr/bin/env python3
"""Flattens `hinoki forces --json` lines (e.g. scripts/bench_gpu.sh output) into one CSV.

Usage: scripts/bench_csv.py IN.jsonl OUT.csv
Nested objects become dotted columns (time.walk, error.p99, interactions.per_second, ...);
a column missing from a line is left empty.
"""
import csv
import json
import sys


def flatten(obj, prefix=""):
    out = {}
    for key, value in obj.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, name + "."))
        else:
            out[name] = value
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: bench_csv.py IN.jsonl OUT.csv")
    with open(sys.argv[1]) as f:
        rows = [flatten(json.loads(line)) for line in f if line.strip()]
    columns = []
    for row in rows:
        columns += [c for c in row if c not in columns]
    with open(sys.argv[2], "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)


if __name__ == "__main__":
    main()
