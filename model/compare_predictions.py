#!/usr/bin/python3
"""Which model points moved between two runs of the model suite, and by how much.

A change to the model is judged against every experiment, not only the figure it targets:
run `./run_all.py model --backend model --out DIR --no-report` before and after the change
and give both directories. A point is matched by experiment and point id (the hash of its
parameters), so both runs must use the same experiment files. Standard library only: the
model layer depends on no other.

    model/compare_predictions.py /tmp/before /tmp/after [--threshold 0.005]
"""
import argparse
import csv
import sys
from pathlib import Path

COMPARED = ("mops", "gbps", "lat_us_mean")


def load(root):
    """{(experiment, point, role, index): row} over every results.csv under root/model."""
    rows = {}
    for path in sorted(Path(root).glob("model/*/results.csv")):
        with path.open(newline="") as f:
            for row in csv.DictReader(f):
                rows[(path.parent.name, row["point"], row.get("role", ""), row.get("index", ""))] = row
    return rows


def number(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def changes(before, after, threshold):
    """(key, [what changed]) for each point present in both runs that moved."""
    out = []
    for key in sorted(before.keys() & after.keys()):
        b, a = before[key], after[key]
        moved = []
        for field in COMPARED:
            x, y = number(b.get(field)), number(a.get(field))
            if x is None or y is None:
                if (x is None) != (y is None):
                    moved.append(f"{field} {b.get(field) or '-'} -> {a.get(field) or '-'}")
                continue
            if abs(y - x) > threshold * max(abs(x), 1e-12):
                moved.append(f"{field} {x:.4g} -> {y:.4g} ({(y - x) / x * 100 if x else float('inf'):+.1f}%)")
        if b.get("bottleneck") != a.get("bottleneck"):
            moved.append(f"bottleneck {b.get('bottleneck') or '-'} -> {a.get('bottleneck') or '-'}")
        if b.get("status") != a.get("status"):
            moved.append(f"status {b.get('status')} -> {a.get('status')}")
        if moved:
            out.append((key, moved))
    return out


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("before", help="results directory of the run before the change")
    parser.add_argument("after", help="results directory of the run after the change")
    parser.add_argument("--threshold", type=float, default=0.005,
                        help="relative change below which a number has not moved (default 0.005)")
    args = parser.parse_args(argv)
    before, after = load(args.before), load(args.after)
    if not before or not after:
        empty = args.before if not before else args.after
        sys.exit(f"compare_predictions: no model/*/results.csv under '{empty}' "
                 "(valid: a directory written by ./run_all.py model --backend model --out DIR)")
    moved = changes(before, after, args.threshold)
    for (experiment, point, role, index), what in moved:
        params = {k[len("param."):]: v for k, v in after[(experiment, point, role, index)].items()
                  if k.startswith("param.") and v not in ("", None)}
        shown = " ".join(f"{k}={v}" for k, v in params.items() if k not in ("duration", "warmup"))
        print(f"{experiment} [{shown}] {role}: " + "; ".join(what))
    only = len(before.keys() ^ after.keys())
    print(f"{len(moved)} of {len(before.keys() & after.keys())} points moved"
          + (f"; {only} points are in one run only" if only else ""))


if __name__ == "__main__":
    main(sys.argv[1:])
