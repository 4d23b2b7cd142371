"""The space file (SPACE.yaml): an experiment's fixed part plus dimensions, constraints, costs,
an objective and a baseline point, validated as strictly as an experiment.

The experiment keys (mode, roles, params, model_params, ...) and every dimension's values are
checked by the experiment validator itself: the space becomes an experiment whose sweep is the
grid of its dimensions, keeping the space file's lines, so a misspelled dimension or a value out
of range is reported at its line of SPACE.yaml with the nearest valid names, against the
descriptions of the program that runs it and of rdmalab-model. The keys only the explorer reads
are checked here, with the same file:line messages.
"""
from __future__ import annotations

import ast
import dataclasses
import difflib
import itertools
import math
import operator
import pathlib
import random
from typing import Any, Iterator, Optional

from .. import experiment as experiment_mod
from .. import yamlloc
from ..checker import Checker, type_name
from ..experiment import Experiment
from ..yamlloc import ConfigError, LocDict, LocList

# Keys of a space file that are an experiment's, passed on as they are.
kExperimentKeys = ("id", "title", "description", "binary", "mode", "roles", "params", "model_params", "paper_testbed",
                   "labels",
                   "timeout_s", "link", "backends", "repeats")
SPACE_KEYS = {
    "dimensions": ("mapping", True, "parameter -> [values] or {range: [LO, HI], step: N} or {range: [LO, HI], "
                                    "scale: log2}; any parameter of the mode or system, or a role count's label"),
    "constraints": ("list", False, "expressions every design must satisfy, e.g. 'threads <= 8' or "
                                   "'post_list <= tx_depth'; names: the point's parameters and the costs"),
    "cost": ("mapping", False, "cost name -> expression of the point's parameters (e.g. cores: threads); the Pareto "
                               "front trades the objective against them"),
    "objective": ("mapping", True, "{maximize|minimize: METRIC, per: COST, role: ROLE, aggregate: sum|mean|max|min}"),
    "baseline": ("mapping", True, "a value of every dimension: where anomalies are shrunk back to"),
    "search": ("mapping", False, "{seed, exhaustive_max, evaluations, top, stratified}"),
    "anomalies": ("mapping", False, "{ratio_threshold, collapse}"),
}
OBJECTIVE_KEYS = ("maximize", "minimize", "per", "role", "aggregate")
SEARCH_KEYS = {"seed": 1, "exhaustive_max": 20000, "evaluations": 4000, "top": 5, "stratified": 6}
ANOMALY_KEYS = {"ratio_threshold": 0.5, "collapse": 0.5}
# Metrics an objective may name; the model's search scores latencies with its analytic latency
# (its percentiles need the simulator, point by point), the measured side with the percentile.
kMaximized = ("mops", "gbps")
kMinimized = ("lat_us_p50", "lat_us_p99", "lat_us_mean", "pcie_bytes_per_op")
kAggregates = ("sum", "mean", "max", "min")
kRangeScales = ("linear", "log2")
kMaxRangeValues = 4096

_kBinOps = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
            ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow}
_kCompare = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
             ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.In: lambda a, b: a in b,
             ast.NotIn: lambda a, b: a not in b}
_kFunctions = {"min": min, "max": max, "abs": abs, "log2": math.log2}


class Expression:
    """A constraint or cost: arithmetic, comparisons, and/or/not, `in [..]`, min/max/abs/log2 over
    the point's names; nothing else of Python is reachable."""

    def __init__(self, text: str):
        self.text = text
        self.tree = ast.parse(text, mode="eval").body
        self.names = sorted({n.id for n in ast.walk(self.tree) if isinstance(n, ast.Name)} - set(_kFunctions))
        for node in ast.walk(self.tree):
            allowed = (ast.BoolOp, ast.And, ast.Or, ast.UnaryOp, ast.Not, ast.USub, ast.UAdd, ast.BinOp, ast.Compare,
                       ast.Name, ast.Load, ast.Constant, ast.List, ast.Tuple, ast.Call, *_kBinOps, *_kCompare)
            if not isinstance(node, allowed):
                raise ValueError(f"{type(node).__name__} is not allowed (use arithmetic, comparisons, and/or/not, "
                                 f"in [...], {', '.join(_kFunctions)})")
            if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name) and node.func.id in _kFunctions
                                                   and not node.keywords):
                raise ValueError(f"only {', '.join(_kFunctions)} may be called")

    def __call__(self, env: dict[str, Any]) -> Any:
        return self._eval(self.tree, env)

    def _eval(self, n: ast.AST, env: dict[str, Any]) -> Any:
        if isinstance(n, ast.Constant):
            return n.value
        if isinstance(n, ast.Name):
            return env[n.id]
        if isinstance(n, (ast.List, ast.Tuple)):
            return [self._eval(e, env) for e in n.elts]
        if isinstance(n, ast.BoolOp):
            values = (self._eval(v, env) for v in n.values)
            return all(values) if isinstance(n.op, ast.And) else any(values)
        if isinstance(n, ast.UnaryOp):
            v = self._eval(n.operand, env)
            return (not v) if isinstance(n.op, ast.Not) else (-v if isinstance(n.op, ast.USub) else v)
        if isinstance(n, ast.BinOp):
            return _kBinOps[type(n.op)](self._eval(n.left, env), self._eval(n.right, env))
        if isinstance(n, ast.Compare):
            left = self._eval(n.left, env)
            for op, right_node in zip(n.ops, n.comparators):
                right = self._eval(right_node, env)
                if not _kCompare[type(op)](left, right):
                    return False
                left = right
            return True
        if isinstance(n, ast.Call):
            return _kFunctions[n.func.id](*(self._eval(a, env) for a in n.args))  # type: ignore[attr-defined]
        raise ValueError(f"cannot evaluate {type(n).__name__}")


