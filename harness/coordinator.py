"""Runs a list of experiments: validation first, then resume/force decisions, then every
point with progress, failure handling and a summary; the index and CSVs at the end."""
from __future__ import annotations

import concurrent.futures
import dataclasses
import datetime
import json
import pathlib
import secrets
import signal
import time
from typing import Any, Optional

from rich.console import Console
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn,
                           TimeRemainingColumn)
from rich.table import Table

from . import experiment as experiment_mod
from . import validate
from .experiment import Experiment
from .inventory import Inventory
from .runner import PointRunner, RunConfig, hosts_needed, place
from .store import Store, StoreError, kFinalStatuses, kNotModeled, kNotRun, kUnsupported
from .suites import Target
from .sweep import Point, expand, fixed_params, make_point, rows_of
from .yamlloc import ConfigError

kLabelChars = 48      # of a point's parameters in the progress line
kModelWorkers = 4     # predictions asked of rdmalab-model at once (each a short process; the store writes stay in order)
# What a point costs, for the estimate a dry run prints and a long run asks --yes for: a
# prediction (one rdmalab-model process; 200 points took 1.8 s on this 2-core VM, kModelWorkers
# at once), and a measured point's start-up besides its warmup and duration (processes,
# rendezvous, connection: 0.45 s per softnic point of collie-verbs here).
kModelPointS = 0.01
kMeasuredOverheadS = 0.45
kTimedParams = ("warmup", "duration")    # a measured point's own seconds
kConfirmAboveS = 3600                    # a run estimated longer than this runs only with --yes


@dataclasses.dataclass
class Options:
    backend: str
    sweep_backend: Optional[str] = None    # whose sweep blocks are expanded (default: backend); the fitted pass's measured one
    resume: bool = False
    force: bool = False
    fail_fast: bool = False
    dry_run: bool = False


@dataclasses.dataclass
class Planned:
    exp: Experiment
    points: list[Point]
    todo: list[Point]
    stored: dict[str, str]     # point id -> stored status


def new_run_id() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(3)


@dataclasses.dataclass
class Loaded:
    experiments: list[tuple[Experiment, Target]]
    skipped: list[Experiment]   # named by a suite but not supported on the backend


def load_all(targets: list[Target], backend: str, bin_dir: pathlib.Path, model_bin: Optional[pathlib.Path]) -> Loaded:
    """Validates every file before anything runs: its schema, then its mode and parameters
    against the description of the program that runs it on the backend (validate.py); all
    errors of all files are reported together. A suite runs the experiments that support the
    backend and skips the others (they are listed); an experiment asked for by name on a
    backend it does not support is an error."""
    errors: list[str] = []
    loaded = []
    skipped = []
    seen = set()
    model_desc = validate.load_model(bin_dir, model_bin, errors) if backend == "model" else None
    for t in targets:
        try:
            exp = experiment_mod.parse(t.path)
        except ConfigError as exc:
            errors += exc.messages
            continue
        if exp.id in seen:
            continue
        seen.add(exp.id)
        if backend not in exp.backends:
            if t.suite is not None:
                skipped.append(exp)
                continue
            errors.append(f"{exp.path}:{exp.node.line_of('backends')}: experiment {exp.id} does not run on backend "
                          f"{backend}; its backends: {', '.join(exp.backends)}")
            continue
        bound = validate.load(exp, backend, bin_dir, model_desc, errors)
        if bound is None:
            continue
        if t.reduction.timeout_s:
            bound = dataclasses.replace(bound, timeout_s=float(t.reduction.timeout_s))
        errors += validate.check_reduction(bound, t.reduction.params, f"suites.yaml: suite {t.suite}")
        loaded.append((bound, t))
    if backend == "softnic" and not (bin_dir / "softnic").is_file():
        errors.append(f"softnic backend: {bin_dir / 'softnic'} does not exist; build it (cmake --build build)")
    if errors:
        raise ConfigError(errors)
    return Loaded(loaded, skipped)


def plan(loaded: list[tuple[Experiment, Target]], store: Store, opts: Options) -> list[Planned]:
    plans = []
    conflicts = []
    for exp, t in loaded:
        points = expand(exp, t.reduction, opts.sweep_backend or opts.backend)
        if opts.backend == "model":
            points = [p for p in points if p.repeat == 0]  # a prediction does not vary between repeats
        stored = {}
        for p in points:
            st = store.status(opts.backend, exp.id, p.id)
            if st is not None:
                stored[p.id] = st
        if opts.force:
            todo = list(points)
        elif opts.resume:
            todo = [p for p in points if stored.get(p.id) not in kFinalStatuses]
        else:
            todo = list(points)
            if stored:
                done = sum(1 for s in stored.values() if s in kFinalStatuses)
                conflicts.append(f"{exp.id}: {len(stored)} of {len(points)} points already stored in "
                                 f"{store.experiment_dir(opts.backend, exp.id)} ({done} ok, not modeled or unsupported, "
                                 f"{len(stored) - done} failed)")
        plans.append(Planned(exp, points, todo, stored))
    if conflicts and not opts.dry_run:
        raise ConfigError(conflicts + ["pass --resume to run only the missing (and failed) points, or --force to "
                                       "re-run everything (replaced results move to superseded/, nothing is deleted)"])
    return plans


