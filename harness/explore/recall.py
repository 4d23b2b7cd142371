"""The recall benchmark of explore (a script, not a test: it measures for many minutes).

    /usr/bin/python3 -m harness.explore.recall experiments/explore/collie-verbs.yaml \\
        --faults 10 --budget-points 60 [--strategies model,random,anneal] [--seed 1] [--out DIR]

Plants K random faults in softnic (SOFTNIC_PLANTED_FAULT, softnic/README.md), one at a time:
each a region over one or two of the knob's dimensions that the space has (verb, transport,
size, post_list), holding kMinRegionShare to kMaxRegionShare of the space's valid designs and
not the baseline, that a design differing from the baseline only in those dimensions can reach, with a
random delay per WR (log-uniform over kDelayNs: enough to dominate the slowest design's own
cost, so that the host's other load does not hide it). For each fault it runs
`./run_all.py explore` once per strategy with the same budget and seed: the model-guided
default, uniform random sampling and a measurement-only annealing (Collie's way); all three
judge and shrink anomalies the same way, so what differs is where the budget goes. Then it
prints, per strategy, recall (the fault found and shrunk to exactly its own dimensions), false
anomalies (written anomalies whose minimal design lies outside the region) and points used,
and writes OUT/recall.json.

It lives beside explore (harness/explore/) rather than in benchmarks/: it drives the
coordinator and reads explore's summaries, and benchmarks/ holds the per-node programs that the
harness runs, which never depend on it.
"""
from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import math
import os
import pathlib
import random
import subprocess
import sys
import time
from typing import Any, Optional

from rich.console import Console
from rich.table import Table

from ..runner import kPlantedFaultEnv
from .choose import kStrategies, valid_designs
from .space import Space, parse

kRoot = pathlib.Path(__file__).resolve().parents[2]
kMinRegionShare = 0.03
# A fault is a minority of the designs: the run's typical measured/predicted ratio is the
# majority's, and a fault past half the space would make the healthy designs the odd ones.
kMaxRegionShare = 0.25
kDelayNs = (10_000, 50_000)
# The knob's keys (softnic/verbs/planted_fault.h) and the benchmark parameter each reads.
kKnob = {"verb": "verb", "transport": "connection", "size": "size", "post_list": "post_list"}
kRanges = ("size", "post_list")       # the knob takes LO-HI; the others a set of names
kRunTimeoutS = 900


@dataclasses.dataclass
class Fault:
    region: dict[str, list[Any]]      # space dimension -> the values inside
    delay_ns: int
    share: float                      # of the valid designs

    def env(self) -> str:
        fields = []
        for key, dim in kKnob.items():
            if dim in self.region:
                values = self.region[dim]
                if key not in kRanges:
                    fields.append(f"{key}={'|'.join(map(str, values))}")
                else:
                    fields.append(f"{key}={values[0]}" + (f"-{values[-1]}" if len(values) > 1 else ""))
        return ",".join(fields + [f"delay_ns={self.delay_ns}"])

    def holds(self, design: dict[str, Any]) -> bool:
        return all(design[d] in values for d, values in self.region.items())


def draw_fault(space: Space, designs: list[dict[str, Any]], rng: random.Random) -> Fault:
    """A random fault the space can find and shrink: see the module's docstring."""
    dims = [d for d in kKnob.values() if d in space.dims and len(space.dims[d]) > 1]
    if not dims:
        raise SystemExit(f"{space.path}: no dimension the planted-fault knob covers ({', '.join(kKnob.values())})")
    for _ in range(10_000):
        chosen = rng.sample(dims, rng.choice([1, 2]) if len(dims) > 1 else 1)
        region = {}
        for d in chosen:
            values = space.dims[d]
            others = [v for v in values if v != space.baseline[d]]
            if d in kRanges:
                # A run of consecutive values on one side of the baseline's (the knob takes LO-HI).
                i = values.index(space.baseline[d])
                side = rng.choice([s for s in (values[:i], values[i + 1:]) if s])
                lo = rng.randrange(len(side))
                region[d] = side[lo: rng.randrange(lo, len(side)) + 1]
            else:
                region[d] = sorted(rng.sample(others, rng.randint(1, len(others))), key=values.index)
        share = sum(1 for x in designs if all(x[d] in v for d, v in region.items())) / len(designs)
        reachable = any(space.allowed({**space.baseline, **dict(zip(region, combo))})
                        for combo in itertools.product(*region.values()))
        if kMinRegionShare <= share <= kMaxRegionShare and reachable:
            delay = math.exp(rng.uniform(math.log(kDelayNs[0]), math.log(kDelayNs[1])))
            return Fault(region, int(round(delay, -2)), share)
    raise SystemExit(f"{space.path}: no fault region holds {kMinRegionShare:.0%} of the designs")