@dataclasses.dataclass
class Objective:
    metric: str
    maximize: bool
    per: Optional[str]           # a cost the metric is divided by (Mops per core)
    role: Optional[str]
    aggregate: Optional[str]

    def describe(self) -> str:
        return f"{'maximize' if self.maximize else 'minimize'} {self.metric}{f' per {self.per}' if self.per else ''}"


@dataclasses.dataclass
class Space:
    path: pathlib.Path
    id: str
    exp: Experiment                     # the space as an experiment: fixed part + the dimensions' grid
    dims: dict[str, list[Any]]          # in file order
    constraints: list[Expression]
    costs: dict[str, Expression]
    objective: Objective
    baseline: dict[str, Any]
    search: dict[str, Any]
    anomalies: dict[str, float]
    node: LocDict = dataclasses.field(repr=False, default=None)  # type: ignore[assignment]

    @property
    def size(self) -> int:
        return math.prod(len(v) for v in self.dims.values())

    def params(self, design: dict[str, Any]) -> dict[str, Any]:
        """A design's full parameters: the fixed ones and its dimensions' values."""
        return {**self.exp.params, **design}

    def costs_of(self, design: dict[str, Any]) -> dict[str, float]:
        env = self.params(design)
        return {name: float(expr(env)) for name, expr in self.costs.items()}

    def allowed(self, design: dict[str, Any]) -> bool:
        env = {**self.params(design), **self.costs_of(design)}
        return all(bool(c(env)) for c in self.constraints)

    def random_design(self, rng: random.Random, tries: int = 200) -> Optional[dict[str, Any]]:
        """A seeded random design the constraints allow; None after `tries` refused ones."""
        for _ in range(tries):
            d = {k: rng.choice(v) for k, v in self.dims.items()}
            if self.allowed(d):
                return d
        return None

    def designs(self) -> Iterator[dict[str, Any]]:
        """Every design of the grid that satisfies the constraints."""
        names = list(self.dims)
        for combo in itertools.product(*self.dims.values()):
            d = dict(zip(names, combo))
            if self.allowed(d):
                yield d


def _range_values(ck: Checker, node: LocDict, where: str) -> list[Any]:
    ck.keys(node, where, ("range", "step", "scale"), ("range",))
    rng = node.get("range")
    if not (isinstance(rng, list) and len(rng) == 2
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in rng) and rng[0] <= rng[1]):
        ck.error(node.line_of("range"), where, f"range must be [LO, HI] with numbers LO <= HI, got {rng!r}")
        return []
    lo, hi = rng
    scale = node.get("scale", "linear")
    if scale not in kRangeScales:
        ck.error(node.line_of("scale"), where, f"scale {scale!r} is not valid; valid: {', '.join(kRangeScales)}")
        return []
    integers = isinstance(lo, int) and isinstance(hi, int)
    if scale == "log2":
        if lo <= 0:
            ck.error(node.line_of("range"), where, f"a log2 range starts above 0, got {lo!r}")
            return []
        values = [lo * 2 ** i for i in range(int(math.floor(math.log2(hi / lo) + 1e-9)) + 1)]
    else:
        step = node.get("step", 1)
        if not isinstance(step, (int, float)) or isinstance(step, bool) or step <= 0:
            ck.error(node.line_of("step"), where, f"step must be a positive number, got {step!r}")
            return []
        integers = integers and isinstance(step, int)
        count = int(math.floor((hi - lo) / step + 1e-9)) + 1
        if count > kMaxRangeValues:
            ck.error(node.line, where, f"the range has {count} values; at most {kMaxRangeValues} (raise step)")
            return []
        values = [lo + i * step for i in range(count)]
    return [int(v) for v in values] if integers else [round(float(v), 12) for v in values]


