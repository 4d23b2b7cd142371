"""What explore measures after its first designs, and what it says of them: pair coverage (every
value pair a valid design takes, seeded and reproducible), the spread anomalies are judged
against, a second anomaly of the same cause settled with one point, ties collapsed among the
best designs, and the recall benchmark's random faults. All without a measured backend."""
import itertools
import random

import pytest

from harness.explore.anomalies import Finder, Observation, ratio_spread
from harness.explore.choose import ModelChooser, RandomChooser, valid_designs
from harness.explore.explorer import Explorer
from harness.explore.matters import collapse_ties, span_text, what_matters
from harness.explore.recall import draw_fault, judge
from harness.explore.search import Search
from harness.explore.space import parse
from conftest import kRoot
from test_explore import bound, kSmallSpace, needs_model, planted_finder, write_space

kCollie = kRoot / "experiments" / "explore" / "collie-verbs.yaml"


def observed(designs, measured=lambda d: 1.0):
    return [Observation(d, measured(d), 1.0, str(i)) for i, d in enumerate(designs)]


@needs_model
def test_the_model_chooser_covers_every_value_pair_then_stops(tmp_path):
    space, scorer = bound(write_space(tmp_path, "small", kSmallSpace))
    runs = []
    for _ in range(2):
        chooser = ModelChooser(space, Search(space, scorer), seed=3)
        obs = observed([space.baseline])
        while picks := chooser.next(obs, 4):
            obs += observed([d for d, _ in picks])
        runs.append([o.design for o in obs])
    assert runs[0] == runs[1]                       # seeded: the same designs in the same order
    valid = list(space.designs())
    want = {frozenset([(a, d[a]), (b, d[b])]) for d in valid for a, b in itertools.combinations(space.dims, 2)}
    got = {frozenset([(a, d[a]), (b, d[b])]) for d in runs[0] for a, b in itertools.combinations(space.dims, 2)}
    assert got == want and chooser.done()
    assert len(runs[0]) < len(valid) * 2 // 3       # far fewer designs than the space holds


def test_random_sampling_measures_each_design_once_in_a_seeded_order(tmp_path):
    space = parse(write_space(tmp_path, "small", kSmallSpace))
    a, b = RandomChooser(space, 5), RandomChooser(space, 5)
    first = a.next([], 10)
    assert first == b.next([], 10) and len({repr(d) for d, _ in first}) == 10
    assert not {repr(d) for d, _ in a.next(observed([d for d, _ in first]), 10)} & {repr(d) for d, _ in first}


def test_the_spread_leaves_a_fault_regions_designs_out():
    """Ten healthy designs within 10% of a ratio of 0.25 and six slowed 30x: the typical ratio
    and the spread are the healthy ones'."""
    rng = random.Random(1)
    healthy = [Observation({"i": i}, 0.25 * rng.uniform(0.9, 1.1), 1.0) for i in range(10)]
    slowed = [Observation({"i": 10 + i}, 0.25 / 30, 1.0) for i in range(6)]
    typical, sigma = ratio_spread(healthy + slowed)
    assert typical == pytest.approx(0.25, rel=0.1) and sigma < 0.15


class Budget:
    """The budget side of a Measurer for the Explorer: measures by a rule, counts the points."""
    interrupted = False

    def __init__(self, budget):
        self.budget, self.ran, self.rows = budget, 0, []

    def left(self):
        return self.budget - self.ran

    def out_of_time(self):
        return False

    def spend(self):
        if self.left() <= 0:
            return False
        self.ran += 1
        return True

    def measure(self, designs):
        for d in designs:
            if d not in self.rows and self.left() > 0:
                self.rows.append(d)
                self.ran += 1


def test_an_anomaly_of_a_shrunk_cause_takes_one_point(tmp_path):
    """A planted region (design atomics, any threads but 1): the first anomaly found shrinks to
    design and threads; the second, at other threads and tx_depth, is found the same cause by
    measuring its design at the baseline's tx_depth, one point, and is not written again."""
    space = parse(write_space(tmp_path, "small", kSmallSpace))
    budget = Budget(30)
    rule = lambda d: 10.0 * (0.05 if d["design"] == "atomics" and d["threads"] > 1 else 1.0)  # noqa: E731
    finder = Finder(space, None, budget)
    finder.observe = lambda designs, run=True: [Observation(d, rule(d), 10.0, repr(d)) for d in designs
                                                if (budget.measure([d]) if run else None) or d in budget.rows]
    finder.again = lambda d: Observation(d, rule(d), 10.0, "again") if budget.spend() else None
    summary = {"typical_ratio": None}
    explorer = Explorer(space, budget, finder, None, {}, summary, tmp_path, console_stub())
    explorer.observe([space.baseline, {"design": "herd-rpc", "threads": 2, "tx_depth": 4},
                      {"design": "herd-rpc-batch", "threads": 8, "tx_depth": 1},
                      {"design": "atomics", "threads": 4, "tx_depth": 16}, {"design": "atomics", "threads": 8,
                                                                             "tx_depth": 1}])
    first = explorer.pending()[0]
    explorer.settle(first)
    assert explorer.written[0].kept == ["design", "threads"]
    ran = budget.ran
    second = explorer.pending()[0]
    assert second.design["threads"] != explorer.written[0].minimal["threads"]
    explorer.settle(second)
    assert budget.ran == ran + 1 and len(explorer.written) == 1 and explorer.written[0].also == [second.design]
    assert explorer.unconfirmed == []
    assert explorer.pending() == []


