"""A paper's conclusions as checkable statements: their schema in the experiment file, and their
evaluation on one set of values (a measured run, the model's prediction, the paper's own numbers).

A statement compares two values of the figure by their ratio and says which ratios make it hold:

  compare: a: {x, series?, facet?}, b: {...}      ratio = value(a) / value(b)
  trend:   {series?, facet?, from: X0, to: X1}    ratio = value(X1) / value(X0)

with `ratio_at_least` and/or `ratio_at_most` as the bounds. "Inbound WRITE beats READ at 32 B"
is a compare with ratio_at_least 1; "throughput falls beyond 256 QPs" a trend from 256 to the
last value with ratio_at_most 0.9. A statement whose values are missing from a run is
"not evaluated" there, with the reason, never counted as holding.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional

from . import yamlloc
from .checker import Checker, type_name
from .yamlloc import LocDict

kHolds = "holds"
kFails = "does not hold"
kNotEvaluated = "not evaluated"

CONCLUSION_KEYS = {
    "statement": ("string", True, "the paper's conclusion in words, e.g. 'inbound WRITE beats inbound READ at 32 B'"),
    "compare": ("mapping", False, "{a: POINT, b: POINT}: ratio = value(a) / value(b)"),
    "trend": ("mapping", False, "{series?, facet?, from: X0, to: X1}: ratio = value(X1) / value(X0)"),
    "ratio_at_least": ("number", False, "the statement holds if the ratio is at least this"),
    "ratio_at_most": ("number", False, "the statement holds if the ratio is at most this"),
    "source": ("string", False, "where the paper says it"),
    "not_on": ("mapping", False, "{BACKEND: why it cannot run the statement's points}, e.g. more client processes "
                                 "than a one-host softnic run can schedule; the report shows the reason there"),
}
kModel = "model"
POINT_KEYS = {
    "x": ("scalar", True, "value of plot.x"),
    "series": ("scalar", False, "value of plot.series (required when the plot has series; a list joins with '/')"),
    "facet": ("scalar", False, "value of plot.facet (required when the plot has facets)"),
}
TREND_KEYS = {
    "from": ("scalar", True, "the x value the ratio divides by"),
    "to": ("scalar", True, "the x value the ratio divides"),
    "series": POINT_KEYS["series"],
    "facet": POINT_KEYS["facet"],
}
kScalars = (str, int, float, bool)

# (facet, series, x) -> value, or None with the reason it is missing.
Lookup = Callable[[Any, Any, Any], tuple[Optional[float], str]]


@dataclasses.dataclass(frozen=True)
class Verdict:
    status: str                     # kHolds, kFails or kNotEvaluated
    ratio: Optional[float]
    numerator: Optional[float]
    denominator: Optional[float]
    reason: str                     # the bound it was judged by, or why it was not evaluated


def same(a: Any, b: Any) -> bool:
    """Parameter values match across YAML and JSON (32 and 32.0; 'UC' and 'UC')."""
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool) and not isinstance(b, bool):
        return float(a) == float(b)
    return a == b or str(a) == str(b)


def points_of(c: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The numerator and denominator points of a statement."""
    if "compare" in c:
        return c["compare"]["a"], c["compare"]["b"]
    t = c["trend"]
    common = {k: t[k] for k in ("series", "facet") if k in t}
    return {**common, "x": t["to"]}, {**common, "x": t["from"]}


def bounds_text(c: dict[str, Any]) -> str:
    lo, hi = c.get("ratio_at_least"), c.get("ratio_at_most")
    if lo is not None and hi is not None:
        return f"{lo:g} <= ratio <= {hi:g}"
    return f"ratio >= {lo:g}" if lo is not None else f"ratio <= {hi:g}"


def plot_coordinates(plot: dict[str, Any], p: dict[str, Any]) -> list[tuple[str, Any]]:
    """A statement point as (parameter, value) pairs: the plot's x, facet and each series parameter
    (a compound series value names one value per parameter, joined by '/')."""
    out = [(plot["x"], p["x"])] if plot.get("x") else []
    if "facet" in p and plot.get("facet"):
        out.append((plot["facet"], p["facet"]))
    if "series" in p and plot.get("series"):
        names = plot["series"] if isinstance(plot["series"], list) else [plot["series"]]
        parts = str(p["series"]).split("/") if len(names) > 1 else [p["series"]]
        out += list(zip(names, parts))
    return out