def _dimensions(ck: Checker, data: LocDict) -> tuple[dict[str, list[Any]], LocDict]:
    """The dimensions' values, and the same as a sweep grid whose lines are the space file's."""
    dims: dict[str, list[Any]] = {}
    grid = LocDict()
    grid.path, grid.line, grid.key_lines = str(ck.path), data.line_of("dimensions"), {}
    node = ck.mapping(data, "dimensions", "space")
    if node is None:
        return dims, grid
    if not node:
        ck.error(data.line_of("dimensions"), "dimensions", "at least one dimension is needed")
    for name, spec in node.items():
        where = f"dimensions.{name}"
        if not ck.name(node, name, "dimensions", name):
            continue
        line = node.line_of(name)
        if isinstance(spec, dict):
            values = _range_values(ck, spec, where)
            lines = [line] * len(values)
        elif isinstance(spec, list) and spec:
            values, lines = list(spec), list(spec.item_lines)
            if len(set(map(repr, values))) != len(values):
                ck.error(line, "dimensions", f"{name} lists a value twice: {values}")
        else:
            ck.error(line, "dimensions", f"{name} must be a non-empty list of values or {{range: [LO, HI], ...}}, "
                                         f"got {type_name(spec)} {spec!r}")
            continue
        if not values:
            continue
        items = LocList(values)
        items.path, items.line, items.item_lines = str(ck.path), line, lines
        dims[name] = values
        grid[name] = items
        grid.key_lines[name] = line
    return dims, grid


def _expression(ck: Checker, node: Any, key: Any, where: str, names: list[str]) -> Optional[Expression]:
    text = node[key]
    line = node.line_of(key)
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        text = str(text)
    if not isinstance(text, str):
        ck.error(line, where, f"must be an expression (a string), got {type_name(text)} {text!r}")
        return None
    try:
        expr = Expression(text)
    except SyntaxError as exc:
        ck.error(line, where, f"{text!r} is not an expression: {exc.msg}")
        return None
    except ValueError as exc:
        ck.error(line, where, f"{text!r}: {exc}")
        return None
    for n in expr.names:
        if n not in names:
            near = difflib.get_close_matches(n, names, n=3, cutoff=0.6)
            hint = f" (did you mean {' or '.join(map(repr, near))}?)" if near else ""
            ck.error(line, where, f"{text!r} names {n!r}, which is not a parameter or cost{hint}; "
                                  f"valid: {', '.join(names)}")
            return None
    return expr


def _objective(ck: Checker, data: LocDict, costs: dict[str, Expression], roles: list[str]) -> Optional[Objective]:
    node = ck.mapping(data, "objective", "space")
    if node is None:
        return None
    ck.keys(node, "objective", OBJECTIVE_KEYS)
    goals = [k for k in ("maximize", "minimize") if k in node]
    if len(goals) != 1:
        ck.error(node.line, "objective", "give exactly one of maximize or minimize")
        return None
    goal = goals[0]
    metric = node[goal]
    valid = kMaximized if goal == "maximize" else kMinimized
    if metric not in valid:
        near = difflib.get_close_matches(str(metric), list(valid), n=1)
        ck.error(node.line_of(goal), "objective", f"{goal} {metric!r} is not valid"
                 f"{f' (did you mean {near[0]!r}?)' if near else ''}; valid: {', '.join(valid)}")
        return None
    per = node.get("per")
    if per is not None and (goal != "maximize" or per not in costs):
        ck.error(node.line_of("per"), "objective", f"per {per!r}: a maximized metric divided by a cost; costs: "
                                                   f"{', '.join(costs) or 'none (add cost:)'}")
    role = node.get("role")
    if role is not None and role not in roles:
        ck.error(node.line_of("role"), "objective", f"role {role!r} is not a role of the space; valid: {', '.join(roles)}")
    aggregate = node.get("aggregate")
    if aggregate is not None and aggregate not in kAggregates:
        ck.error(node.line_of("aggregate"), "objective", f"aggregate {aggregate!r} is not valid; valid: "
                                                         f"{', '.join(kAggregates)}")
    return Objective(metric, goal == "maximize", per, role, aggregate)


def _numbers(ck: Checker, data: LocDict, key: str, defaults: dict[str, Any]) -> dict[str, Any]:
    out = dict(defaults)
    node = ck.mapping(data, key, "space")
    if node is None:
        return out
    ck.keys(node, key, defaults)
    for k, v in node.items():
        if k in defaults:
            want_int = isinstance(defaults[k], int)
            ok = isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 and (not want_int or isinstance(v, int))
            if not ok:
                ck.error(node.line_of(k), key, f"{k} must be a {'non-negative integer' if want_int else 'positive number'}"
                                               f", got {type_name(v)} {v!r}")
            else:
                out[k] = v
    return out


