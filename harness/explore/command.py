"""`./run_all.py explore SPACE.yaml`: search a design space on the model, measure the best
designs, the Pareto front and a stratified sample on the backend, find anomalies and shrink
each to a minimal experiment. Everything lands in results/explore/<space id>/:

  summary.json          rdmalab-explore/2: the search, what matters, the designs measured, the anomalies
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
from .. import model_pass
from .. import validate
from ..coordinator import describe_s, estimate_s, new_run_id
from ..experiment import Experiment, kBackends
from ..runner import RunConfig, kPlantedFaultEnv, planted_fault
from ..store import Store, atomic_write, utc_now
from ..yamlloc import ConfigError
from .anomalies import Finder, Observation
from .choose import AnnealChooser, ModelChooser, RandomChooser, kStrategies
from .explorer import Explorer
from .matters import Group, collapse_ties, span_text, what_matters
from .measure import Measurer
from .scoring import Scorer
from .search import Scored, Search, pareto_front, ranked, stratified
from .space import Space, parse

kSummarySchema = "rdmalab-explore/2"
kDefaultBudgetPoints = 24
kParetoMeasured = 6         # Pareto designs measured at most (spread along the front)
kFirstShare = 3             # the first designs (baseline, best, front, sample) take at most 1/kFirstShare of the budget
kCloudDesigns = 2000        # scored designs the report draws behind the front (spread over the ranking)
kConfigError = 2
kInterrupted = 130

USAGE = ("run_all.py explore SPACE.yaml [--backend B] [--profile P] [--budget-points N] [--budget-minutes M] "
         "[--out DIR] [--model-only] [--strategy model|random|anneal] [--seed N]")


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
                                     "profile fitted to the backend when one is measured and one exists "
                                     "(model/profiles/BACKEND.yaml), else the space's model_params.profile, else cx3")
    p.add_argument("--budget-points", type=int, default=kDefaultBudgetPoints,
                   help=f"points measured at most (default {kDefaultBudgetPoints}); stored points are free")
    p.add_argument("--budget-minutes", type=float, help="wall-clock limit of the whole explore")
    p.add_argument("--model-only", action="store_true", help="search and report on the model; measure nothing")
    p.add_argument("--strategy", choices=kStrategies, default="model",
                   help="what to measure: model (default: the model's best designs, then anomalies' neighbours, value "
                        "pairs not measured yet, the model's most sensitive spots); random or anneal (measurements "
                        "only, Collie's way): for comparison, as the recall benchmark does")
    p.add_argument("--seed", type=int, help="the choosers' seed (default: the space's search.seed)")
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


def _group_entry(space: Space, scorer: Scorer, g: Group) -> dict[str, Any]:
    """A best design with its ties (the values they span) and `rdmalab-model explain` of it."""
    shown = ", ".join(span_text(k, g.spans[k], space.dims[k]) if k in g.spans else f"{k}={v}"
                      for k, v in g.best.design.items())
    return {**_design_entry(space, g.best), "tied": len(g.members), "spans": g.spans, "shown": shown,
            "explain": scorer.explain(space.params(g.best.design))}


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
    profile, profile_source = choose_profile(args, space, measured, console)
    model_cfg = RunConfig(backend="model", root=root, bin_dir=bin_dir, run_id=run_id, model_bin=model_bin,
                          profile=profile)
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
    search.progress = None
    valued = [s for s in scored if s.value is not None]
    groups = collapse_ties(space, search, valued, int(space.search["top"]))
    best = [g.best for g in groups]
    front = pareto_front(space, valued)
    sample = stratified(space, valued, int(space.search["stratified"]), int(space.search["seed"]))
    console.print(f"model: {len(scored)} designs scored in {search_s:.1f} s ({scorer.processes} model processes); "
                  f"{len(scored) - len(valued)} without a value; Pareto front: {len(front)} designs",
                  markup=False, highlight=False)
    best_entries = [_group_entry(space, scorer, g) for g in groups]
    _print_best(space, groups, best_entries, console)

    # 2. Measure on the backend; 3. anomalies.
    summary: dict[str, Any] = {
        "schema_version": kSummarySchema, "written": utc_now(), "space": {
            "id": space.id, "file": str(space.path), "title": space.exp.title, "description": space.exp.description,
            "dimensions": space.dims, "baseline": space.baseline, "objective": dataclasses.asdict(space.objective),
            "costs": {k: e.text for k, e in space.costs.items()}, "constraints": [c.text for c in space.constraints],
            "mode": space.exp.mode},
        "backend": args.backend if measured else None,
        "planted_fault": planted_fault() if measured and args.backend == "softnic" else None,
        "profile": scorer.request(space.params(space.baseline))["profile"], "profile_source": profile_source,
        "strategy": args.strategy if measured else None,
        "search": {"method": "exhaustive" if exhaustive else "annealing", "grid_designs": designs,
                   "scored": len(scored), "valued": len(valued), "seconds": round(search_s, 2),
                   "model_processes": scorer.processes, "seed": space.search["seed"]},
        "best": best_entries,
        "pareto": [_design_entry(space, s) for s in front],
        "cloud": [{"value": s.value, "costs": s.costs} for s in _spread(ranked(space, valued), kCloudDesigns)],
        "measured": [], "anomalies": [], "typical_ratio": None, "what_matters": what_matters(space, search, [])}
    rc = 0
    if measured:
        try:
            rc = _measure(space, search, args, bin_dir, model_bin, inv, work, run_id, deadline, console, best, front,
                          sample, summary, root, profile)
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


def choose_profile(args: argparse.Namespace, space: Space, measured: bool, console: Console) -> tuple[Optional[str], str]:
    """The model's profile and where it comes from: --profile; else, measuring, the profile
    fitted to the backend (anomalies are then the backend's, not the model's mismatch with it);
    else the space's, with a warning when measuring."""
    if args.profile:
        return args.profile, "given"
    if not measured or args.backend == "model":
        return None, "space"
    fitted = model_pass.fitted_profile(args.backend)
    if fitted is not None:
        console.print(f"model profile: {fitted}, fitted to {args.backend} (--profile to choose another)",
                      markup=False, highlight=False, soft_wrap=True)
        return str(fitted), "fitted"
    console.print(f"warning: no profile is fitted to {args.backend} (./run_all.py calibrate --backend {args.backend} "
                  f"fits one): the model predicts with the space's profile "
                  f"{space.exp.model_params.get('profile', 'cx3')}, so the anomalies include the model's own mismatch "
                  f"with {args.backend}", markup=False, highlight=False, soft_wrap=True)
    return None, "space"


