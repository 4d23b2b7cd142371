"""An experiment's mode and parameters checked against the description of the program that
runs it (describe.py), at load time, before anything runs, on every backend and in --dry-run.

On softnic and verbs the program is the experiment's `binary` (default: whichever of
kPrograms in --bin-dir declares the experiment's mode); on the model backend it is
rdmalab-model. Errors, each with file:line and the nearest valid names:
- an unknown parameter; a parameter the harness sets (scope "coordinator");
- a parameter the mode does not take; with systems (mode kv), one the point's system does not read;
- a value of the wrong type, out of range or not among the choices.
Parameters that only label points (`labels`) and role counts (`count: $name`) are not checked
and never passed on; the model backend consumes `profile` and `link` itself. Sweep blocks are
checked for the backends they run on that the program serves (the description's `backends`).
"""
from __future__ import annotations

import dataclasses
import difflib
import pathlib
from typing import Any, Optional

from .checker import Checker, type_name
from .describe import Description, DescribeError, Param, describe, kScopeCoordinator
from .experiment import Experiment, kLinks
from .sweep import block_rows
from .yamlloc import LocDict

# The programs the harness runs by name from --bin-dir; which one runs an experiment is the
# one whose description declares the experiment's mode.
kPrograms = ("rdmalab-bench", "rdmalab-kv")
kModelProgram = "rdmalab-model"
# Keys of a point the model backend consumes itself: the NIC profile (the model point's
# `profile`) and the link layer (over the experiment's `link`).
kModelHarnessParams = ("profile", "link")
kMaxNear = 3
kNearCutoff = 0.7        # difflib's ratio: 'windw' ~ 'window' 0.91, ~ 'bind' 0.67 (not offered)
kTypeText = {"integer": "an integer", "number": "a number", "boolean": "true or false", "string": "a string"}
kBuildHint = "build: cmake --build build, or pass --bin-dir"


def model_binary(bin_dir: pathlib.Path, model_bin: Optional[pathlib.Path]) -> pathlib.Path:
    return pathlib.Path(model_bin) if model_bin else bin_dir / kModelProgram


def hidden_params(exp: Experiment) -> set[str]:
    """Parameters that are never checked against nor passed to a program: labels and role counts."""
    return set(exp.labels) | {r.count for r in exp.roles if isinstance(r.count, str)}


def _near(word: str, names: list[str]) -> str:
    near = difflib.get_close_matches(str(word), names, n=kMaxNear, cutoff=kNearCutoff)
    return f" (did you mean {' or '.join(map(repr, near))}?)" if near else ""


def resolve_program(exp: Experiment, bin_dir: pathlib.Path, errors: list[str]) -> Optional[tuple[str, Description]]:
    """(binary, description) of the program that runs the experiment on softnic or verbs; None
    after appending the reason to errors."""
    where = f"{exp.path}:{exp.binary_line()}: experiment"
    names = [exp.binary] if exp.binary else list(kPrograms)
    missing: list[str] = []
    found: list[tuple[str, Description]] = []
    for name in names:
        path = pathlib.Path(name) if pathlib.Path(name).is_absolute() else bin_dir / name
        if not path.is_file():
            missing.append(name)
            continue
        try:
            found.append((name, describe(path)))
        except DescribeError as exc:
            errors.append(f"{where}: binary {name}: {exc}")
            return None
    if exp.binary:
        if missing:
            errors.append(f"{where}: binary {exp.binary} not found in {bin_dir} ({kBuildHint})")
            return None
        return found[0]
    if exp.mode is None:  # the default program; the mode check then names the valid modes
        if not found:
            return _missing(where, missing, bin_dir, errors)
        return next(((n, d) for n, d in found if n == kPrograms[0]), found[0])
    for name, desc in found:
        if exp.mode in desc.modes:
            return name, desc
    if missing:
        return _missing(where, missing, bin_dir, errors, exp.mode)
    valid = [f"{', '.join(d.modes)} ({d.program})" for _, d in found]
    every = [m for _, d in found for m in d.modes]
    errors.append(f"{exp.path}:{exp.node.line_of('mode')}: experiment: mode {exp.mode!r} is not valid"
                  f"{_near(exp.mode, every)}; valid: {'; '.join(valid)} (an rdmalab-model mode runs on "
                  f"the model only: backends: [model])")
    return None


def _missing(where: str, missing: list[str], bin_dir: pathlib.Path, errors: list[str],
             mode: Optional[str] = None) -> None:
    what = f"no program in {bin_dir} takes mode {mode!r}: " if mode and len(missing) < len(kPrograms) else ""
    errors.append(f"{where}: {what}binary {' and '.join(missing)} not found in {bin_dir} ({kBuildHint})")
    return None


