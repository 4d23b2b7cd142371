"""Sweep expansion: an experiment (plus a suite's reductions) becomes a list of points.

A point is the full parameter set of one run plus its repeat number. Its id is a hash of
exactly those, so `--resume` recognises a finished point whatever order the sweep is in
and whatever else in the file changed.
"""
from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
from typing import Any, Optional

from .conclusions import pinned_x_values, plot_coordinates, same, values_of
from .conclusions import points_of as points_of_statement
from .experiment import Experiment


@dataclasses.dataclass(frozen=True)
class Reduction:
    """A suite's way of making an experiment smaller: keep at most max_values values per swept
    numeric parameter (first, last, evenly spaced between), override repeats, and override fixed
    parameters the experiment already has (e.g. a shorter duration)."""
    max_values: Optional[int] = None
    repeats: Optional[int] = None
    params: tuple[tuple[str, Any], ...] = ()
    timeout_s: Optional[float] = None


@dataclasses.dataclass
class Point:
    experiment: str
    index: int                        # position in the expanded sweep (for display only)
    params: dict[str, Any]            # fixed + swept, before role-specific overrides
    repeat: int
    roles: dict[str, int]             # role -> process count
    id: str

    def label(self) -> str:
        shown = ", ".join(f"{k}={v}" for k, v in self.params.items() if k in self.swept)
        return f"{shown or 'single point'} #{self.repeat}"

    swept: tuple[str, ...] = ()


def _numeric(values: list[Any]) -> bool:
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)


def thin(values: list[Any], max_values: Optional[int], pinned: tuple[Any, ...] = ()) -> list[Any]:
    """Fewer values of a numeric axis; categories (verbs, designs, flags) are all kept, since a
    figure without one of its series says less, not the same at lower resolution. Pinned values
    (those the experiment's conclusions are judged at) are kept on top of the evenly spaced ones."""
    if max_values is None or len(values) <= max_values or not _numeric(values):
        return list(values)
    if max_values == 1:
        picked = {0}
    else:
        step = (len(values) - 1) / (max_values - 1)
        picked = {round(i * step) for i in range(max_values)}
    picked |= {i for i, v in enumerate(values) if any(same(v, p) for p in pinned)}
    return [values[i] for i in sorted(picked)]


def point_id(experiment: str, params: dict[str, Any], repeat: int, roles: dict[str, int]) -> str:
    canon = json.dumps({"experiment": experiment, "params": params, "repeat": repeat, "roles": roles},
                       sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canon.encode()).hexdigest()[:16]


def _block_rows(block: dict[str, dict[str, list[Any]]], max_values: Optional[int],
                pinned: dict[str, tuple[Any, ...]]) -> list[dict[str, Any]]:
    grid = block.get("grid", {})
    zipped = block.get("zip", {})
    grid_axes = [[(k, v) for v in thin(vals, max_values, pinned.get(k, ()))] for k, vals in grid.items()]
    zip_rows: list[dict[str, Any]] = [{}]
    if zipped:
        n = len(next(iter(zipped.values())))
        numeric = all(_numeric(vals) for vals in zipped.values())
        pinned_rows = tuple(i for i in range(n) for k, vals in zipped.items() if any(same(vals[i], p) for p in pinned.get(k, ())))
        keep = thin(list(range(n)), max_values, pinned_rows) if numeric else list(range(n))
        zip_rows = [{k: vals[i] for k, vals in zipped.items()} for i in keep]
    rows = []
    for combo in itertools.product(*grid_axes):
        for zrow in zip_rows:
            rows.append({**dict(combo), **zrow})
    return rows


def block_rows(block: dict[str, dict[str, list[Any]]]) -> list[dict[str, Any]]:
    """The parameter rows of one sweep block, unreduced."""
    return _block_rows(block, None, {})


