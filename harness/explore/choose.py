"""What to measure next, until the budget is spent (the explore loop, command.py, shrinks each
new anomaly between batches: its neighbours, one dimension moved back to the baseline at a time).

The model-guided chooser (the default) spends each batch on:
1. the design where the model's prediction is most sensitive: the unmeasured neighbour (one
   dimension moved) of a measured design that the model predicts furthest from it, which
   tests the model's strongest claim;
2. coverage: the designs that measure most dimension values and pairs of values not measured
   yet (greedy, as pairwise test generation does). A fault over one or two dimensions is a set
   of value pairs, so once every pair a valid design can take is measured, each such fault has
   had a design measured inside it; the chooser stops early only then.

For comparison (the recall benchmark, harness/explore/recall.py), two choosers that use no
model: uniform random sampling, and a simulated annealing on measurements alone, Collie's way
(a walk that moves one dimension at a time toward slower designs). All three are seeded.
"""
from __future__ import annotations

import itertools
import math
import random
from typing import Any, Optional

from .anomalies import Observation
from .search import Search
from .space import Space

kStrategies = ("model", "random", "anneal")
kSampleDesigns = 20000      # valid designs coverage is judged over when the grid is too big to list
kAnnealStartTemperature = 0.7   # log(objective): early moves accept a 2x faster design half the time
kAnnealEndTemperature = 0.05
kAnnealRestartAfter = 6     # moves without a new slowest design before a random restart

Design = dict[str, Any]
Pick = tuple[Design, str]   # a design to measure and why


def key(space: Space, design: Design) -> tuple[Any, ...]:
    return tuple(design[d] for d in space.dims)


def valid_designs(space: Space, seed: int) -> list[Design]:
    """Every valid design when the grid is small enough to list, else a seeded sample of them."""
    if space.size <= max(kSampleDesigns, int(space.search["exhaustive_max"])):
        return list(space.designs())
    rng = random.Random(seed)
    seen: dict[tuple[Any, ...], Design] = {}
    for _ in range(2 * kSampleDesigns):
        if (d := space.random_design(rng)) is None:
            break
        seen.setdefault(key(space, d), d)
        if len(seen) >= kSampleDesigns:
            break
    return list(seen.values())


class Coverage:
    """The dimension values and pairs of values valid designs take, and those measured."""

    def __init__(self, space: Space, candidates: list[Design]):
        self.dims = [d for d in space.dims if len(space.dims[d]) > 1]
        self.items = {key(space, c): self._items(c) for c in candidates}
        self.possible = set().union(*self.items.values()) if self.items else set()
        self.covered: set[tuple[Any, ...]] = set()

    def _items(self, design: Design) -> frozenset[tuple[Any, ...]]:
        singles = [((d, design[d]),) for d in self.dims]
        pairs = [((a, design[a]), (b, design[b])) for a, b in itertools.combinations(self.dims, 2)]
        return frozenset(singles + pairs)

    def add(self, design: Design) -> None:
        self.covered |= self._items(design)

    def gain(self, k: tuple[Any, ...]) -> int:
        """Values count above any number of pairs: every value is measured before pairs fill in."""
        new = self.items[k] - self.covered
        return sum(1000 if len(i) == 1 else 1 for i in new)

    def complete(self) -> bool:
        return self.possible <= self.covered

    def missing(self) -> int:
        return len(self.possible - self.covered)


