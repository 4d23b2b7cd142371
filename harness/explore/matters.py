"""Which dimensions matter: the objective's range when one dimension alone moves (on the model
along the baseline's line, as measured along the measured line that holds most designs), and
the best designs with ties collapsed: designs within kTieShare of each other that differ only in
dimensions without effect there are one design, shown once with the values they span."""
from __future__ import annotations

import dataclasses
from typing import Any, Optional

from .anomalies import Observation
from .search import Scored, Search, ranked
from .space import Space

kTieShare = 0.01            # designs this close on the model are tied
kTieScan = 100              # ranked designs looked at per group asked for (a tie can hold many)


@dataclasses.dataclass
class Group:
    best: Scored                              # the representative: the first of the group in the ranking
    members: list[Scored]
    spans: dict[str, list[Any]]               # dimension -> the values the group takes (dimensions without effect)


def _close(a: Optional[float], b: Optional[float]) -> bool:
    return a is not None and b is not None and abs(a - b) <= kTieShare * max(abs(a), abs(b))


def tied(space: Space, search: Search, rep: Scored, s: Scored) -> bool:
    """Whether s is rep moved in dimensions that change nothing at rep: within kTieShare, and each
    dimension in which they differ, moved alone at rep, stays within kTieShare too."""
    if not _close(rep.value, s.value):
        return False
    differ = [d for d in space.dims if rep.design[d] != s.design[d]]
    moved = [{**rep.design, d: s.design[d]} for d in differ]
    if not all(space.allowed(m) for m in moved):
        return False
    return all(_close(rep.value, m.value) for m in search.evaluate(moved))


def collapse_ties(space: Space, search: Search, valued: list[Scored], count: int) -> list[Group]:
    """The best `count` designs of the ranking, ties collapsed."""
    groups: list[Group] = []
    for s in ranked(space, valued)[: max(count, 1) * kTieScan]:
        home = next((g for g in groups if tied(space, search, g.best, s)), None)
        if home is not None:
            home.members.append(s)
            continue
        if len(groups) == count:
            break
        groups.append(Group(s, [s], {}))
    for g in groups:
        for d in space.dims:
            values = {repr(m.design[d]): m.design[d] for m in g.members}
            if len(values) > 1:
                g.spans[d] = [v for v in space.dims[d] if repr(v) in values]
    return groups


def what_matters(space: Space, search: Search, observations: list[Observation]) -> list[dict[str, Any]]:
    """Per dimension, the objective's range when it alone moves: predicted along the baseline's
    line (the other dimensions at the baseline), measured along the line of measured designs that
    differ only in it and hold most of its values. Largest predicted spread first."""
    metric = space.objective.metric
    out = []
    for dim, values in space.dims.items():
        line = [d for d in ({**space.baseline, dim: v} for v in values) if space.allowed(d)]
        predicted = [p for s in search.evaluate(line) if (p := s.score.metric(metric)) is not None and p > 0]
        lines: dict[tuple[Any, ...], list[Observation]] = {}
        for o in observations:
            if o.measured is not None and o.measured > 0:
                rest = tuple(o.design[d] for d in space.dims if d != dim)
                lines.setdefault(rest, []).append(o)
        longest = max(lines.values(), key=len, default=[])
        measured = [o.measured for o in longest] if len(longest) > 1 else []
        out.append({"dimension": dim, "values": len(values),
                    "predicted": [min(predicted), max(predicted)] if predicted else None,
                    "predicted_spread": max(predicted) / min(predicted) if predicted else None,
                    "measured": [min(measured), max(measured)] if measured else None,
                    "measured_spread": max(measured) / min(measured) if measured else None,
                    "measured_at": {d: v for d, v in longest[0].design.items() if d != dim} if measured else None,
                    "measured_designs": len(measured)})
    return sorted(out, key=lambda m: -(m["predicted_spread"] or 0))


def span_text(dim: str, values: list[Any], every: list[Any]) -> str:
    """dim=LO..HI when the values are numbers and a run of the dimension's own, else dim=A|B|C."""
    idx = [every.index(v) for v in values]
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
    if numbers and len(values) > 2 and idx == list(range(idx[0], idx[0] + len(idx))):
        return f"{dim}={values[0]}..{values[-1]}"
    return f"{dim}={'|'.join(map(str, values))}"
