"""`./run_all.py explore SPACE.yaml`: search a design space on the model, measure the best
designs, the Pareto front and a stratified sample on the backend, find anomalies and shrink
each to a minimal experiment. Everything lands in results/explore/<space id>/:

  summary.json          rdmalab-explore/1: the search, the designs measured, the anomalies
  scores.json           every model score (a resumed explore scores nothing twice)
  measure/<id>.yaml     the designs measured, as an experiment (the runner's input)
  <backend>/<id>/points the stored points (resume, provenance, deadlines: the normal runner)
  anomalies/*.yaml      one minimal experiment per anomaly, runnable by ./run_all.py
  report/index.html     drawn by plots/explore_report.py (run_all.py calls it)
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import time
from typing import Any, Optional

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from .. import inventory as inventory_mod
from .. import validate
from ..coordinator import new_run_id
from ..experiment import Experiment, kBackends
from ..runner import RunConfig, kPlantedFaultEnv, planted_fault
from ..store import Store, atomic_write, utc_now
from ..yamlloc import ConfigError
from .anomalies import Finder, Observation, typical_ratio
from .measure import Measurer
from .scoring import Scorer
from .search import Scored, Search, pareto_front, ranked, stratified
from .space import Space, parse

kSummarySchema = "rdmalab-explore/1"
kDefaultBudgetPoints = 24
kExplained = 3              # best designs whose `rdmalab-model explain` the report shows
kParetoMeasured = 6         # Pareto designs measured at most (spread along the front)
kCloudDesigns = 2000        # scored designs the report draws behind the front (spread over the ranking)
kConfigError = 2
kInterrupted = 130

USAGE = ("run_all.py explore SPACE.yaml [--backend B] [--profile P] [--budget-points N] [--budget-minutes M] "
         "[--out DIR] [--model-only]")


@dataclasses.dataclass
class Outcome:
    rc: int
    summary: Optional[pathlib.Path] = None     # the caller draws the report from it


def parser(root: pathlib.Path) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="run_all.py explore", usage=USAGE,
                                description="Search a design space with the model, measure the best designs on the "
                                            "backend, find anomalies and shrink each to a minimal experiment.")
    p.add_argument("space", help="the space file (experiments/explore/*.yaml)")
    p.add_argument("--backend", choices=[b for b in kBackends], default="softnic",
                   help="where designs are measured (default softnic; model: predictions only, for testing the plumbing)")
    p.add_argument("--profile", help="the model's NIC profile (a name or a fitted profile's FILE.yaml); default: the "
                                     "space's model_params.profile, else cx3")
    p.add_argument("--budget-points", type=int, default=kDefaultBudgetPoints,
                   help=f"points measured at most (default {kDefaultBudgetPoints}); stored points are free")
    p.add_argument("--budget-minutes", type=float, help="wall-clock limit of the whole explore")
    p.add_argument("--model-only", action="store_true", help="search and report on the model; measure nothing")
    p.add_argument("--cluster", default="local", help="inventory YAML, or local (default)")
    p.add_argument("--out", default=str(root / "results"), help="results directory (explore/<id>/ inside it)")
    p.add_argument("--bin-dir", default=str(root / "build" / "bin"))
    p.add_argument("--model-bin", help="rdmalab-model executable (default BIN_DIR/rdmalab-model)")
    return p


def bind(space: Space, backend: str, bin_dir: pathlib.Path, model_bin: Optional[pathlib.Path],
         measured: bool) -> Experiment:
    """The space checked against rdmalab-model's description and, when it is measured, the
    backend program's; the experiment bound to the model (which scores every design)."""
    errors: list[str] = []
    model_desc = validate.load_model(bin_dir, model_bin, errors)
    model_exp = validate.load(space.exp, "model", bin_dir, model_desc, errors) if model_desc else None
    if measured and backend != "model":
        if backend not in space.exp.backends:
            errors.append(f"{space.path}:{space.node.line_of('backends')}: space {space.id} does not run on backend "
                          f"{backend}; its backends: {', '.join(space.exp.backends)}")
        else:
            validate.load(space.exp, backend, bin_dir, None, errors)
        if backend == "softnic" and not (bin_dir / "softnic").is_file():
            errors.append(f"softnic backend: {bin_dir / 'softnic'} does not exist; build it (cmake --build build)")
    if errors:
        raise ConfigError(list(dict.fromkeys(errors)))
    assert model_exp is not None
    return model_exp


def _design_entry(space: Space, s: Scored) -> dict[str, Any]:
    return {"design": s.design, "predicted": s.value, "costs": s.costs,
            "metric_predicted": s.score.metric(space.objective.metric), "bottleneck": s.score.bottleneck,
            "bottleneck_label": s.score.bottleneck_label, "not_modeled": s.score.not_modeled, "error": s.score.error}


def _spread(items: list[Scored], count: int) -> list[Scored]:
    if len(items) <= count:
        return list(items)
    step = (len(items) - 1) / (count - 1) if count > 1 else 0
    return [items[round(i * step)] for i in range(count)]