def parse(path: str | pathlib.Path) -> Space:
    """The space file, every mistake as FILE:LINE (ConfigError); not yet checked against the
    programs' descriptions (bind() does that, for the backend)."""
    path = pathlib.Path(path)
    data = yamlloc.load(path)
    if not isinstance(data, dict):
        raise ConfigError(f"{path}:1: a space file must be a mapping, got {type_name(data)}")
    ck = Checker(str(path))
    ck.keys(data, "space", [*kExperimentKeys, *SPACE_KEYS], ["id", "title", "roles", "dimensions", "objective",
                                                             "baseline"])
    dims, grid = _dimensions(ck, data)
    # The experiment the space stands for: its own keys, and the dimensions as the sweep's grid.
    exp_node = LocDict({k: v for k, v in data.items() if k in kExperimentKeys})
    exp_node.path, exp_node.line = str(path), data.line
    exp_node.key_lines = {k: data.line_of(k) for k in exp_node}
    sweep = LocDict({"grid": grid})
    sweep.path, sweep.line, sweep.key_lines = str(path), grid.line, {"grid": grid.line}
    exp_node["sweep"] = sweep
    exp_node.key_lines["sweep"] = grid.line
    exp: Optional[Experiment] = None
    try:
        exp = experiment_mod.parse_node(path, exp_node)
    except ConfigError as exc:
        ck.errors += exc.messages
    names = sorted(set(dims) | (set(exp.params) if exp else set(data.get("params") or {})))
    costs: dict[str, Expression] = {}
    if (cnode := ck.mapping(data, "cost", "space")) is not None:
        for name in cnode:
            if ck.name(cnode, name, "cost", name) and (e := _expression(ck, cnode, name, f"cost.{name}", names)):
                costs[name] = e
    constraints: list[Expression] = []
    cons = data.get("constraints")
    if cons is not None and not isinstance(cons, list):
        ck.error(data.line_of("constraints"), "constraints", f"must be a list of expressions, got {type_name(cons)}")
    for i in range(len(cons) if isinstance(cons, list) else 0):
        if e := _expression(ck, cons, i, f"constraints[{i}]", sorted(set(names) | set(costs))):
            constraints.append(e)
    roles = list(data["roles"]) if isinstance(data.get("roles"), dict) else []
    objective = _objective(ck, data, costs, roles)
    baseline: dict[str, Any] = {}
    if (bnode := ck.mapping(data, "baseline", "space")) is not None:
        for name, value in bnode.items():
            if name not in dims:
                near = difflib.get_close_matches(str(name), list(dims), n=1)
                ck.error(bnode.line_of(name), "baseline", f"{name!r} is not a dimension"
                         f"{f' (did you mean {near[0]!r}?)' if near else ''}; dimensions: {', '.join(dims)}")
            elif value not in dims[name]:
                ck.error(bnode.line_of(name), "baseline", f"{name} {value!r} is not among the dimension's values: "
                                                          f"{', '.join(map(str, dims[name]))}")
            else:
                baseline[name] = value
        for name in dims:
            if name not in bnode:
                ck.error(bnode.line, "baseline", f"no value for dimension {name!r}; the baseline gives every dimension")
    search = _numbers(ck, data, "search", SEARCH_KEYS)
    anomalies = _numbers(ck, data, "anomalies", ANOMALY_KEYS)
    ck.raise_if_any()
    assert exp is not None and objective is not None
    space = Space(path.resolve(), exp.id, exp, dims, constraints, costs, objective, baseline, search, anomalies, data)
    _check_evaluable(space, data)
    return space


def _check_evaluable(space: Space, data: LocDict) -> None:
    """The costs and constraints evaluated at the baseline: a type mistake ('size < "x"') is a
    file:line error now, not a crash in the middle of a search."""
    ck = Checker(str(space.path))
    env = space.params(space.baseline)
    for name, expr in space.costs.items():
        try:
            env[name] = float(expr(env))
        except (TypeError, ValueError, ZeroDivisionError, ArithmeticError) as exc:
            ck.error(data["cost"].line_of(name), f"cost.{name}", f"{expr.text!r} fails at the baseline: {exc}")
    if not ck.errors:
        for i, expr in enumerate(space.constraints):
            try:
                ok = expr(env)
            except (TypeError, ValueError, ZeroDivisionError, ArithmeticError) as exc:
                ck.error(data["constraints"].line_of(i), f"constraints[{i}]", f"{expr.text!r} fails at the baseline: {exc}")
                continue
            if not ok:
                ck.error(data["constraints"].line_of(i), f"constraints[{i}]",
                         f"{expr.text!r} excludes the baseline; the baseline must be a valid design")
    ck.raise_if_any()