@dataclasses.dataclass
class _Use:
    """One place a parameter is given: its key's line, its values with their lines, and the
    systems of the points it reaches (empty: no system)."""
    where: str
    key: str
    line: int
    values: list[tuple[Any, int]]
    systems: set[Any]
    role: Optional[str] = None  # given in roles.ROLE.params: only that role's processes get it


def _uses(exp: Experiment, covered: set[str], model: bool) -> list[_Use]:
    data: LocDict = exp.node
    fixed_system = exp.params.get("system")
    raw = data.get("sweep")
    raw_blocks = list(raw) if isinstance(raw, list) else [raw] if isinstance(raw, dict) else []
    uses: list[_Use] = []
    all_systems: set[Any] = set()
    for i, (block, node) in enumerate(zip(exp.sweep, raw_blocks)):
        if not covered & set(block.get("backends", covered)):
            continue
        systems = {row.get("system", fixed_system) for row in block_rows(block)} - {None}
        all_systems |= systems
        for kind in ("grid", "zip"):
            for key, values in block.get(kind, {}).items():
                table = node[kind]  # parse() kept only mappings of non-empty lists
                vals = [(v, table[key].line_of(j)) for j, v in enumerate(values)]
                where = f"sweep[{i}].{kind}" if isinstance(raw, list) else f"sweep.{kind}"
                uses.append(_Use(where, key, table.line_of(key), vals, systems))
    if not all_systems and fixed_system is not None:
        all_systems = {fixed_system}
    nodes: list[tuple[str, Optional[str], Any]] = [("params", None, data.get("params"))]
    roles = data.get("roles") if isinstance(data.get("roles"), dict) else {}
    nodes += [(f"roles.{name}.params", name, spec.get("params")) for name, spec in roles.items()
              if isinstance(spec, dict)]
    if model:
        nodes += [(key, None, data.get(key)) for key in ("model_params", "paper_testbed")]
    for where, role, node in nodes:
        if isinstance(node, dict):
            for key, value in node.items():
                uses.append(_Use(where, key, node.line_of(key), [(value, node.line_of(key))], all_systems, role))
    return uses


def value_problem(p: Param, value: Any) -> Optional[str]:
    items = [value]
    if p.list and isinstance(value, str) and p.type != "string":
        items = [s.strip() for s in value.split(",")]
        try:
            items = [int(s) if p.type == "integer" else float(s) for s in items]
        except ValueError:
            return f"{p.name} must be {kTypeText[p.type]} or a comma-separated list of them, got {value!r}"
    for v in items:
        ok = {"integer": isinstance(v, int) and not isinstance(v, bool),
              "number": isinstance(v, (int, float)) and not isinstance(v, bool),
              "boolean": isinstance(v, bool),
              "string": isinstance(v, (str, int, float)) and not isinstance(v, bool)}[p.type]
        if not ok:
            lists = " or a comma-separated list of them" if p.list else ""
            return f"{p.name} must be {kTypeText[p.type]}{lists}, got {type_name(v)} {v!r}"
        unit = f" {p.unit}" if p.unit else ""
        if p.type in ("integer", "number") and ((p.min is not None and v < p.min) or (p.max is not None and v > p.max)):
            lo = "" if p.min is None else f"{p.min:g}"
            hi = "" if p.max is None else f"{p.max:g}"
            return f"{p.name} {v!r} is out of range; valid: {lo}..{hi}{unit}"
        if p.choices is not None and v not in p.choices:
            return (f"{p.name} {v!r} is not valid{_near(v, [str(c) for c in p.choices])}; "
                    f"valid: {', '.join(map(str, p.choices))}")
    return None


