"""Search on the model: every design when the space is small, else a seeded simulated annealing
whose every move scores a whole line (one dimension's values, the others fixed) in one model
process; then the Pareto front of the objective against the costs, and the designs to measure.
"""
from __future__ import annotations

import dataclasses
import math
import random
from typing import Any, Callable, Optional

from .scoring import Score, Scorer
from .space import Space

kStartTemperature = 0.5     # in units of log(objective): early moves accept a 40% worse design half the time
kEndTemperature = 0.01
kRestartAfterSteps = 12     # moves without a new best before starting again from a random design
kStaleSteps = 200           # moves in a row that score no new design: the reachable space is covered


@dataclasses.dataclass
class Scored:
    design: dict[str, Any]      # the dimensions' values
    score: Score
    value: Optional[float]      # the objective as the model predicts it (None: not modeled or failed)
    costs: dict[str, float]


def objective_value(space: Space, score: Score, costs: dict[str, float]) -> Optional[float]:
    v = score.metric(space.objective.metric)
    if v is None or not math.isfinite(v):
        return None
    if space.objective.per:
        per = costs.get(space.objective.per) or 0.0
        return v / per if per > 0 else None
    return v


def better(space: Space, a: Optional[float], b: Optional[float]) -> bool:
    """Whether objective value a beats b (None loses to anything)."""
    if a is None:
        return False
    if b is None:
        return True
    return a > b if space.objective.maximize else a < b


def ranked(space: Space, scored: list[Scored]) -> list[Scored]:
    """Best first; designs without a value last. Among equals, the cheaper one, then the one
    that changes fewer dimensions of the baseline: the simplest design that reaches the value."""
    sign = -1.0 if space.objective.maximize else 1.0
    return sorted(scored, key=lambda s: (s.value is None, sign * (s.value or 0.0), sorted(s.costs.values()),
                                         sum(s.design[d] != v for d, v in space.baseline.items())))


def line_dimension(space: Space) -> Callable[[list[dict[str, Any]]], Optional[str]]:
    """The dimension to batch along: the one with most values among those the designs vary in."""
    def pick(designs: list[dict[str, Any]]) -> Optional[str]:
        varying = [d for d in space.dims if len({repr(x.get(d)) for x in designs}) > 1]
        return max(varying, key=lambda d: len(space.dims[d]), default=None)
    return pick


class Search:
    def __init__(self, space: Space, scorer: Scorer, progress: Optional[Callable[[int], None]] = None):
        self.space = space
        self.scorer = scorer
        self.progress = progress
        self.seen: dict[str, Scored] = {}

    @staticmethod
    def _key(design: dict[str, Any]) -> str:
        return repr(sorted(design.items()))

    def evaluate(self, designs: list[dict[str, Any]]) -> list[Scored]:
        new = [d for d in designs if self._key(d) not in self.seen]
        if new:
            scores = self.scorer.score([self.space.params(d) for d in new], line_dimension(self.space), self.progress)
            for d, s in zip(new, scores):
                costs = self.space.costs_of(d)
                self.seen[self._key(d)] = Scored(d, s, objective_value(self.space, s, costs), costs)
        return [self.seen[self._key(d)] for d in designs]

    def exhaustive(self) -> list[Scored]:
        return self.evaluate(list(self.space.designs()))

    def line(self, design: dict[str, Any], dim: str) -> list[dict[str, Any]]:
        out = []
        for v in self.space.dims[dim]:
            d = {**design, dim: v}
            if self.space.allowed(d):
                out.append(d)
        return out

    def anneal(self, evaluations: int, seed: int) -> list[Scored]:
        """Simulated annealing over lines. A move picks a dimension, scores its whole line
        through the current design (one process), and moves to one design of the line chosen by
        the Metropolis rule; the best design ever scored is kept, and the walk restarts from a
        random design when it stops finding better ones."""
        rng = random.Random(seed)
        space = self.space
        dims = [d for d in space.dims if len(space.dims[d]) > 1]
        current = dict(space.baseline)
        cur = self.evaluate([current])[0]
        best = cur
        since_best = stale = 0
        # A space whose constraints leave fewer designs than the budget is covered before the
        # budget is spent: the walk ends after kStaleSteps moves that score nothing new.
        while len(self.seen) < evaluations and dims and stale < kStaleSteps:
            progress = min(1.0, len(self.seen) / max(1, evaluations))
            temperature = kStartTemperature * (kEndTemperature / kStartTemperature) ** progress
            dim = rng.choice(dims)
            before = len(self.seen)
            line = [s for s in self.evaluate(self.line(current, dim)) if s.value is not None and s.value > 0]
            stale = stale + 1 if len(self.seen) == before else 0
            if line:
                cand = rng.choice(line)
                if cur.value is None or cur.value <= 0:
                    accept = True
                else:
                    gain = math.log(cand.value / cur.value) * (1 if space.objective.maximize else -1)
                    accept = gain >= 0 or rng.random() < math.exp(gain / temperature)
                top = ranked(space, line)[0]
                if better(space, top.value, best.value):
                    best, since_best = top, 0
                else:
                    since_best += 1
                if accept:
                    current, cur = cand.design, cand
            else:
                since_best += 1
            if since_best >= kRestartAfterSteps:
                restart = space.random_design(rng)
                if restart is not None:
                    current, cur = restart, self.evaluate([restart])[0]
                    since_best = 0
        return list(self.seen.values())


def pareto_front(space: Space, scored: list[Scored]) -> list[Scored]:
    """Designs no other beats or equals on the objective while costing no more in every cost
    (and less in one, or better objective), cheapest first."""
    if not space.costs:
        return []
    names = list(space.costs)
    sign = -1.0 if space.objective.maximize else 1.0
    order = sorted((s for s in scored if s.value is not None),
                   key=lambda s: (sign * s.value, [s.costs[n] for n in names]))
    front: list[Scored] = []
    for s in order:
        # Every design already on the front ranks at least as well; one that costs no more in
        # every cost dominates s (or equals it, and one of equals is enough).
        if not any(all(f.costs[n] <= s.costs[n] for n in names) for f in front):
            front.append(s)
    return sorted(front, key=lambda s: [s.costs[n] for n in names])


def stratified(space: Space, scored: list[Scored], count: int, seed: int) -> list[Scored]:
    """One design from each of `count` equal slices of the predicted objective's ranking (a
    seeded pick within the slice): measured, they show whether the model ranks designs right
    across the whole space, not only at its top."""
    valued = ranked(space, [s for s in scored if s.value is not None])
    if count <= 0 or not valued:
        return []
    rng = random.Random(seed)
    count = min(count, len(valued))
    out = []
    for i in range(count):
        lo, hi = i * len(valued) // count, (i + 1) * len(valued) // count
        out.append(valued[rng.randrange(lo, max(lo + 1, hi))])
    return out