def test_an_anomaly_a_second_measurement_does_not_show_is_not_shrunk(tmp_path):
    """A design measured 20x slow once (the host was busy) and at the typical rate again."""
    space = parse(write_space(tmp_path, "small", kSmallSpace))
    budget = Budget(30)
    fluke = {"design": "atomics", "threads": 4, "tx_depth": 16}
    finder = Finder(space, None, budget)
    finder.observe = lambda designs, run=True: [Observation(d, 0.5 if d == fluke else 10.0, 10.0, repr(d))
                                                for d in designs if (budget.measure([d]) if run else None)
                                                or d in budget.rows]
    finder.again = lambda d: Observation(d, 10.0, 10.0, "again") if budget.spend() else None
    explorer = Explorer(space, budget, finder, None, {}, {"typical_ratio": None}, tmp_path, console_stub())
    explorer.observe([space.baseline, {"design": "herd-rpc", "threads": 2, "tx_depth": 4}, fluke])
    explorer.settle(explorer.pending()[0])
    assert [a.design for a in explorer.unconfirmed] == [fluke] and explorer.written == [] and budget.ran == 4


def console_stub():
    class Quiet:
        def print(self, *args, **kwargs):
            pass
    return Quiet()


@needs_model
def test_best_designs_collapse_ties_and_what_matters_is_measured_too(tmp_path):
    space, scorer = bound(kCollie)
    search = Search(space, scorer)
    valued = [s for s in search.exhaustive() if s.value is not None]
    groups = collapse_ties(space, search, valued, 4)
    # Sizes 8 to 128 B of UC WRITEs change nothing on the model (23.02 Mops): one row, not four.
    assert len(groups) == 4 and groups[0].spans.get("size") == [8, 16, 32, 64, 128]
    assert len({round(g.best.value, 2) for g in groups}) == 4
    assert span_text("size", groups[0].spans["size"], space.dims["size"]) == "size=8..128"
    assert span_text("connection", ["UC", "UD"], space.dims["connection"]) == "connection=UC|UD"
    assert span_text("verb", ["read", "write", "send"], space.dims["verb"]) == "verb=read|write|send"
    line = [{**space.baseline, "size": s} for s in (8, 64, 4096)]
    rows = {m["dimension"]: m for m in what_matters(space, search, observed(line, lambda d: 8.0 if d["size"] < 4096
                                                                            else 2.0))}
    assert rows["size"]["measured"] == [2.0, 8.0] and rows["size"]["measured_designs"] == 3
    assert rows["verb"]["measured"] is None and rows["verb"]["predicted_spread"] > 1


def test_recall_faults_are_findable_minorities_and_judged_by_their_dimensions():
    space = parse(kCollie)
    designs = valid_designs(space, 1)
    rng = random.Random(4)
    for _ in range(20):
        f = draw_fault(space, designs, rng)
        assert 0.03 <= f.share <= 0.25 and not f.holds(space.baseline) and 10_000 <= f.delay_ns <= 50_000
        assert f.env().endswith(f"delay_ns={f.delay_ns}") and "transport=" not in f.env() or "connection" in f.region
    f = draw_fault(space, designs, random.Random(4))
    inside = {**space.baseline, **{d: v[0] for d, v in f.region.items()}}
    outside = dict(space.baseline)
    summary = {"points_run": 60, "anomalies": [
        {"design": inside, "minimal": inside, "kept": sorted(f.region, key=list(space.dims).index)},
        {"design": outside, "minimal": {**outside, "qp": 16}, "kept": ["qp"]}]}
    got = judge(f, summary)
    assert got["found"] and got["false"] == 1 and got["points"] == 60
    summary["anomalies"][0]["kept"] = list(f.region) + ["sge"]
    assert not judge(f, summary)["found"]


def test_a_move_a_constraint_refuses_is_tried_again_after_others(tmp_path):
    """Slow wherever tx_depth is 16. From (atomics, 4, 16) the design cannot go back to herd-rpc
    while threads is 4 (a constraint); once threads has, it can: only tx_depth is kept."""
    space = parse(write_space(tmp_path, "small", kSmallSpace.replace(
        'constraints: ["threads * tx_depth <= 64"]',
        'constraints: ["threads * tx_depth <= 64", "design != \'herd-rpc\' or threads <= 2"]')))
    finder = planted_finder(space, lambda d: 10.0 * (0.1 if d["tx_depth"] == 16 else 1.0))
    obs = finder.observe([space.baseline, {"design": "herd-rpc", "threads": 2, "tx_depth": 4},
                          {"design": "atomics", "threads": 4, "tx_depth": 16}])
    a = next(x for x in finder.find(obs, 1.0) if x.kind == "ratio")
    finder.shrink(a, 1.0)
    assert a.kept == ["tx_depth"] and a.minimal == {"design": "herd-rpc", "threads": 1, "tx_depth": 16}
    assert [s["dimension"] for s in a.steps] == ["threads", "tx_depth", "design"]
