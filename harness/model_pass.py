"""The model's predictions beside every measured run: after a run on softnic or verbs, the same
experiments (same suite reduction) on the model for the paper's NIC (each experiment's
model_params.profile), stored under OUT/model/ as a `--backend model` run stores them, so that
each figure draws them dashed and each conclusion is judged on them. Where a profile fitted to the
measured backend exists (a profile file named after the backend in the model's profile
directory: model/profiles/softnic.yaml, or RDMALAB_MODEL_PROFILES/softnic.yaml where that variable
names the directory, as it does for rdmalab-model), the experiments are predicted with it too, into
their own store, OUT/fitted/BACKEND/ (a prediction's point id does not name the profile, so the
two predictions cannot share one directory), which the report draws beside the others; an
experiment that sweeps NIC profiles itself (guide16 Fig. 10) keeps them, so it has no fitted pass.
Stored predictions are kept (resume) unless --force."""
from __future__ import annotations

import dataclasses
import os
import pathlib
from typing import Any, Optional

from rich.console import Console

from . import experiment as experiment_mod
from . import inventory as inventory_mod
from .coordinator import Coordinator, Options, load_all, new_run_id, plan
from .runner import RunConfig
from .store import Store, fitted_root
from .suites import Target
from .validate import model_binary
from .yamlloc import ConfigError

kModel = "model"
kRoot = pathlib.Path(__file__).resolve().parents[1]
kProfileDirEnv = "RDMALAB_MODEL_PROFILES"    # rdmalab-model's own override of its profile directory


@dataclasses.dataclass(frozen=True)
class Pass:
    """Where the model's predictions of a measured run go, and which profile makes them."""
    out: pathlib.Path
    profile: Optional[str]      # a profile file; None: each experiment's own (the paper's NIC)
    what: str                   # for the console
    # The measured backend whose run this pass predicts as it ran (its sweep, the programs'
    # defaults, no paper_testbed); None: the paper's testbed.
    predicts_run_of: Optional[str] = None


def profile_dir() -> pathlib.Path:
    return pathlib.Path(os.environ.get(kProfileDirEnv) or kRoot / "model" / "profiles")


def fitted_profile(backend: str) -> Optional[pathlib.Path]:
    """The profile fitted to `backend`, where one exists: the profile file named after it."""
    path = profile_dir() / f"{backend}.yaml"
    return path if path.is_file() else None


def passes(out: pathlib.Path, backend: str) -> list[Pass]:
    found = [Pass(pathlib.Path(out), None, "the papers' NICs")]
    if (path := fitted_profile(backend)) is not None:
        found.append(Pass(fitted_root(out, backend), str(path), f"the profile fitted to {backend} ({path})", backend))
    return found


def program_defaults(experiments: list[experiment_mod.Experiment]) -> dict[str, dict[str, Any]]:
    """Per experiment, the program's own default of each parameter whose default the model departs
    from (unset, it predicts the papers' scale: tx_depth, qp, threads, workers, batch): where a point
    leaves one unset, the program ran with its default, and a prediction of that run must take it.
    The model's description states the program's value (`departs`); every other default is the
    program's own declaration already."""
    found: dict[str, dict[str, Any]] = {}
    for exp in experiments:
        desc = exp.program
        if desc is None or exp.mode is None:
            continue
        found[exp.id] = {name: p.departs_from["default"] for name, p in desc.params.items()
                         if p.departs_from and p.departs_from.get("default") is not None and desc.takes(exp.mode, name)}
    return found


def predict(targets: list[Target], backend: str, out: pathlib.Path, bin_dir: pathlib.Path,
            model_bin: Optional[pathlib.Path], force: bool, console: Console) -> int:
    """Runs every pass over the targets that the model supports; 0 when every prediction was
    made (or was stored already), 1 otherwise (the measured results are kept either way)."""
    model = model_binary(bin_dir, model_bin)
    if not model.is_file():
        console.print(f"model predictions skipped: {model} does not exist (build it: cmake --build build "
                      "--target rdmalab-model; or pass --no-model)", markup=False)
        return 1
    supported, own_profiles = [], []
    for t in targets:
        try:
            exp = experiment_mod.parse(t.path)
        except ConfigError:
            continue  # the measured run reported it already
        if kModel in exp.backends:
            supported.append(t)
            if "profile" in exp.parameter_names():
                own_profiles.append(t)
    rc = 0
    for p in passes(out, backend):
        # An experiment that sweeps NIC profiles (guide16 Fig. 10) names its own: a fitted profile would not apply.
        chosen = [t for t in supported if p.profile is None or t not in own_profiles]
        if not chosen:
            continue
        console.print(f"predicting {len(chosen)} experiment(s) on the model for {p.what} (--no-model skips this)",
                      markup=False, highlight=False)
        try:
            loaded = load_all(chosen, kModel, bin_dir, model_bin)
            store = Store(p.out)
            opts = Options(backend=kModel, resume=not force, force=force, sweep_backend=p.predicts_run_of)
            plans = plan(loaded.experiments, store, opts)
            defaults = program_defaults([e for e, _ in loaded.experiments]) if p.predicts_run_of else {}
        except ConfigError as exc:
            for m in exc.messages:
                console.print(m, markup=False, highlight=False, soft_wrap=True)
            console.print(f"model predictions for {p.what} not made: {len(exc.messages)} error(s) above", markup=False)
            rc = 1
            continue
        cfg = RunConfig(backend=kModel, root=kRoot, bin_dir=bin_dir, run_id=new_run_id(),
                        model_bin=model_bin, profile=p.profile, predicts_run_of=p.predicts_run_of,
                        program_defaults=defaults)
        coord = Coordinator(cfg, inventory_mod.load("local"), store, opts, console)
        rc = coord.run(plans) or rc
        if coord.interrupted:
            return rc
    return rc