def point_text(p: dict[str, Any], plot: dict[str, Any]) -> str:
    parts = [f"{plot.get('x', 'x')}={p['x']}"]
    if "series" in p:
        s = plot.get("series")
        parts.insert(0, f"{'/'.join(s) if isinstance(s, list) else s}={p['series']}")
    if "facet" in p:
        parts.insert(0, f"{plot.get('facet')}={p['facet']}")
    return ", ".join(parts)


def evaluate(c: dict[str, Any], lookup: Lookup, plot: dict[str, Any], backend: Optional[str] = None) -> Verdict:
    """The verdict on one set of values; on a measured `backend` the statement names in `not_on`,
    not evaluated with the reason it gives."""
    if backend is not None and backend in (c.get("not_on") or {}):
        return Verdict(kNotEvaluated, None, None, None, f"{backend} cannot run it: {c['not_on'][backend]}")
    a, b = points_of(c)
    va, why_a = lookup(a.get("facet"), a.get("series"), a["x"])
    vb, why_b = lookup(b.get("facet"), b.get("series"), b["x"])
    missing = [f"{point_text(p, plot)}: {why}" for p, v, why in ((a, va, why_a), (b, vb, why_b)) if v is None]
    if missing:
        return Verdict(kNotEvaluated, None, va, vb, "; ".join(missing))
    if vb == 0:
        return Verdict(kNotEvaluated, None, va, vb, f"{point_text(b, plot)} is 0: no ratio")
    ratio = va / vb
    lo, hi = c.get("ratio_at_least"), c.get("ratio_at_most")
    ok = (lo is None or ratio >= lo) and (hi is None or ratio <= hi)
    return Verdict(kHolds if ok else kFails, ratio, va, vb, bounds_text(c))


def values_of(name: str, params: dict[str, Any], sweep: list[dict[str, Any]]) -> list[Any]:
    values = [params[name]] if name in params else []
    for block in sweep:
        for table in (block.get("grid", {}), block.get("zip", {})):
            values += table.get(name, [])
    return values


def _check_value(ck: Checker, node: LocDict, key: str, where: str, names: list[str],
                 params: dict[str, Any], sweep: list[dict[str, Any]], labels: list[str]) -> None:
    """A point's x, series or facet value must be one the experiment can produce."""
    value = node[key]
    if not isinstance(value, kScalars):
        ck.error(node.line_of(key), where, f"{key} must be a scalar, got {type_name(value)} {value!r}")
        return
    parts = str(value).split("/") if len(names) > 1 else [value]
    if len(parts) != len(names):
        ck.error(node.line_of(key), where, f"{key} {value!r} must name {len(names)} values joined by '/' "
                                          f"({'/'.join(names)})")
        return
    for name, part in zip(names, parts):
        valid = values_of(name, params, sweep)
        if name == "repeat" or name in labels and not valid:
            continue
        if not any(same(part, v) for v in valid):
            ck.error(node.line_of(key), where, f"{key} {value!r}: {name}={part} is not a value of the experiment; "
                                              f"valid: {', '.join(map(str, dict.fromkeys(valid)))}")


def _check_point(ck: Checker, node: Any, line: int, where: str, keys: dict[str, tuple], xs: tuple[str, ...],
                 plot: dict[str, Any], params: dict[str, Any], sweep: list[dict[str, Any]], labels: list[str]) -> None:
    if not isinstance(node, dict):
        ck.error(line, where, f"must be a mapping with {', '.join(keys)}, got {type_name(node)}")
        return
    ck.keys(node, where, keys, [k for k, v in keys.items() if v[1]])
    series = plot.get("series")
    series_names = series if isinstance(series, list) else [series] if series else []
    for key, names in (*((x, [plot.get("x")]) for x in xs), ("series", series_names), ("facet", [plot.get("facet")])):
        if key in node:
            if key in ("series", "facet") and not names[0]:
                ck.error(node.line_of(key), where, f"{key} given but the plot has no {key}")
            else:
                _check_value(ck, node, key, where, names, params, sweep, labels)
        elif key in ("series", "facet") and names and names[0]:
            ck.error(node.line, where, f"missing {key}: the plot has {key} {'/'.join(names)}")


