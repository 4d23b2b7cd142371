"""Suites (experiments/suites.yaml) and the resolution of run_all.py's positional arguments."""
from __future__ import annotations

import dataclasses
import pathlib
from typing import Optional

from . import yamlloc
from .checker import Checker, type_name
from .experiment import kBackends, kPapers
from .sweep import Reduction
from .yamlloc import ConfigError

SUITE_KEYS = {
    "description": ("string", True, "what the suite is for"),
    "experiments": ("list or 'all'", False, "experiment ids (default: all)"),
    "papers": ("list", False, "keep only experiments of these papers"),
    "backend": ("string", False, "backend when --backend is not given"),
    "reduce": ("mapping", False, "max_values (per swept parameter), repeats, timeout_s, params (overrides)"),
}
REDUCE_KEYS = ("max_values", "repeats", "timeout_s", "params")


@dataclasses.dataclass
class Target:
    path: pathlib.Path
    reduction: Reduction
    suite: Optional[str] = None


@dataclasses.dataclass
class Suite:
    name: str
    description: str
    experiments: list[str]
    backend: Optional[str]
    reduction: Reduction


def all_experiment_files(exp_dir: pathlib.Path) -> list[pathlib.Path]:
    return sorted(p for p in exp_dir.glob("*.yaml") if p.name != "suites.yaml")


def load_suites(exp_dir: pathlib.Path) -> dict[str, Suite]:
    path = exp_dir / "suites.yaml"
    if not path.exists():
        return {}
    data = yamlloc.load(path)
    ck = Checker(str(path))
    if not isinstance(data, dict):
        raise ConfigError(f"{path}:1: suites.yaml must map suite names to suites")
    known_ids = {p.stem for p in all_experiment_files(exp_dir)}
    suites = {}
    for name, spec in data.items():
        where = f"suite {name}"
        if not isinstance(spec, dict):
            ck.error(data.line_of(name), where, f"must be a mapping, got {type_name(spec)}")
            continue
        ck.keys(spec, where, SUITE_KEYS, ("description",))
        ids = sorted(known_ids)
        if "experiments" in spec and spec["experiments"] != "all":
            lst = spec["experiments"]
            if not isinstance(lst, list):
                ck.error(spec.line_of("experiments"), where, "experiments must be a list of ids or 'all'")
            else:
                for i, e in enumerate(lst):
                    if e not in known_ids:
                        ck.error(lst.line_of(i), where, f"no experiment {e!r} in {exp_dir}; "
                                 f"valid: {', '.join(sorted(known_ids))}")
                ids = list(lst)
        if "papers" in spec:
            papers = spec["papers"]
            if not isinstance(papers, list):
                ck.error(spec.line_of("papers"), where, f"papers must be a list of {', '.join(kPapers)}")
            else:
                for i in range(len(papers)):
                    ck.choice(papers, i, where, kPapers)
                ids = [e for e in ids if e.split("-")[0] in papers]
        if "backend" in spec:
            ck.choice(spec, "backend", where, kBackends)
        red = Reduction()
        if (rnode := ck.mapping(spec, "reduce", where)) is not None:
            ck.keys(rnode, f"{where}.reduce", REDUCE_KEYS)
            for key in ("max_values", "repeats"):
                if key in rnode and ck.typed(rnode, key, f"{where}.reduce", (int,), "a positive integer") and rnode[key] < 1:
                    ck.error(rnode.line_of(key), f"{where}.reduce", f"{key} must be at least 1")
            if "timeout_s" in rnode:
                ck.typed(rnode, "timeout_s", f"{where}.reduce", (int, float), "a number")
            params = ck.mapping(rnode, "params", f"{where}.reduce") or {}
            red = Reduction(max_values=rnode.get("max_values"), repeats=rnode.get("repeats"),
                            params=tuple(sorted(yamlloc.plain(params).items())), timeout_s=rnode.get("timeout_s"))
        suites[name] = Suite(name, spec.get("description", ""), ids, spec.get("backend"), red)
    ck.raise_if_any()
    return suites


def resolve(args: list[str], exp_dir: pathlib.Path, suites: dict[str, Suite]) -> list[Target]:
    targets: list[Target] = []
    for arg in args:
        p = pathlib.Path(arg)
        if arg.endswith((".yaml", ".yml")) or p.is_file():
            if not p.is_file():
                raise ConfigError(f"{arg}: no such experiment file")
            targets.append(Target(p, Reduction()))
        elif arg in suites:
            s = suites[arg]
            targets += [Target(exp_dir / f"{e}.yaml", s.reduction, s.name) for e in s.experiments]
        elif (exp_dir / f"{arg}.yaml").is_file():
            targets.append(Target(exp_dir / f"{arg}.yaml", Reduction()))
        else:
            raise ConfigError(f"{arg!r} is neither an experiment file, a suite ({', '.join(suites) or 'none'}) "
                              f"nor an experiment id in {exp_dir} (see run_all.py --list)")
    return targets
