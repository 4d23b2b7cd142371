"""run_all.py's command line: validation, planning and the run. Drawing the figures and the
report is the caller's (run_all.py): the harness does not depend on plots/, which reads what
it stores."""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pathlib
import sys
from typing import Optional

from rich.console import Console
from rich.table import Table

from . import inventory as inventory_mod
from . import model_pass
from .coordinator import Coordinator, Options, confirm, kConfirmAboveS, load_all, new_run_id, plan, size
from .experiment import kBackends, kPapers
from .runner import RunConfig
from .store import Store
from .suites import all_experiment_files, load_suites, resolve
from .sweep import expand
from .yamlloc import ConfigError

kRoot = pathlib.Path(__file__).resolve().parents[1]
kDefaultSuite = "default"
kConfigError = 2
kInterrupted = 130
kBenchSchema = kRoot / "benchmarks" / "schema" / "rdmalab-bench.schema.json"
kKvSchema = kRoot / "kv" / "schema" / "rdmalab-kv.schema.json"

USAGE = """run_all.py [EXPERIMENT.yaml|ID|SUITE ...] [options]     run experiments (no argument: the default suite)
       run_all.py paper herd14|guide16|nosql|roce [options]   a paper's experiments on the backend and the model,
                                                              then that paper's report (results/report/PAPER/)
       run_all.py explore SPACE.yaml [options]                search a design space on the model, measure the best
                                                              designs, shrink the anomalies (run_all.py explore --help)
       run_all.py calibrate [--backend B] [--cluster C] [--name NAME] [--extends PROFILE] [--validate]
                                                              fit a model profile to the backend's verb-level
                                                              points (harness/calibrate.py)
       run_all.py check --profile P [--backend B] [--suite NAME] [--tolerance auto|PCT]
                                                              measure the calibration suite, fail (exit 1) where
                                                              the NIC falls short of profile P, naming what
       run_all.py import perftest|ucx_perftest|qperf FILE...  store other tools' results as points
       run_all.py score [--out DIR] [--backend B] [--against DIR]
                                                              how well the profile fitted to B predicts what B
                                                              measured, beside the measurement's own spread
       run_all.py report [--out DIR]                          figures + HTML report from stored results"""


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="run_all.py", usage=USAGE,
                                description="Run rdmalab experiments, store results with provenance, draw figures.")
    p.add_argument("targets", nargs="*", help="experiment files, experiment ids or suite names")
    p.add_argument("--cluster", default="local", help="inventory YAML, or a built-in: local (default), netns")
    p.add_argument("--backend", choices=kBackends, help="softnic (default unless the suite says otherwise), verbs, model")
    p.add_argument("--out", default=str(kRoot / "results"), help="results directory (default: results/)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--resume", action="store_true", help="skip points already stored as ok; re-run failed ones")
    g.add_argument("--force", action="store_true", help="re-run every point; old results move to superseded/")
    p.add_argument("--dry-run", action="store_true", help="validate, expand and show what would run; run nothing")
    p.add_argument("--yes", action="store_true",
                   help=f"run even when the estimate passes {kConfirmAboveS // 60} min (without it, such a run prints its "
                        "estimate and stops)")
    p.add_argument("--list", action="store_true", help="list suites and experiments")
    p.add_argument("--fail-fast", action="store_true", help="stop at the first failed point")
    p.add_argument("--no-report", action="store_true", help="do not draw figures and the report after the run")
    p.add_argument("--no-model", action="store_true",
                   help="softnic, verbs: do not also predict the run's experiments on the model (the papers' NICs, "
                        "and the profile fitted to the backend where one exists)")
    p.add_argument("--bin-dir", default=str(kRoot / "build" / "bin"), help="where the binaries are (default build/bin)")
    p.add_argument("--model-bin", help="rdmalab-model executable (default BIN_DIR/rdmalab-model)")
    p.add_argument("--profile",
                   help="model backend: NIC profile (default: the experiment's paper_testbed.profile, then its "
                        "model_params.profile, else cx3; a point's 'profile' parameter wins)")
    p.add_argument("--experiments-dir", default=str(kRoot / "experiments"), help="where ids and suites are looked up")
    return p


def list_all(exp_dir: pathlib.Path, console: Console) -> int:
    suites = load_suites(exp_dir)
    t = Table(title="suites")
    for c in ("suite", "experiments", "description"):
        t.add_column(c)
    for s in suites.values():
        t.add_row(s.name, str(len(s.experiments)), s.description)
    console.print(t)
    from .experiment import parse
    t = Table(title=f"experiments in {exp_dir}")
    for c in ("id", "points", "roles", "backends", "title"):
        t.add_column(c)
    errors = []
    for path in all_experiment_files(exp_dir):
        try:
            exp = parse(path)
        except ConfigError as exc:
            errors += exc.messages
            continue
        roles = ", ".join(f"{r.name}x{r.count if isinstance(r.count, int) else '$' + r.count}" for r in exp.roles)
        t.add_row(exp.id, str(len(expand(exp))), roles, ",".join(exp.backends), exp.title)
    console.print(t)
    for e in errors:
        console.print(f"[red]{e}[/red]")
    return 2 if errors else 0


@dataclasses.dataclass
class Outcome:
    """The exit status, and the results directory whose report the caller draws (None: no report)."""
    rc: int
    report_out: Optional[pathlib.Path] = None
    paper: Optional[str] = None         # a report of this paper's experiments only