def check(ck: Checker, data: LocDict, plot: dict[str, Any], params: dict[str, Any],
          sweep: list[dict[str, Any]], labels: list[str], backends: tuple[str, ...]) -> list[dict[str, Any]]:
    """The experiment's `conclusions`, validated against its plot and sweep."""
    if "conclusions" not in data:
        return []
    lst = data["conclusions"]
    if not isinstance(lst, list):
        ck.error(data.line_of("conclusions"), "conclusions", f"must be a list of statements, got {type_name(lst)}")
        return []
    if not plot:
        ck.error(data.line_of("conclusions"), "conclusions", "conclusions are judged on the plot's values; add a plot")
        return []
    for i, c in enumerate(lst):
        where = f"conclusions[{i}]"
        if not isinstance(c, dict):
            ck.error(lst.line_of(i), where, f"must be a mapping with statement, compare or trend, got {type_name(c)}")
            continue
        ck.keys(c, where, CONCLUSION_KEYS, ("statement",))
        for key in ("statement", "source"):
            if key in c:
                ck.typed(c, key, where, (str,), "a string")
        if ("compare" in c) == ("trend" in c):
            ck.error(c.line, where, "give exactly one of compare (two points) or trend (one series, from -> to)")
        if "ratio_at_least" not in c and "ratio_at_most" not in c:
            ck.error(c.line, where, "give ratio_at_least and/or ratio_at_most: the ratios for which it holds")
        for key in ("ratio_at_least", "ratio_at_most"):
            if key in c and ck.typed(c, key, where, (int, float), "a number") and c[key] <= 0:
                ck.error(c.line_of(key), where, f"{key} must be positive, got {c[key]}")
        if isinstance(c.get("ratio_at_least"), (int, float)) and isinstance(c.get("ratio_at_most"), (int, float)) \
                and c["ratio_at_least"] > c["ratio_at_most"]:
            ck.error(c.line_of("ratio_at_most"), where, f"ratio_at_most {c['ratio_at_most']} is below "
                                                      f"ratio_at_least {c['ratio_at_least']}: nothing could hold")
        if (not_on := ck.mapping(c, "not_on", where)) is not None:
            measured = [b for b in backends if b != kModel]
            for backend, why in not_on.items():
                if backend not in measured:
                    ck.error(not_on.line_of(backend), f"{where}.not_on", f"{backend!r} is not a measured backend of "
                                                                          f"the experiment; valid: {', '.join(measured)}")
                elif not isinstance(why, str) or not why.strip():
                    ck.error(not_on.line_of(backend), f"{where}.not_on", f"{backend}: give the reason the backend "
                                                                          f"cannot run the points, got {why!r}")
        if (cmp := ck.mapping(c, "compare", where)) is not None:
            ck.keys(cmp, f"{where}.compare", ("a", "b"), ("a", "b"))
            for side in ("a", "b"):
                if side in cmp:
                    _check_point(ck, cmp[side], cmp.line_of(side), f"{where}.compare.{side}", POINT_KEYS, ("x",),
                                 plot, params, sweep, labels)
        if (tr := ck.mapping(c, "trend", where)) is not None:
            _check_point(ck, tr, tr.line, f"{where}.trend", TREND_KEYS, ("from", "to"), plot, params, sweep, labels)
    return yamlloc.plain(lst)


def pinned_x_values(conclusions: list[dict[str, Any]]) -> list[Any]:
    """The x values statements need: a suite's reduction keeps them so that every run can judge them."""
    out: list[Any] = []
    for c in conclusions:
        for p in points_of(c):
            if not any(same(p["x"], v) for v in out):
                out.append(p["x"])
    return out