def _measure(space: Space, search: Search, args: argparse.Namespace, bin_dir: pathlib.Path,
             model_bin: Optional[pathlib.Path], inv: inventory_mod.Inventory, work: pathlib.Path, run_id: str,
             deadline: Optional[float], console: Console, best: list[Scored], front: list[Scored],
             sample: list[Scored], summary: dict[str, Any], root: pathlib.Path, profile: Optional[str]) -> int:
    from .. import cli
    bench_schema = json.loads(cli.kBenchSchema.read_text()) if cli.kBenchSchema.is_file() else None
    kv_schema = json.loads(cli.kKvSchema.read_text()) if cli.kKvSchema.is_file() else None
    cfg = RunConfig(backend=args.backend, root=root, bin_dir=bin_dir, run_id=run_id, model_bin=model_bin,
                    bench_schema=bench_schema, kv_schema=kv_schema, profile=profile)
    measurer = Measurer(space, cfg, inv, Store(work), console, work, args.budget_points, deadline)
    finder = Finder(space, search, measurer, summary["planted_fault"])
    if summary["planted_fault"]:
        console.print(f"softnic runs with a planted fault: {kPlantedFaultEnv}={summary['planted_fault']}",
                      markup=False, highlight=False, soft_wrap=True)
    seed = int(space.search["seed"]) if args.seed is None else args.seed
    if args.strategy == "model":
        room = max(1, args.budget_points // kFirstShare)
        chosen = _selection(space, best, front, sample, room)
        what = "baseline, best, Pareto front, stratified sample"
        chooser: Any = ModelChooser(space, search, seed)
    else:
        chosen = [(space.baseline, ["baseline"])]
        what = "the baseline"
        chooser = (RandomChooser(space, seed) if args.strategy == "random"
                   else AnnealChooser(space, seed, args.budget_points))
    # Every point of the budget costs what a point of the space does (the fixed warmup and duration).
    about = estimate_s(space.exp, space.exp.params, [{}] * args.budget_points, 1, args.backend)
    console.print(f"measuring {len(chosen)} designs on {args.backend} ({what}), then choosing ({args.strategy}) and "
                  f"shrinking each anomaly until the budget of {args.budget_points} points is spent (about "
                  f"{describe_s(about)})", markup=False, highlight=False)
    why = {repr(d): w for d, w in chosen}
    explorer = Explorer(space, measurer, finder, chooser, why, summary, work, console)
    explorer.observe([d for d, _ in chosen])
    stopped = explorer.run()
    coverage = getattr(chooser, "coverage", None)
    console.print(f"measured {len(explorer.observations)} designs ({stopped}); typical measured/predicted "
                  f"{summary['typical_ratio'] or float('nan'):.3g}, anomalous past {summary['ratio_limit']:.3g}x "
                  f"either way; {len(explorer.written)} anomalies"
                  + (f"; value pairs not measured: {coverage.missing()} of {len(coverage.possible)}" if coverage else ""),
                  markup=False, highlight=False)
    summary["anomalies"] = [dataclasses.asdict(a) for a in explorer.written]
    summary["not_shrunk"] = [{"kind": a.kind, "design": a.design, "severity": a.severity}
                             for a in explorer.unshrunk + explorer.pending()]
    summary["unconfirmed"] = [{"kind": a.kind, "design": a.design, "severity": a.severity}
                              for a in explorer.unconfirmed]
    all_obs = finder.observe(measurer.rows, run=False)
    summary["measured"] = [_observation_entry(search, o, why.get(repr(o.design), ["shrink"])) for o in all_obs]
    summary["what_matters"] = what_matters(space, search, all_obs)
    summary["stopped"] = stopped
    summary["coverage"] = ({"pairs": len(coverage.possible), "missing": coverage.missing()} if coverage else None)
    summary["measure_file"] = str(measurer.path)
    summary["points_run"] = measurer.ran
    return kInterrupted if measurer.interrupted else 0


def _observation_entry(search: Search, o: Observation, why: list[str]) -> dict[str, Any]:
    s = search.evaluate([o.design])[0]
    return {"design": o.design, "why": why, "measured": o.measured, "predicted": o.predicted, "ratio": o.ratio,
            "point": o.point_id, "bottleneck": s.score.bottleneck, "costs": s.costs}


def _print_best(space: Space, groups: list[Group], entries: list[dict[str, Any]], console: Console) -> None:
    t = Table(title=f"best designs on the model ({space.objective.describe()}; ties within 1% that differ only in "
                    f"dimensions without effect shown once)")
    for c in ("#", "design", "predicted", "bottleneck"):
        t.add_column(c)
    for i, (g, e) in enumerate(zip(groups, entries), 1):
        t.add_row(str(i), e["shown"] + (f" ({len(g.members)} designs)" if len(g.members) > 1 else ""),
                  f"{g.best.value:.4g}", g.best.score.bottleneck_label or g.best.score.bottleneck or "")
    console.print(t)