@dataclasses.dataclass
class Sized:
    """An experiment's size without its points: what a dry run shows and a long run confirms."""
    exp: Experiment
    points: int
    todo: int
    stored_ok: int
    stored_failed: int
    first: Optional[Point]        # the first point to run (its command is shown)
    estimate_s: float             # of the points to run


def estimate_s(exp: Experiment, fixed: dict[str, Any], rows: list[dict[str, Any]], repeats: int, backend: str) -> float:
    """Seconds the rows' points take: a prediction each on the model; warmup + duration and the
    start-up on a measured backend."""
    if backend == "model":
        return len(rows) * kModelPointS
    timed = sum(float({**fixed, **row}.get(k) or 0) for row in rows for k in kTimedParams)
    return repeats * (timed + len(rows) * kMeasuredOverheadS)


def size(loaded: list[tuple[Experiment, Target]], store: Store, opts: Options) -> list[Sized]:
    """Every experiment's points counted without making them: a million-point sweep answers in
    seconds. Points are made (their ids hashed) only for an experiment with stored points, to
    tell which of them are stored."""
    out = []
    for exp, t in loaded:
        if store.has_points(opts.backend, exp.id):
            pl = plan([(exp, t)], store, dataclasses.replace(opts, dry_run=True))[0]
            ok = sum(1 for st in pl.stored.values() if st in kFinalStatuses)
            est = estimate_s(exp, {}, [p.params for p in pl.todo], 1, opts.backend)   # a repeat is a point here
            out.append(Sized(exp, len(pl.points), len(pl.todo), ok, len(pl.stored) - ok, pl.todo[0] if pl.todo else None,
                             est))
            continue
        rows, swept = rows_of(exp, t.reduction, opts.sweep_backend or opts.backend)
        repeats = 1 if opts.backend == "model" else (t.reduction.repeats or exp.repeats)
        fixed = fixed_params(exp, t.reduction)
        first = make_point(exp, 0, {**fixed, **rows[0]}, 0, swept) if rows else None
        out.append(Sized(exp, len(rows) * repeats, len(rows) * repeats, 0, 0, first,
                         estimate_s(exp, fixed, rows, repeats, opts.backend)))
    return out


def confirm(sized: list[Sized], backend: str, yes: bool) -> None:
    """A run estimated past kConfirmAboveS stops before it starts unless --yes says to go on."""
    total = sum(sz.estimate_s for sz in sized)
    if total > kConfirmAboveS and not yes:
        raise ConfigError(f"{sum(sz.todo for sz in sized)} points to run on {backend}, estimated {describe_s(total)}: "
                          f"more than {describe_s(kConfirmAboveS)}; pass --yes to run them (--dry-run shows each "
                          f"experiment's estimate)")


