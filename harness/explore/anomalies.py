"""Anomalies among the measured designs, each shrunk to the dimensions that make it.

Two kinds:
- ratio: the measured/predicted ratio of a design departs from the run's typical ratio (the
  geometric median over every measured design) by more than `ratio_threshold` (0.5: more than
  1.5x off, either way). The typical ratio absorbs what is uniform (softnic is a CPU, not a
  ConnectX); what departs from it is where the backend and the model disagree about *shape*.
- collapse: between two measured designs one step apart in one dimension, the objective falls
  by more than `collapse` (0.5: to under half) and by that much more than the model predicts.

Shrinking moves one dimension at a time back to the baseline (both designs of a collapse
together, its own dimension left alone), measures the result, and keeps the move while the
anomaly persists: off the same way by at least half its severity as found (log scale), so that
a move which takes away its cause is not kept because a milder anomaly of another cause is
still there (an 8x slowdown that becomes 1.6x has gone; what is left is another finding). What is left differs from the baseline only where it must; it is written as
an experiment (the baseline and the anomalous design, or the collapsing pair, as a zip) that
`./run_all.py FILE` runs on any backend, and `--backend model` predicts.
"""
from __future__ import annotations

import dataclasses
import math
import pathlib
import statistics
from typing import Any, Optional

from .measure import Measurer, experiment_document, measured_mean, write_experiment
from .search import Search
from .space import Space

kPersistingSeverity = 0.5   # a moved design shows the same anomaly while this share of its severity (log) remains
# A ratio is anomalous past ratio_threshold and past kSpreadSigmas of the run's own spread: on a
# shared host, or against a model that misses some shapes by 2x, the departures every design
# shows are not findings. kMadToSigma turns a median absolute deviation into a standard deviation.
kSpreadSigmas = 3.0
kMadToSigma = 1.4826
kClipRounds = 5


@dataclasses.dataclass
class Observation:
    design: dict[str, Any]
    measured: Optional[float]
    predicted: Optional[float]
    point_id: Optional[str] = None

    @property
    def ratio(self) -> Optional[float]:
        if self.measured is None or self.predicted is None or self.measured <= 0 or self.predicted <= 0:
            return None
        return self.measured / self.predicted


@dataclasses.dataclass
class Anomaly:
    kind: str                            # ratio | collapse
    design: dict[str, Any]               # as found
    neighbour: Optional[dict[str, Any]]  # collapse: the design one step away that holds up
    dim: Optional[str]                   # collapse: the dimension of that step
    severity: float                      # |log| of how far off, for ordering
    found: dict[str, Any]                # the numbers as found
    minimal: Optional[dict[str, Any]] = None
    minimal_neighbour: Optional[dict[str, Any]] = None
    kept: list[str] = dataclasses.field(default_factory=list)      # dimensions the anomaly needs
    steps: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    shrunk: str = "no"                   # yes | partly (budget or deadline) | no
    file: Optional[str] = None
    also: list[dict[str, Any]] = dataclasses.field(default_factory=list)   # anomalous designs of the same cause

    def worse(self, maximize: bool) -> bool:
        """Whether the design does worse than the model says (a collapse always does)."""
        return self.kind != "ratio" or (self.found["ratio"] < self.found["typical_ratio"]) == maximize


def ratio_spread(observations: list[Observation]) -> tuple[Optional[float], float]:
    """The typical measured/predicted ratio and the spread (log, a robust standard deviation) of
    the ratios around it, over the designs that are not outliers themselves: the median and
    the median absolute deviation, recomputed without the ratios past kSpreadSigmas of them
    until none is left out. A fault region's designs (explore measures many of them once it
    finds one) would otherwise widen the spread that judges them."""
    logs = sorted(math.log(o.ratio) for o in observations if o.ratio is not None)
    if not logs:
        return None, 0.0
    kept = logs
    for _ in range(kClipRounds):
        center = statistics.median(kept)
        sigma = kMadToSigma * statistics.median(abs(x - center) for x in kept)
        inside = [x for x in kept if abs(x - center) <= kSpreadSigmas * sigma] if sigma > 0 else kept
        if len(inside) == len(kept) or len(inside) < 3:
            break
        kept = inside
    center = statistics.median(kept)
    return math.exp(center), kMadToSigma * statistics.median(abs(x - center) for x in kept)


def typical_ratio(observations: list[Observation]) -> Optional[float]:
    return ratio_spread(observations)[0]