class ModelChooser:
    def __init__(self, space: Space, search: Search, seed: int):
        self.space, self.search = space, search
        self.rng = random.Random(seed)
        self.candidates = {key(space, d): d for d in valid_designs(space, seed)}
        self.coverage = Coverage(space, list(self.candidates.values()))

    def done(self) -> bool:
        return self.coverage.complete()

    def next(self, observations: list[Observation], count: int) -> list[Pick]:
        taken = {key(self.space, o.design) for o in observations}
        for o in observations:
            self.coverage.add(o.design)
        picked: list[Pick] = []

        def take(d: Design, why: str) -> None:
            if key(self.space, d) not in taken:
                taken.add(key(self.space, d))
                picked.append((d, why))

        if len(picked) < count and not self.coverage.complete():
            if (s := self._most_sensitive(observations, taken)) is not None:
                take(s, "model most sensitive")
        while len(picked) < count and not self.coverage.complete():
            if (c := self._best_coverage(taken)) is None:
                break
            take(c, "coverage")
            self.coverage.add(c)
        return picked

    def _most_sensitive(self, observations: list[Observation], taken: set[tuple[Any, ...]]) -> Optional[Design]:
        best: tuple[float, Optional[Design]] = (0.0, None)
        for o in observations:
            if not o.predicted or o.predicted <= 0:
                continue
            for dim, values in self.space.dims.items():
                line = [{**o.design, dim: v} for v in values if v != o.design[dim]]
                line = [d for d in line if key(self.space, d) not in taken and self.space.allowed(d)]
                for s in self.search.evaluate(line):
                    p = s.score.metric(self.space.objective.metric)
                    if p and p > 0 and (jump := abs(math.log(p / o.predicted))) > best[0]:
                        best = (jump, s.design)
        return best[1]

    def _best_coverage(self, taken: set[tuple[Any, ...]]) -> Optional[Design]:
        top, choice = 0, []
        for k in self.candidates:
            if k in taken:
                continue
            g = self.coverage.gain(k)
            if g > top:
                top, choice = g, [k]
            elif g == top and g > 0:
                choice.append(k)
        return self.candidates[self.rng.choice(choice)] if choice else None


class RandomChooser:
    """Uniform random valid designs, seeded: what a search without a model or a plan measures."""

    def __init__(self, space: Space, seed: int):
        self.space = space
        self.order = valid_designs(space, seed)
        random.Random(seed).shuffle(self.order)

    def done(self) -> bool:
        return False

    def next(self, observations: list[Observation], count: int) -> list[Pick]:
        measured = {key(self.space, o.design) for o in observations}
        return [(d, "random") for d in self.order if key(self.space, d) not in measured][:count]


class AnnealChooser:
    """Simulated annealing on measurements alone, as Collie searches a NIC: from the baseline,
    each move changes one dimension to another value and is measured; the walk goes on from it
    by the Metropolis rule toward slower designs (a fault makes a design slow; no model says how
    fast it should be), restarting from a random design when it stops finding slower ones."""

    def __init__(self, space: Space, seed: int, budget: int):
        self.space, self.budget = space, max(1, budget)
        self.rng = random.Random(seed)
        self.current: Design = dict(space.baseline)
        self.current_slowness: Optional[float] = None
        self.slowest: Optional[float] = None
        self.since = 0
        self.walked: set[tuple[Any, ...]] = set()     # measured designs the walk has judged

    def done(self) -> bool:
        return False

    def _slowness(self, o: Observation) -> Optional[float]:
        if o.measured is None or o.measured <= 0:
            return None
        return -math.log(o.measured) if self.space.objective.maximize else math.log(o.measured)

    def next(self, observations: list[Observation], count: int) -> list[Pick]:
        self._walk(observations)
        measured = {key(self.space, o.design) for o in observations}
        picked: list[Design] = []
        dims = [d for d in self.space.dims if len(self.space.dims[d]) > 1]
        for _ in range(200 * count):
            if len(picked) == count or not dims:
                break
            dim = self.rng.choice(dims)
            d = {**self.current, dim: self.rng.choice([v for v in self.space.dims[dim] if v != self.current[dim]])}
            k = key(self.space, d)
            if self.space.allowed(d) and k not in measured and all(k != key(self.space, p) for p in picked):
                picked.append(d)
        return [(d, "anneal") for d in picked]

    def _walk(self, observations: list[Observation]) -> None:
        """The Metropolis rule over the measurements not judged yet, in the order they came."""
        temperature = kAnnealStartTemperature * (kAnnealEndTemperature / kAnnealStartTemperature) ** min(
            1.0, len(observations) / self.budget)
        for o in observations:
            k = key(self.space, o.design)
            if k in self.walked:
                continue
            self.walked.add(k)
            s = self._slowness(o)
            if s is None:
                continue
            if self.slowest is None or s > self.slowest:
                self.slowest, self.since = s, 0
            else:
                self.since += 1
            c = self.current_slowness
            if c is None or s >= c or self.rng.random() < math.exp((s - c) / temperature):
                self.current, self.current_slowness = o.design, s
        if self.since >= kAnnealRestartAfter:
            restart = self.space.random_design(self.rng) or dict(self.space.baseline)
            self.current, self.current_slowness, self.since = restart, None, 0