def describe_s(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class Coordinator:
    def __init__(self, cfg: RunConfig, inventory: Inventory, store: Store, opts: Options, console: Console):
        self.cfg, self.inventory, self.store, self.opts, self.console = cfg, inventory, store, opts, console
        self.summary: dict[str, dict[str, Any]] = {}
        self.interrupted = False

    def dry_run(self, sized: list[Sized]) -> None:
        table = Table(title=f"dry run: backend {self.opts.backend}, results in {self.store.root}")
        for col in ("experiment", "points", "to run", "stored done", "stored failed", "estimate"):
            table.add_column(col)
        examples = []
        for sz in sized:
            example = ""
            if sz.first is not None and self.opts.backend != "model":
                inv = self.inventory.sized(hosts_needed(sz.exp, sz.first), str(self.cfg.bin_dir))
                runner = PointRunner(self.cfg, self.inventory, self.store)
                first = place(sz.exp, sz.first, inv)[0]
                example = " ".join(runner.role_argv(sz.exp, sz.first, first, "HOST:PORT", None))
            elif sz.first is not None:
                runner = PointRunner(self.cfg, self.inventory, self.store)
                example = f"rdmalab-model predict --json < {json.dumps(runner.model_request(sz.exp, sz.first))}"
            table.add_row(sz.exp.id, str(sz.points), str(sz.todo), str(sz.stored_ok), str(sz.stored_failed),
                          describe_s(sz.estimate_s))
            if example:
                examples.append(f"{sz.exp.id}: {example}")
        self.console.print(table)
        total = sum(sz.estimate_s for sz in sized)
        each = ("a prediction each" if self.opts.backend == "model"
                else f"warmup + duration + ~{kMeasuredOverheadS} s start-up each")
        self.console.print(f"estimated time: {describe_s(total)} for {sum(sz.todo for sz in sized)} points ({each})",
                           markup=False, highlight=False)
        self.console.print("first command of each experiment:", markup=False)
        for line in examples:
            self.console.print(f"  {line}", markup=False, highlight=False, soft_wrap=True)

    def run(self, plans: list[Planned]) -> int:
        total = sum(len(pl.todo) for pl in plans)
        runner = PointRunner(self.cfg, self.inventory, self.store)
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        stop_requested = False

        def request_stop(signum: int, frame: Any) -> None:
            # Python drops an exception raised where it cannot propagate (an at-fork hook, a
            # finalizer), so the flag is what makes an interrupt stick: it is checked after every point.
            nonlocal stop_requested
            stop_requested = True
            raise KeyboardInterrupt

        previous = {sig: signal.signal(sig, request_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
        failed_any = False
        # The model's points share nothing, so their predictions are asked ahead, a few at once;
        # measured points run one at a time (they share the host and its fabric).
        ahead = concurrent.futures.ThreadPoolExecutor(kModelWorkers) if self.opts.backend == "model" else None
        columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(), TextColumn("{task.fields[last]}"))
        try:
            with Progress(*columns, console=self.console, transient=False) as progress:
                task = progress.add_task("points", total=total, last="")
                for pl in plans:
                    predicted = {p.id: ahead.submit(runner.run, pl.exp, p) for p in pl.todo} if ahead else {}
                    s = self.summary.setdefault(pl.exp.id, {"ok": 0, kNotModeled: 0, kUnsupported: 0, "failed": 0,
                                                            "skipped": len(pl.points) - len(pl.todo),
                                                            "seconds": 0.0, "errors": [], "unsupported_reasons": []})
                    for point in pl.todo:
                        label = point.label()
                        short = label if len(label) <= kLabelChars else label[:kLabelChars - 1] + "…"
                        progress.update(task, description=f"{pl.exp.id} [{short}]")
                        if point.id in pl.stored:
                            self.store.supersede(self.opts.backend, pl.exp.id, point.id, stamp)
                        t0 = time.monotonic()
                        record = predicted[point.id].result() if ahead else runner.run(pl.exp, point)
                        s["seconds"] += time.monotonic() - t0
                        self.store.write_point(record)
                        if record["status"] == "ok":
                            s["ok"] += 1
                            h = record.get("headline") or {}
                            last = f"{h['metric']}={h['value']:.4g}" if h.get("value") is not None else "ok"
                        elif record["status"] in kNotRun:
                            s[record["status"]] += 1
                            last = kNotRun[record["status"]]
                            if record["status"] == kUnsupported:
                                s["unsupported_reasons"].append(f"{point.label()}: {record[kUnsupported]}")
                        else:
                            failed_any = True
                            s["failed"] += 1
                            s["errors"].append(f"{point.label()}: {record['error']}")
                            last = "[red]failed[/red]"
                            progress.console.print(f"[red]FAILED[/red] {pl.exp.id} [{point.label()}]: {record['error']}")
                        progress.update(task, advance=1, last=f"last: {last}")
                        if stop_requested:
                            raise KeyboardInterrupt
                        if record["status"] not in kFinalStatuses and self.opts.fail_fast:
                            self.console.print("[red]--fail-fast: stopping after the first failed point[/red]")
                            return 1
        except KeyboardInterrupt:
            self.interrupted = True
            self.console.print("[yellow]interrupted: every role of the running point was stopped; finished points "
                               "are stored. Re-run with --resume to run only the missing points.[/yellow]")
            return 130
        except StoreError as exc:
            self.console.print(f"[red]result store: {exc}[/red]")
            return 1
        finally:
            if ahead:
                ahead.shutdown(cancel_futures=True)
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            runner.close()
            self.finish(plans)
        return 1 if failed_any else 0

    def finish(self, plans: list[Planned]) -> None:
        for pl in plans:
            self.store.export_csv(self.opts.backend, pl.exp.id)
        self.store.write_index()
        table = Table(title=f"summary (backend {self.opts.backend}, results in {self.store.root})")
        for col in ("experiment", "ok", "not modeled", "unsupported", "failed", "skipped (stored)", "time"):
            table.add_column(col)
        for exp_id, s in self.summary.items():
            table.add_row(exp_id, str(s["ok"]), str(s[kNotModeled]), str(s[kUnsupported]),
                          f"[red]{s['failed']}[/red]" if s["failed"] else "0", str(s["skipped"]), f"{s['seconds']:.1f} s")
        self.console.print(table)
        for exp_id, s in self.summary.items():
            for reason in s["unsupported_reasons"][:5]:
                self.console.print(f"  {exp_id}: unsupported on this host: {reason}", markup=False, highlight=False,
                                   soft_wrap=True)
            for e in s["errors"][:5]:
                self.console.print(f"  {exp_id}: {e}")

