"""The measuring loop of an explore: what the chooser picks, a batch at a time, with every new
anomaly settled between batches, until the budget or the deadline is spent."""
from __future__ import annotations

import math
import pathlib
from typing import Any

from rich.console import Console

from .anomalies import Anomaly, Finder, Observation, ratio_spread
from .measure import Measurer
from .space import Space

kBatchDesigns = 4           # designs chosen between two looks at the anomalies


class Explorer:
    """The measuring loop: between batches of what the chooser picks, every new anomaly (most
    severe first) is either the same cause as one already shrunk (its design, with the other
    dimensions at the baseline, departs the same way: one point) or shrunk to what makes it
    (its neighbours, one dimension moved back to the baseline at a time) and written."""

    def __init__(self, space: Space, measurer: Measurer, finder: Finder, chooser: Any, why: dict[str, list[str]],
                 summary: dict[str, Any], work: pathlib.Path, console: Console):
        self.space, self.measurer, self.finder, self.chooser = space, measurer, finder, chooser
        self.why, self.summary, self.work, self.console = why, summary, work, console
        self.observations: list[Observation] = []
        self.written: list[Anomaly] = []
        self.unshrunk: list[Anomaly] = []       # found when no point was left to shrink them
        self.unconfirmed: list[Anomaly] = []    # a second measurement of the design did not show them
        self.handled: set[str] = set()

    def observe(self, designs: list[dict[str, Any]]) -> None:
        self.measurer.measure(designs)
        self.observations = self.finder.observe(self.measurer.rows, run=False)
        typical, sigma = ratio_spread(self.observations)
        self.finder.set_spread(sigma)
        self.summary["typical_ratio"], self.summary["ratio_spread"] = typical, sigma
        self.summary["ratio_limit"] = math.exp(self.finder.limit)

    def pending(self) -> list[Anomaly]:
        """The anomalies neither shrunk nor explained yet, most severe first."""
        typical = self.summary["typical_ratio"]
        return [a for a in self.finder.find(self.observations, typical) if _anomaly_key(a) not in self.handled
                and not any(_explains(w, a, self.space.objective.maximize) for w in self.written)] if typical else []

    def run(self) -> str:
        while True:
            if self.measurer.interrupted:
                return "interrupted"
            if self.measurer.out_of_time():
                return "deadline"
            if self.measurer.left() <= 0:
                return "budget"
            if pending := self.pending():
                self.settle(pending[0])
                continue
            picks = self.chooser.next(self.observations, min(kBatchDesigns, self.measurer.left()))
            if not picks:
                return "every value pair measured" if self.chooser.done() else "nothing left to choose"
            for d, w in picks:
                self.why.setdefault(repr(d), []).append(w)
            before = self.measurer.ran
            self.observe([d for d, _ in picks])
            if self.measurer.ran == before:
                return "budget"

    def settle(self, a: Anomaly) -> None:
        self.handled.add(_anomaly_key(a))
        for w in self.written:
            if self.same_cause(w, a):
                w.also.append(a.design)
                return
        if not self.confirmed(a):
            self.unconfirmed.append(a)
            return
        typical = self.summary["typical_ratio"]
        self.finder.shrink(a, typical)
        self.observations = self.finder.observe(self.measurer.rows, run=False)
        if a.shrunk == "partly" and not any(s["result"].startswith("anomaly") for s in a.steps):
            self.unshrunk.append(a)     # no step measured: budget or deadline
            return
        if any(_anomaly_key(w) == _anomaly_key(a) or (w.minimal, w.minimal_neighbour, w.kind) ==
               (a.minimal, a.minimal_neighbour, a.kind) for w in self.written):
            return
        self.written.append(a)
        self.finder.write(a, len(self.written), self.work / "anomalies")
        self.console.print(f"anomaly {len(self.written)} ({a.kind}): needs "
                           f"{', '.join(a.kept) or 'nothing beyond the baseline'} -> {a.file}",
                           markup=False, highlight=False)

    def confirmed(self, a: Anomaly) -> bool:
        """Whether a second measurement of the anomalous design (for a collapse, the one that
        collapses) shows the anomaly again: one point keeps a passing disturbance of the host
        from being shrunk (every move would take it away) and reported. True when no point is left."""
        again = self.finder.again(a.design)
        if again is None or again.measured is None:
            return True
        if a.kind == "ratio":
            off = self.finder.off(again.ratio, self.summary["typical_ratio"])
            return bool(off) and (off > 0) == (a.found["ratio"] > a.found["typical_ratio"])
        assert a.neighbour is not None
        held = Observation(a.neighbour, a.found["neighbour_measured"], a.found["neighbour_predicted"])
        return self.finder.fall(again, held) is not None

    def same_cause(self, w: Anomaly, a: Anomaly) -> bool:
        """Whether a's design, moved to the baseline in every dimension w does not need, departs
        as w does: one point tells a region's other values (another size of the same verb) from
        a new cause."""
        maximize = self.space.objective.maximize
        if w.kind != "ratio" or not w.kept or w.worse(maximize) != a.worse(maximize):
            return False
        projected = {**self.space.baseline, **{d: a.design[d] for d in w.kept}}
        if not self.space.allowed(projected) or self.measurer.left() < 1:
            return False
        label = f"same cause as anomaly {self.written.index(w) + 1}?"
        if label not in self.why.setdefault(repr(projected), []):
            self.why[repr(projected)].append(label)
        obs = self.finder.observe([projected])
        off = self.finder.off(obs[0].ratio, self.summary["typical_ratio"]) if obs else 0.0
        return bool(off) and (off < 0) == maximize


def _anomaly_key(a: Anomaly) -> str:
    return repr((a.kind, a.design, a.neighbour))


def _explains(a: Anomaly, b: Anomaly, maximize: bool) -> bool:
    """Whether shrunk anomaly a is b too: b (its slower design, for a collapse) departs the same
    way, and has a's minimal values on every dimension a needs or was found a's cause already."""
    return (a.minimal is not None and a.worse(maximize) == b.worse(maximize)
            and (all(b.design[d] == a.minimal[d] for d in a.kept) or b.design in a.also))