def _selection(space: Space, best: list[Scored], front: list[Scored], sample: list[Scored],
               room: int) -> list[tuple[dict[str, Any], list[str]]]:
    """The designs to measure, each with why: the baseline (anomalies shrink toward it), the best
    designs, designs along the Pareto front, the stratified sample; at most `room`."""
    chosen: dict[str, tuple[dict[str, Any], list[str]]] = {}

    def add(design: dict[str, Any], why: str) -> None:
        key = repr(design)
        if key in chosen:
            chosen[key][1].append(why)
        elif len(chosen) < room:
            chosen[key] = (design, [why])

    add(space.baseline, "baseline")
    for s in best:
        add(s.design, "top")
    for s in _spread(front, kParetoMeasured):
        add(s.design, "pareto")
    for s in sample:
        add(s.design, "stratified")
    return list(chosen.values())


def main(argv: list[str], console: Console, root: pathlib.Path) -> Outcome:
    args = parser(root).parse_args(argv)
    started = time.monotonic()
    deadline = started + args.budget_minutes * 60 if args.budget_minutes else None
    bin_dir = pathlib.Path(args.bin_dir).resolve()
    model_bin = pathlib.Path(args.model_bin).resolve() if args.model_bin else None
    measured = not args.model_only
    try:
        if args.budget_points < 0:
            raise ConfigError(f"--budget-points {args.budget_points}: must be 0 or more")
        space = parse(args.space)
        model_exp = bind(space, args.backend, bin_dir, model_bin, measured)
        inv = inventory_mod.load(args.cluster)
    except ConfigError as exc:
        for m in exc.messages:
            console.print(m, markup=False, highlight=False, soft_wrap=True)
        console.print(f"run_all.py explore: {len(exc.messages)} error(s); nothing was run", markup=False)
        return Outcome(kConfigError)
    work = pathlib.Path(args.out).resolve() / "explore" / space.id
    work.mkdir(parents=True, exist_ok=True)
    run_id = new_run_id()
    model_cfg = RunConfig(backend="model", root=root, bin_dir=bin_dir, run_id=run_id, model_bin=model_bin,
                          profile=args.profile)
    scorer = Scorer(model_exp, model_cfg, work / "scores.json")

    # 1. Search on the model.
    t0 = time.monotonic()
    designs = space.size
    exhaustive = designs <= space.search["exhaustive_max"]
    console.print(f"explore {space.id}: {designs} designs in the grid ({len(space.dims)} dimensions), objective "
                  f"{space.objective.describe()}; search: {'every design' if exhaustive else 'simulated annealing'} "
                  f"on the model", markup=False, highlight=False)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    try:
        with Progress(*columns, console=console, transient=False) as progress:
            total = designs if exhaustive else min(designs, int(space.search["evaluations"]))
            task = progress.add_task("model: scoring designs", total=total)
            search = Search(space, scorer, lambda n: progress.advance(task, n))
            scored = search.exhaustive() if exhaustive else search.anneal(int(space.search["evaluations"]),
                                                                         int(space.search["seed"]))
            progress.update(task, completed=len(scored), total=len(scored))
    except KeyboardInterrupt:
        scorer.save()
        console.print("interrupted while scoring: the scores so far are kept (scores.json); run it again to go on",
                      markup=False)
        return Outcome(kInterrupted)
    scorer.save()
    search_s = time.monotonic() - t0
    valued = [s for s in scored if s.value is not None]
    best = ranked(space, valued)[: int(space.search["top"])]
    front = pareto_front(space, valued)
    sample = stratified(space, valued, int(space.search["stratified"]), int(space.search["seed"]))
    console.print(f"model: {len(scored)} designs scored in {search_s:.1f} s ({scorer.processes} model processes); "
                  f"{len(scored) - len(valued)} without a value; Pareto front: {len(front)} designs",
                  markup=False, highlight=False)
    _print_best(space, best, console)

    # 2. Measure on the backend; 3. anomalies.
    summary: dict[str, Any] = {
        "schema_version": kSummarySchema, "written": utc_now(), "space": {
            "id": space.id, "file": str(space.path), "title": space.exp.title, "description": space.exp.description,
            "dimensions": space.dims, "baseline": space.baseline, "objective": dataclasses.asdict(space.objective),
            "costs": {k: e.text for k, e in space.costs.items()}, "constraints": [c.text for c in space.constraints],
            "mode": space.exp.mode},
        "backend": args.backend if measured else None,
        "planted_fault": planted_fault() if measured and args.backend == "softnic" else None, "profile": scorer.request(space.params(space.baseline))["profile"],
        "search": {"method": "exhaustive" if exhaustive else "annealing", "grid_designs": designs,
                   "scored": len(scored), "valued": len(valued), "seconds": round(search_s, 2),
                   "model_processes": scorer.processes, "seed": space.search["seed"]},
        "best": [_design_entry(space, s) for s in best],
        "pareto": [_design_entry(space, s) for s in front],
        "cloud": [{"value": s.value, "costs": s.costs} for s in _spread(ranked(space, valued), kCloudDesigns)],
        "explain": [{"design": s.design, "text": scorer.explain(space.params(s.design))} for s in best[:kExplained]],
        "measured": [], "anomalies": [], "typical_ratio": None}
    rc = 0
    if measured:
        try:
            rc = _measure(space, search, args, bin_dir, model_bin, inv, work, run_id, deadline, console, best, front,
                          sample, summary, root)
        except KeyboardInterrupt:
            # Between the coordinator's runs (which stop on SIGINT themselves): stored points stay.
            console.print("interrupted: the points measured so far are stored; run it again to go on", markup=False)
            rc = kInterrupted
    scorer.save()
    summary["seconds"] = round(time.monotonic() - started, 1)
    path = work / "summary.json"
    atomic_write(path, json.dumps(summary, indent=1, default=str) + "\n")
    console.print(f"explore: {path}", markup=False, highlight=False)
    return Outcome(rc, None if rc == kInterrupted else path)