def rows_of(exp: Experiment, reduction: Reduction = Reduction(),
            backend: Optional[str] = None) -> tuple[list[dict[str, Any]], list[str]]:
    """The experiment's parameter rows (swept values only, each once, in sweep order) and the
    swept names; with `backend`, sweep blocks limited to other backends are left out."""
    swept_names: list[str] = []
    rows: list[dict[str, Any]] = []
    pinned = {exp.plot["x"]: tuple(pinned_x_values(exp.conclusions))} if exp.conclusions else {}
    blocks = [b for b in exp.sweep or [{}] if backend is None or backend in b.get("backends", [backend])]
    # A block's rows are distinct (the validator refuses a value or a zip row twice); only rows
    # of two blocks can repeat, so a key per row is kept only then (a million-point grid stays linear).
    seen: Optional[set[frozenset[tuple[str, Any]]]] = set() if len(blocks) > 1 else None
    for block in blocks:
        for table in (block.get("grid", {}), block.get("zip", {})):
            for k in table:
                if k not in swept_names:
                    swept_names.append(k)
        for row in _block_rows(block, reduction.max_values, pinned):
            if seen is not None:
                key = frozenset(row.items())
                if key in seen:
                    continue
                seen.add(key)
            rows.append(row)
    if backend is not None:
        rows += statement_rows(exp, rows, backend)
    return rows, swept_names


def fixed_params(exp: Experiment, reduction: Reduction = Reduction()) -> dict[str, Any]:
    """The experiment's fixed parameters, with the suite's overrides of those it has."""
    fixed = dict(exp.params)
    for key, value in reduction.params:
        if key in fixed:  # only fixed parameters: a suite never adds a flag an experiment does not use
            fixed[key] = value
    return fixed


def make_point(exp: Experiment, index: int, params: dict[str, Any], repeat: int, swept: list[str]) -> Point:
    roles = {r.name: (int(params[r.count]) if isinstance(r.count, str) else r.count) for r in exp.roles}
    p = Point(exp.id, index, params, repeat, roles, point_id(exp.id, params, repeat, roles))
    p.swept = tuple(swept)
    return p


def expand(exp: Experiment, reduction: Reduction = Reduction(), backend: Optional[str] = None) -> list[Point]:
    """The experiment's points; with `backend`, sweep blocks limited to other backends are left out."""
    fixed = fixed_params(exp, reduction)
    rows, swept_names = rows_of(exp, reduction, backend)
    repeats = reduction.repeats or exp.repeats
    points: list[Point] = []
    for row in rows:
        params = {**fixed, **row}
        for repeat in range(repeats):
            points.append(make_point(exp, len(points), params, repeat, swept_names))
    if exp.repeat_order == "round":  # every point once per round: their repeats share the host's load
        points.sort(key=lambda p: (p.repeat, p.index))
    return points


def _matches(row: dict[str, Any], coords: list[tuple[str, Any]]) -> int:
    """How many of a statement point's (parameter, value) coordinates a row has; a parameter
    the row does not carry (a `profile` label on a measured backend) matches any value."""
    return sum(1 for name, value in coords if name not in row or same(row[name], value))


def statement_rows(exp: Experiment, rows: list[dict[str, Any]], backend: str) -> list[dict[str, Any]]:
    """The rows a backend needs on top of its sweep to judge every conclusion: a statement point
    (x, series, facet) its blocks do not reach is made from the backend's nearest row with the
    point's values, so that the point runs where the blocks stop short (a GET fraction, a client
    count). A statement that names the backend in `not_on` adds nothing: it says why the backend
    cannot run it, and the report shows that reason."""
    if not rows:
        return []
    added: list[dict[str, Any]] = []
    for c in exp.conclusions:
        if backend in (c.get("not_on") or {}):
            continue
        for point in points_of_statement(c):
            coords = [(name, _declared(exp, name, value)) for name, value in plot_coordinates(exp.plot, point)]
            if any(_matches(r, coords) == len(coords) for r in itertools.chain(rows, added)):
                continue
            nearest = max(rows, key=lambda r: _matches(r, coords))  # the first of the best
            row = {**nearest, **{name: value for name, value in coords if name in nearest}}
            added.append(row)
    return added


def _declared(exp: Experiment, name: str, value: Any) -> Any:
    """The experiment's own spelling of a value a statement names ('1.0' of a compound series is 1.0)."""
    return next((v for v in values_of(name, exp.params, exp.sweep) if same(v, value)), value)