def check(exp: Experiment, desc: Description, backend: str) -> list[str]:
    """Every mistake of the experiment's mode and parameters for this program, as
    'FILE:LINE: where: message' lines."""
    ck = Checker(str(exp.path))
    model = backend == "model"
    prog = desc.program
    mode = exp.mode
    if mode is None:
        if len(desc.modes) == 1:
            mode = next(iter(desc.modes))
        else:
            ck.error(exp.node.line, "experiment", f"mode is required for {prog}; valid: {', '.join(desc.modes)}")
    elif mode not in desc.modes:
        ck.error(exp.node.line_of("mode"), "experiment",
                 f"mode {mode!r} is not valid for {prog}{_near(mode, list(desc.modes))}; valid: {', '.join(desc.modes)}")
        mode = None
    covered = set(desc.backends) if backend in desc.backends else {backend}
    hidden = hidden_params(exp)
    settable = desc.settable(mode) if mode else [n for n, p in desc.params.items() if p.scope != kScopeCoordinator]
    systems_param = desc.params.get("system")
    system_names = list(desc.systems)
    # A parameter no system lists is shared by all of them; one some systems list is theirs only.
    system_specific = {n for s in desc.systems.values() for n in s.params}
    seen: set[tuple[int, str, str]] = set()
    role_param = desc.params.get("role")
    if not model and role_param is not None and role_param.choices:
        roles_node = exp.node.get("roles")
        for r in exp.roles:
            if r.name not in role_param.choices:
                ck.error(roles_node.line_of(r.name), "roles", f"role {r.name!r} is not a role of {prog}"
                         f"{_near(r.name, list(role_param.choices))}; valid: {', '.join(role_param.choices)}")

    def error(line: int, where: str, message: str) -> None:
        if (line, where, message) not in seen:  # a fixed parameter is checked once per system
            seen.add((line, where, message))
            ck.error(line, where, message)

    for use in sorted(_uses(exp, covered, model), key=lambda u: u.line):
        key = use.key
        if key in hidden:
            continue
        if model and key in kModelHarnessParams:
            for v, line in use.values:
                if key == "link" and v not in kLinks:
                    error(line, use.where, f"link {v!r} is not valid{_near(v, list(kLinks))}; valid: {', '.join(kLinks)}")
                elif key == "profile" and not isinstance(v, str):
                    error(line, use.where, f"profile must be a NIC profile name, got {type_name(v)} {v!r}")
            continue
        p = desc.params.get(key)
        if p is None:
            error(use.line, use.where, f"unknown parameter {key!r}{_near(key, settable)}; "
                                       f"{prog}{f' mode {mode}' if mode else ''} takes: {', '.join(settable)}")
            continue
        if p.scope == kScopeCoordinator:
            error(use.line, use.where, f"parameter {key!r} is set by the harness for every run (from the inventory, "
                                       f"the placement and timeout_s); an experiment cannot set it")
            continue
        if mode and key not in desc.modes[mode].params:
            others = ", ".join(m.name for m in desc.modes.values() if key in m.params)
            error(use.line, use.where, f"parameter {key!r} is not taken by mode {mode} of {prog}"
                                       f"{f' (modes that take it: {others})' if others else ''}"
                                       f"{_near(key, settable)}; mode {mode} takes: {', '.join(settable)}")
            continue
        if use.role is not None and p.roles is not None and use.role not in p.roles:
            error(use.line, use.where, f"parameter {key!r} is read by the {' and '.join(p.roles)} "
                                       f"role{'s' if len(p.roles) > 1 else ''} of {prog}, not by role {use.role}; "
                                       "give it to that role, or in params")
            continue
        if key in system_specific:
            deaf = [x for x in sorted(use.systems, key=str) if x in desc.systems and key not in desc.systems[x].params]
            if deaf:
                readers = ", ".join(x.name for x in desc.systems.values() if key in x.params)
                error(use.line, use.where, f"parameter {key!r} is not read by system{'s' if len(deaf) > 1 else ''} "
                                           f"{', '.join(map(str, deaf))} of {prog} (systems that read it: {readers}); "
                                           "set it only where the sweep gives those systems")
        for v, line in use.values:
            problem = value_problem(p, v)
            if problem is None and p is systems_param and p.choices is None and system_names and v not in system_names:
                problem = f"system {v!r} is not valid{_near(v, system_names)}; valid: {', '.join(system_names)}"
            if problem:
                error(line, use.where, problem)
    return ck.errors


def check_reduction(exp: Experiment, params: tuple[tuple[str, Any], ...], where: str) -> list[str]:
    """A suite's reduce.params values, for the fixed parameters of a loaded experiment that they
    override, checked as the experiment's own values are."""
    problems = []
    for key, value in params:
        p = exp.program.params.get(key) if exp.program is not None else None
        if key in exp.params and p is not None and (problem := value_problem(p, value)):
            problems.append(f"{where}: reduce.params: {problem} (overriding {exp.id}'s {key})")
    return problems


def load(exp: Experiment, backend: str, bin_dir: pathlib.Path, model_desc: Optional[Description],
         errors: list[str]) -> Optional[Experiment]:
    """The experiment bound to the program that runs it on the backend (binary resolved, mode
    filled in for a one-mode program), or None with the reasons appended to errors."""
    if backend == "model":
        if model_desc is None:
            return None
        binary, desc = exp.binary, model_desc.for_mode(exp.mode)
    else:
        found = resolve_program(exp, bin_dir, errors)
        if found is None:
            return None
        binary, desc = found
    problems = check(exp, desc, backend)
    if problems:
        errors.extend(problems)
        return None
    mode = exp.mode if exp.mode is not None else next(iter(desc.modes))
    return dataclasses.replace(exp, binary=binary, mode=mode, program=desc)


def load_model(bin_dir: pathlib.Path, model_bin: Optional[pathlib.Path], errors: list[str]) -> Optional[Description]:
    model = model_binary(bin_dir, model_bin)
    if not model.is_file():
        errors.append(f"model backend: {model} does not exist; build it (cmake --build build --target rdmalab-model) "
                      "or pass --model-bin PATH")
        return None
    try:
        return describe(model)
    except DescribeError as exc:
        errors.append(f"model backend: {exc}")
        return None