class Finder:
    def __init__(self, space: Space, search: Search, measurer: Measurer, planted_fault: Optional[str] = None):
        self.space, self.search, self.measurer = space, search, measurer
        self.planted_fault = planted_fault   # SOFTNIC_PLANTED_FAULT of the run: its files say so
        self.threshold = float(space.anomalies["ratio_threshold"])
        self.collapse = float(space.anomalies["collapse"])
        self.limit = math.log(1 + self.threshold)     # log distance past which a ratio is anomalous
        self.collapse_limit = math.log(1 / self.collapse) if self.collapse > 0 else math.inf

    def set_spread(self, sigma: float) -> None:
        """Departures within kSpreadSigmas of the run's spread are not anomalies."""
        self.limit = max(math.log(1 + self.threshold), kSpreadSigmas * sigma)
        self.collapse_limit = max(math.log(1 / self.collapse) if self.collapse > 0 else math.inf, self.limit)

    def observe(self, designs: list[dict[str, Any]], run: bool = True) -> list[Observation]:
        """Measures (with run, as budget and deadline allow) and predicts the designs; those with a stored point."""
        recs = self.measurer.measure(designs) if run else self.measurer.records(designs)
        scored = self.search.evaluate(designs)
        out = []
        for d, s in zip(designs, scored):
            stored = recs.get(repr(d))
            if not stored:
                continue
            out.append(Observation(d, measured_mean(self.space, stored), s.score.metric(self.space.objective.metric),
                                   stored[0]["point"]["id"]))
        return out

    def again(self, design: dict[str, Any]) -> Optional[Observation]:
        """A second measurement of a measured design (Measurer.again); None: not measured."""
        rec = self.measurer.again(design)
        if rec is None:
            return None
        predicted = self.search.evaluate([design])[0].score.metric(self.space.objective.metric)
        return Observation(design, measured_mean(self.space, [rec]), predicted, rec["point"]["id"])

    def off(self, ratio: Optional[float], typical: float) -> float:
        """Signed log distance of a ratio from the typical one; 0 within the threshold."""
        if ratio is None:
            return 0.0
        d = math.log(ratio / typical)
        return d if abs(d) > self.limit else 0.0

    def fall(self, low: Observation, high: Observation) -> Optional[float]:
        """How much worse low is than high, measured over predicted (log, > 0 when it collapses)."""
        if low.ratio is None or high.ratio is None or not high.measured or not low.measured:
            return None
        measured = low.measured / high.measured
        model = (low.predicted or 0) / (high.predicted or 1)
        if not self.space.objective.maximize:
            measured, model = 1 / measured, (1 / model if model else 0)
        if measured < self.collapse and model > 0 and math.log(model / measured) > self.collapse_limit:
            return math.log(model / measured)
        return None

    def find(self, observations: list[Observation], typical: Optional[float]) -> list[Anomaly]:
        found: list[Anomaly] = []
        if typical is None:
            return found
        for o in observations:
            off = self.off(o.ratio, typical)
            if off:
                found.append(Anomaly("ratio", o.design, None, None, abs(off),
                                     {"measured": o.measured, "predicted": o.predicted, "ratio": o.ratio,
                                      "typical_ratio": typical, "point": o.point_id}))
        by_design = {repr(o.design): o for o in observations}
        for o in observations:
            for dim, values in self.space.dims.items():
                i = values.index(o.design[dim])
                for j in (i - 1, i + 1):
                    if 0 <= j < len(values):
                        q = by_design.get(repr({**o.design, dim: values[j]}))
                        fall = self.fall(o, q) if q is not None else None
                        if fall is not None:
                            found.append(Anomaly("collapse", o.design, q.design, dim, fall,
                                                 {"measured": o.measured, "predicted": o.predicted,
                                                  "neighbour_measured": q.measured, "neighbour_predicted": q.predicted,
                                                  "point": o.point_id, "neighbour_point": q.point_id}))
        return sorted(found, key=lambda a: -a.severity)

    def persists(self, a: Anomaly, design: dict[str, Any], neighbour: Optional[dict[str, Any]],
                 typical: float) -> Optional[bool]:
        """Whether the anomaly holds at the moved design(s); None: not measured (budget, deadline, failed)."""
        obs = self.observe([design] + ([neighbour] if neighbour else []))
        if len(obs) != 1 + (neighbour is not None):
            return None
        floor = kPersistingSeverity * a.severity
        if a.kind == "ratio":
            off, was = self.off(obs[0].ratio, typical), math.log(a.found["ratio"] / typical)
            return bool(off) and (off > 0) == (was > 0) and abs(off) >= floor
        fall = self.fall(obs[0], obs[1])
        return fall is not None and fall >= floor

    def shrink(self, a: Anomaly, typical: float) -> None:
        base = self.space.baseline
        cur, nb = dict(a.design), dict(a.neighbour) if a.neighbour else None
        complete = True
        todo = list(self.space.dims)
        # A move a constraint refuses may be allowed once others are made (UD needs SEND: the
        # verb goes back to the baseline's WRITE after the transport has), so such dimensions
        # are tried again after a pass that moved something.
        while todo:
            refused, moved = [], False
            for dim in todo:
                if dim == a.dim or cur[dim] == base[dim]:
                    continue
                cand = {**cur, dim: base[dim]}
                cand_nb = {**nb, dim: base[dim]} if nb else None
                if not self.space.allowed(cand) or (cand_nb and not self.space.allowed(cand_nb)):
                    refused.append(dim)
                    continue
                if (self.measurer.left() < 1 + (nb is not None) or self.measurer.out_of_time()
                        or self.measurer.interrupted):
                    complete = False
                    a.steps.append({"dimension": dim, "to": base[dim], "result": "not tried: budget or deadline"})
                    continue
                held = self.persists(a, cand, cand_nb, typical)
                if held is None:
                    complete = False
                    a.steps.append({"dimension": dim, "to": base[dim], "result": "not measured"})
                elif held:
                    cur, nb, moved = cand, cand_nb, True
                    a.steps.append({"dimension": dim, "to": base[dim], "result": "anomaly persists: moved"})
                else:
                    a.steps.append({"dimension": dim, "to": base[dim], "result": "anomaly gone: kept"})
            todo = refused if moved else []
            if not moved:
                a.steps += [{"dimension": d, "to": base[d], "result": "excluded by a constraint"} for d in refused]
        a.minimal, a.minimal_neighbour = cur, nb
        a.kept = [d for d in self.space.dims if cur[d] != base[d] or (nb is not None and nb[d] != base[d])]
        a.shrunk = "yes" if complete else "partly"

    def write(self, a: Anomaly, index: int, directory: pathlib.Path) -> pathlib.Path:
        design = a.minimal or a.design
        nb = a.minimal_neighbour if a.minimal else a.neighbour
        exp_id = f"{self.space.id}-anomaly-{index}"
        fixed = {d: v for d, v in design.items() if d not in a.kept}
        if a.kind == "ratio":
            rows = [self.space.baseline, design] if a.kept else []
            what = (f"measured/predicted {a.found['ratio']:.3g} against the run's typical {a.found['typical_ratio']:.3g}"
                    f" (measured {a.found['measured']:.4g}, predicted {a.found['predicted']:.4g} "
                    f"{self.space.objective.metric})")
            rows_text = "the baseline, then the anomalous design"
        else:
            rows = [nb, design]
            what = (f"{self.space.objective.metric} falls from {a.found['neighbour_measured']:.4g} to "
                    f"{a.found['measured']:.4g} measured as {a.dim} steps from {a.neighbour[a.dim]} to "
                    f"{a.design[a.dim]}, where the model predicts {a.found['neighbour_predicted']:.4g} to "
                    f"{a.found['predicted']:.4g}")
            rows_text = f"the design that holds up, then the one that collapses ({a.dim})"
        kept = ", ".join(f"{d}={design[d]}" for d in a.kept) or "none: the baseline itself"
        planted = (f" Measured on softnic with the planted fault SOFTNIC_PLANTED_FAULT='{self.planted_fault}': set it "
                   "again to reproduce." if self.planted_fault else "")
        doc = experiment_document(self.space, exp_id, f"{self.space.exp.title}: anomaly {index} ({a.kind})",
                                  f"Found by ./run_all.py explore {self.space.path.name}: {what}. Shrunk toward the "
                                  f"baseline ({a.shrunk}); the dimensions it needs: {kept}. Rows: {rows_text}. Run it "
                                  f"on the backend and with --backend model to compare.{planted}", rows, fixed)
        path = directory / f"{exp_id}.yaml"
        write_experiment(path, doc)
        a.file = str(path)
        return path