def paper(argv: list[str], console: Console) -> Outcome:
    """The paper's suite on the chosen backend, the same suite on the model (the paper's NIC
    profiles); the caller then draws a report of that paper's experiments only. Stored points
    are kept (resume) unless --force."""
    papers = [p for p in kPapers if p != "none"]
    pp = argparse.ArgumentParser(prog="run_all.py paper", usage="run_all.py paper PAPER [run_all.py options]")
    pp.add_argument("paper", choices=papers, help="the paper whose experiments run")
    known, rest = pp.parse_known_args(argv)
    args = parser().parse_args([known.paper, *rest])
    if args.targets != [known.paper]:
        console.print(f"run_all.py paper: only one paper and options, got {' '.join(args.targets)}", markup=False)
        return Outcome(kConfigError)
    again = [] if args.force or args.resume else ["--resume"]
    rc = main([known.paper, *rest, "--no-report", "--no-model", *again], console).rc
    if rc in (kConfigError, kInterrupted):
        return Outcome(rc)
    if args.backend != "model":
        shared = ["--out", args.out, "--bin-dir", args.bin_dir, "--experiments-dir", args.experiments_dir]
        shared += (["--model-bin", args.model_bin] if args.model_bin else []) + (["--profile", args.profile] if args.profile else [])
        model_rc = main([known.paper, "--backend", "model", *shared, "--force" if args.force else "--resume",
                         "--no-report"], console).rc
        if model_rc in (kConfigError, kInterrupted):
            return Outcome(model_rc)
        rc = rc or model_rc
    return Outcome(rc, pathlib.Path(args.out), known.paper)


def main(argv: Optional[list[str]] = None, console: Optional[Console] = None) -> Outcome:
    """Everything but `report` (run_all.py's own): validate, plan, run."""
    argv = list(sys.argv[1:] if argv is None else argv)
    console = console or Console(stderr=True)
    if argv and argv[0] == "paper":
        return paper(argv[1:], console)
    if argv and argv[0] == "check":
        from . import check
        return Outcome(check.main(argv[1:], console, kRoot, lambda a, c: main(a, c).rc))
    if argv and argv[0] == "calibrate":
        from . import calibrate
        return Outcome(calibrate.main(argv[1:], console, kRoot, lambda a, c: main(a, c).rc))
    args = parser().parse_args(argv)
    exp_dir = pathlib.Path(args.experiments_dir)
    try:
        if args.list:
            return Outcome(list_all(exp_dir, console))
        suites = load_suites(exp_dir)
        default_run = not args.targets
        targets = resolve(args.targets or [kDefaultSuite], exp_dir, suites)
        suite_backends = {suites[t].backend for t in (args.targets or [kDefaultSuite]) if t in suites and suites[t].backend}
        backend = args.backend or (suite_backends.pop() if len(suite_backends) == 1 else "softnic")
        bin_dir = pathlib.Path(args.bin_dir).resolve()
        model_bin = pathlib.Path(args.model_bin).resolve() if args.model_bin else None
        loaded = load_all(targets, backend, bin_dir, model_bin)
        if loaded.skipped:
            console.print(f"skipped on backend {backend} (not among their backends): "
                          + ", ".join(f"{e.id} ({', '.join(e.backends)})" for e in loaded.skipped),
                          markup=False, highlight=False)
        inv = inventory_mod.load(args.cluster)
        if any(h.launcher == "netns" for h in inv.hosts) or (inv.builtin and inv.name == "netns"):
            if os.geteuid() != 0:
                raise ConfigError("--cluster netns creates network namespaces and needs root (or use --cluster local)")
        store = Store(args.out)
        opts = Options(backend=backend, resume=args.resume or (default_run and not args.force), force=args.force,
                       fail_fast=args.fail_fast, dry_run=args.dry_run)
        sized = size(loaded.experiments, store, opts)
        if not args.dry_run:
            confirm(sized, backend, args.yes)
            plans = plan(loaded.experiments, store, opts)
    except ConfigError as exc:
        for m in exc.messages:
            console.print(m, markup=False, highlight=False, soft_wrap=True)  # one line each, for grep
        console.print(f"run_all.py: {len(exc.messages)} error(s); nothing was run", markup=False)
        return Outcome(kConfigError)
    schema = json.loads(kBenchSchema.read_text()) if kBenchSchema.is_file() else None
    kv_schema = json.loads(kKvSchema.read_text()) if kKvSchema.is_file() else None
    cfg = RunConfig(backend=backend, root=kRoot, bin_dir=bin_dir, run_id=new_run_id(), model_bin=model_bin,
                    bench_schema=schema, kv_schema=kv_schema, profile=args.profile)
    coord = Coordinator(cfg, inv, store, opts, console)
    if args.dry_run:
        coord.dry_run(sized)
        return Outcome(0)
    rc = coord.run(plans)
    if backend != "model" and not args.no_model and not coord.interrupted:
        ran = [t for _, t in loaded.experiments]
        rc = model_pass.predict(ran, backend, store.root, bin_dir, model_bin, args.force, console) or rc
        coord.interrupted = rc == kInterrupted
    return Outcome(rc, None if args.no_report or coord.interrupted else store.root)
