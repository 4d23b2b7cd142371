"""Reading one metric out of a stored point: which role's documents, how processes combine.
Shared by the progress display (headline number) and plots/ (figures), so both agree."""
from __future__ import annotations

import statistics
from typing import Any, Optional

kSummed = ("mops", "gbps", "ops")


def default_aggregate(metric: str) -> str:
    return "sum" if metric in kSummed else "mean"


def role_values(rec: dict[str, Any], metric: str, role: Optional[str] = None) -> list[float]:
    """The metric of every process of `role` (default: the first role that reports it); a
    model-backend point has one pseudo-role 'model' that stands for all roles."""
    roles = rec.get("roles") or []
    names = [r["role"] for r in roles]
    wanted = [role] if role in names else list(dict.fromkeys(names))  # else the first role that has it
    for name in wanted:
        vals = []
        for r in roles:
            if r["role"] != name:
                continue
            for row in ((r.get("document") or {}).get("results") or []):
                v = row.get(metric)
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    vals.append(float(v))
        if vals:
            return vals
    return []


def point_value(rec: dict[str, Any], metric: str, role: Optional[str] = None,
                aggregate: Optional[str] = None) -> Optional[float]:
    if rec.get("status") != "ok":
        return None
    vals = role_values(rec, metric, role)
    if not vals:
        return None
    agg = aggregate or default_aggregate(metric)
    if agg == "sum":
        return sum(vals)
    if agg == "max":
        return max(vals)
    if agg == "min":
        return min(vals)
    return statistics.fmean(vals)