def _measure(space: Space, search: Search, args: argparse.Namespace, bin_dir: pathlib.Path,
             model_bin: Optional[pathlib.Path], inv: inventory_mod.Inventory, work: pathlib.Path, run_id: str,
             deadline: Optional[float], console: Console, best: list[Scored], front: list[Scored],
             sample: list[Scored], summary: dict[str, Any], root: pathlib.Path) -> int:
    from .. import cli
    bench_schema = json.loads(cli.kBenchSchema.read_text()) if cli.kBenchSchema.is_file() else None
    kv_schema = json.loads(cli.kKvSchema.read_text()) if cli.kKvSchema.is_file() else None
    cfg = RunConfig(backend=args.backend, root=root, bin_dir=bin_dir, run_id=run_id, model_bin=model_bin,
                    bench_schema=bench_schema, kv_schema=kv_schema, profile=args.profile)
    measurer = Measurer(space, cfg, inv, Store(work), console, work, args.budget_points, deadline)
    finder = Finder(space, search, measurer, summary["planted_fault"])
    if summary["planted_fault"]:
        console.print(f"softnic runs with a planted fault: {kPlantedFaultEnv}={summary['planted_fault']}",
                      markup=False, highlight=False, soft_wrap=True)
    # A third of the budget is kept for shrinking (each step measures one design, two for a collapse).
    room = max(1, args.budget_points - args.budget_points // 3)
    chosen = _selection(space, best, front, sample, room)
    console.print(f"measuring {len(chosen)} designs on {args.backend} (baseline, best, Pareto front, stratified sample; "
                  f"budget {args.budget_points} points)", markup=False, highlight=False)
    observations = finder.observe([d for d, _ in chosen])
    why = {repr(d): w for d, w in chosen}
    typical = typical_ratio(observations)
    summary["typical_ratio"] = typical
    anomalies = finder.find(observations, typical)
    console.print(f"measured {len(observations)} designs; typical measured/predicted {typical or float('nan'):.3g}; "
                  f"{len(anomalies)} anomalies", markup=False, highlight=False)
    written = []
    seen_minimal: set[str] = set()
    for a in anomalies:
        if typical is None or measurer.interrupted:
            break
        finder.shrink(a, typical)
        key = repr((a.kind, a.minimal, a.minimal_neighbour, a.dim))
        if key in seen_minimal:
            continue
        seen_minimal.add(key)
        written.append(a)
        finder.write(a, len(written), work / "anomalies")
        console.print(f"anomaly {len(written)} ({a.kind}): needs {', '.join(a.kept) or 'nothing beyond the baseline'}"
                      f" -> {a.file}", markup=False, highlight=False)
    summary["anomalies"] = [dataclasses.asdict(a) for a in written]
    all_obs = finder.observe(measurer.rows, run=False)
    summary["measured"] = [_observation_entry(search, o, why.get(repr(o.design), ["shrink"])) for o in all_obs]
    summary["measure_file"] = str(measurer.path)
    summary["points_run"] = measurer.ran
    return kInterrupted if measurer.interrupted else 0


def _observation_entry(search: Search, o: Observation, why: list[str]) -> dict[str, Any]:
    s = search.evaluate([o.design])[0]
    return {"design": o.design, "why": why, "measured": o.measured, "predicted": o.predicted, "ratio": o.ratio,
            "point": o.point_id, "bottleneck": s.score.bottleneck, "costs": s.costs}


def _print_best(space: Space, best: list[Scored], console: Console) -> None:
    t = Table(title=f"best designs on the model ({space.objective.describe()})")
    for c in ("#", "design", "predicted", "bottleneck"):
        t.add_column(c)
    for i, s in enumerate(best, 1):
        t.add_row(str(i), ", ".join(f"{k}={v}" for k, v in s.design.items()), f"{s.value:.4g}",
                  s.score.bottleneck_label or s.score.bottleneck or "")
    console.print(t)