def judge(fault: Fault, summary: dict[str, Any]) -> dict[str, Any]:
    """Found: a written anomaly whose minimal design is inside the region and which needs exactly
    the region's dimensions. False: written anomalies whose minimal design is outside it."""
    own = set(fault.region)
    found, false = None, 0
    for a in summary.get("anomalies") or []:
        minimal = a.get("minimal") or a["design"]
        if not fault.holds(minimal):
            false += 1
        elif found is None and set(a["kept"]) == own:
            found = a["kept"]
    kept_first = next((a["kept"] for a in summary.get("anomalies") or [] if fault.holds(a.get("minimal") or a["design"])),
                      None)
    return {"found": found is not None, "kept": found or kept_first, "false": false,
            "points": summary.get("points_run", 0), "seconds": summary.get("seconds"),
            "stopped": summary.get("stopped"), "anomalies": len(summary.get("anomalies") or [])}


def run_one(space_path: pathlib.Path, fault: Fault, strategy: str, seed: int, budget: int, out: pathlib.Path,
            extra: list[str]) -> dict[str, Any]:
    argv = ["/usr/bin/python3", str(kRoot / "run_all.py"), "explore", str(space_path), "--budget-points", str(budget),
            "--strategy", strategy, "--seed", str(seed), "--out", str(out), *extra]
    t0 = time.monotonic()
    r = subprocess.run(argv, env={**os.environ, kPlantedFaultEnv: fault.env(), "COLUMNS": "200"},
                       capture_output=True, text=True, timeout=kRunTimeoutS)
    summary_path = out / "explore" / space_path.stem / "summary.json"
    if r.returncode != 0 or not summary_path.is_file():
        return {"found": False, "kept": None, "false": 0, "points": 0, "seconds": round(time.monotonic() - t0, 1),
                "error": f"exit {r.returncode}: {r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ''}"}
    (out / "explore.log").write_text(r.stderr)
    return judge(fault, json.loads(summary_path.read_text()))


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m harness.explore.recall",
                                description="Explore's recall of planted faults against random sampling and annealing.")
    p.add_argument("space", help="the space file (experiments/explore/*.yaml)")
    p.add_argument("--faults", type=int, default=10, help="faults planted, one explore per fault and strategy (10)")
    p.add_argument("--budget-points", type=int, default=60, help="each explore's budget (60)")
    p.add_argument("--strategies", default=",".join(kStrategies), help=f"comma-separated of {', '.join(kStrategies)}")
    p.add_argument("--seed", type=int, default=1, help="draws the faults; run i's explores take seed + i")
    p.add_argument("--out", default="/tmp/rdmalab-recall", help="each run's results: OUT/<strategy>/fault-<i>/")
    p.add_argument("--profile", help="passed to explore (default: the profile fitted to softnic)")
    args = p.parse_args(argv)
    console = Console(stderr=True)
    strategies = args.strategies.split(",")
    bad = [s for s in strategies if s not in kStrategies]
    if bad or args.faults < 1 or args.budget_points < 1:
        p.error(f"--strategies {args.strategies!r} (valid: {', '.join(kStrategies)}), --faults {args.faults} and "
                f"--budget-points {args.budget_points} (both at least 1)")
    space = parse(args.space)
    rng = random.Random(args.seed)
    designs = valid_designs(space, args.seed)
    faults = [draw_fault(space, designs, rng) for _ in range(args.faults)]
    out = pathlib.Path(args.out)
    extra = ["--profile", args.profile] if args.profile else []
    rows: list[dict[str, Any]] = []
    for i, fault in enumerate(faults, 1):
        row: dict[str, Any] = {"fault": fault.env(), "share": round(fault.share, 3), "dims": list(fault.region)}
        for s in strategies:
            row[s] = run_one(space.path, fault, s, args.seed + i, args.budget_points, out / s / f"fault-{i}", extra)
            console.print(f"fault {i} {fault.env()} ({fault.share:.1%} of designs), {s}: "
                          f"{'found' if row[s]['found'] else 'not found'} (needs {row[s]['kept']}), "
                          f"{row[s]['false']} false, {row[s]['points']} points, {row[s]['seconds']} s"
                          + (f", {row[s]['error']}" if row[s].get("error") else ""), markup=False, highlight=False)
        rows.append(row)
    table = Table(title=f"recall on {space.id}: {args.faults} planted faults, {args.budget_points}-point budget")
    for c in ("strategy", "recall", "false anomalies", "points used (mean)", "minutes (mean)"):
        table.add_column(c)
    totals = {}
    for s in strategies:
        found = sum(r[s]["found"] for r in rows)
        false = sum(r[s]["false"] for r in rows)
        points = sum(r[s]["points"] for r in rows) / len(rows)
        minutes = sum(r[s]["seconds"] or 0 for r in rows) / len(rows) / 60
        totals[s] = {"recall": found, "false": false, "points_mean": points, "minutes_mean": minutes}
        table.add_row(s, f"{found} of {len(rows)}", str(false), f"{points:.1f}", f"{minutes:.1f}")
    console.print(table)
    (out / "recall.json").write_text(json.dumps({"space": str(space.path), "faults": args.faults,
                                                 "budget_points": args.budget_points, "seed": args.seed,
                                                 "runs": rows, "totals": totals}, indent=1) + "\n")
    console.print(f"recall: {out / 'recall.json'}", markup=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
