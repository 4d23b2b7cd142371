"""Every conclusion judged on every backend that has its points (issue 34, item 2): a backend's
sweep gains the statement points its blocks stop short of, a series parameter the backend does not
carry (softnic has no `profile`) is not part of the match, and a statement is left unjudged on a
backend only where the experiment file says why that backend cannot run its points (`not_on`).
No program runs here: the expansion and the lookups are checked directly (under 2 s)."""
import copy
import re

import pytest

from conftest import kFake, kRoot
from harness import conclusions, experiment, sweep
from harness.suites import load_suites, resolve
from harness.yamlloc import ConfigError
from plots.figures import Table

kExperiment = f"""id: short
title: the softnic block stops short of the statements
binary: {kFake}
mode: tput
paper: {{id: nosql, figure: "Figure 0"}}
roles: {{server: {{}}, client: {{count: $clients}}}}
sweep:
  - backends: [model]
    grid: {{get_fraction: [0.0, 0.5, 1.0], system: [herd, pilaf], clients: [1, 4, 24]}}
  - backends: [softnic, verbs]
    grid: {{keys: [4096], get_fraction: [0.5], system: [herd, pilaf], clients: [1, 4]}}
plot: {{x: clients, y: mops, series: system, facet: get_fraction, role: client}}
conclusions:
  - statement: HERD gains as GETs give way to PUTs
    trend: {{facet: 0.5, series: herd, from: 1, to: 4}}
    ratio_at_least: 1.0
  - statement: HERD beats Pilaf read-only
    compare: {{a: {{facet: 1.0, series: herd, x: 4}}, b: {{facet: 1.0, series: pilaf, x: 4}}}}
    ratio_at_least: 1.0
  - statement: HERD beats Pilaf with 24 clients
    compare: {{a: {{facet: 0.5, series: herd, x: 24}}, b: {{facet: 0.5, series: pilaf, x: 24}}}}
    ratio_at_least: 1.0
    not_on: {{softnic: "25 emulated nodes; a softnic fabric holds at most 16"}}
"""


@pytest.fixture
def short(tmp_path):
    path = tmp_path / "short.yaml"
    path.write_text(kExperiment)
    return experiment.parse(path)


def rows(points):
    return [{k: v for k, v in p.params.items() if k in p.swept} for p in points]


def test_a_backend_gains_exactly_the_statement_points_its_sweep_lacks(short):
    softnic = rows(sweep.expand(short, sweep.Reduction(), "softnic"))
    assert len(softnic) == 4 + 2  # its block, then HERD and Pilaf read-only at 4 clients
    assert softnic[4:] == [{"keys": 4096, "get_fraction": 1.0, "system": "herd", "clients": 4},
                           {"keys": 4096, "get_fraction": 1.0, "system": "pilaf", "clients": 4}]
    assert isinstance(softnic[4]["get_fraction"], float)  # the experiment's own value, not the statement's text
    # The 24-client statement is not_on softnic: no 24-client point is made there; verbs gets both.
    assert not [r for r in softnic if r["clients"] == 24]
    verbs = rows(sweep.expand(short, sweep.Reduction(), "verbs"))
    assert [r for r in verbs if r["clients"] == 24] == [
        {"keys": 4096, "get_fraction": 0.5, "system": "herd", "clients": 24},
        {"keys": 4096, "get_fraction": 0.5, "system": "pilaf", "clients": 24}]
    # Point counts follow the rows: the added ones run with the right number of client processes.
    assert [p.roles["client"] for p in sweep.expand(short, sweep.Reduction(), "verbs")][-1] == 24
    # The model's own block has every point already: nothing is added.
    assert len(sweep.expand(short, sweep.Reduction(), "model")) == 18


def test_not_on_leaves_the_statement_unjudged_with_the_backends_reason(short):
    c = short.conclusions[2]
    v = conclusions.evaluate(c, lambda f, s, x: (1.0, ""), short.plot, "softnic")
    assert v.status == conclusions.kNotEvaluated
    assert v.reason == "softnic cannot run it: 25 emulated nodes; a softnic fabric holds at most 16"
    assert conclusions.evaluate(c, lambda f, s, x: (2.0, ""), short.plot, "verbs").status == conclusions.kHolds
    assert conclusions.evaluate(c, lambda f, s, x: (2.0, ""), short.plot).status == conclusions.kHolds


@pytest.mark.parametrize("not_on, message", [
    ("{model: why}", "'model' is not a measured backend of the experiment; valid: softnic, verbs"),
    ("{softnic: ''}", "softnic: give the reason the backend cannot run the points"),
    ("[softnic]", "not_on must be a mapping"),
])
def test_a_malformed_not_on_is_an_error_with_file_and_line(tmp_path, not_on, message):
    path = tmp_path / "short.yaml"
    path.write_text(kExperiment.replace('{softnic: "25 emulated nodes; a softnic fabric holds at most 16"}', not_on))
    with pytest.raises(ConfigError) as err:
        experiment.parse(path)
    text = "\n".join(err.value.messages)
    assert re.search(rf"{re.escape(str(path))}:\d+: conclusions\[2\]", text) and message in text, text


def record(params, mops, backend="softnic"):
    return {"backend": backend, "status": "ok", "provenance": {"started": "t"},
            "experiment": {"id": "fig10", "plot": {"x": "put_fraction", "y": "mops", "series": ["profile", "lock_placement"]}},
            "point": {"params": params, "repeat": 0},
            "roles": [{"role": "client", "index": 0, "document": {"results": [{"mops": mops}]}}]}


def test_a_series_parameter_the_backend_does_not_carry_is_not_part_of_the_match():
    """fig10's statements name cx3/spread; softnic's points carry no profile: its 'spread' answers."""
    softnic = Table([record({"lock_placement": lp, "put_fraction": x}, m)
                     for lp, x, m in (("spread", 0.0, 4.0), ("spread", 0.1, 3.0), ("same-bits", 0.0, 9.0))])
    assert softnic.lookup(None, "cx3/spread", 0.1) == (3.0, "")
    assert softnic.lookup(None, "cib/spread", 0.0) == (4.0, "")
    assert softnic.lookup(None, "cx3/same-bits", 0.0) == (9.0, "")
    assert softnic.lookup(None, "cx3/spread", 0.5)[0] is None
    # Where the points carry the parameter, it is matched: the model's cx3 is not its cib.
    model = Table([record({"profile": "cx3", "lock_placement": "spread", "put_fraction": 0.0}, 7.0, "model")])
    assert model.lookup(None, "cx3/spread", 0.0) == (7.0, "")
    assert model.lookup(None, "cib/spread", 0.0)[0] is None


def test_every_statement_of_the_default_suite_has_its_points_on_every_backend_or_a_reason():
    """Acceptance 1, statically: the default suite's expansion on each backend of each experiment
    holds both points of every statement, unless the statement says why the backend cannot."""
    exp_dir = kRoot / "experiments"
    missing, statements, reasons = [], 0, 0
    for target in resolve(["default"], exp_dir, load_suites(exp_dir)):
        exp = experiment.parse(target.path)
        for backend in exp.backends:
            found = rows(sweep.expand(exp, target.reduction, backend))
            for c in exp.conclusions:
                statements += 1
                if backend in (c.get("not_on") or {}):
                    reasons += 1
                    continue
                for point in conclusions.points_of(c):
                    coords = [(n, v) for n, v in conclusions.plot_coordinates(exp.plot, point)]
                    if not any(all(n not in r or conclusions.same(r[n], v) for n, v in coords) for r in found):
                        missing.append(f"{exp.id} on {backend}: {c['statement']} ({point})")
    assert statements > 150 and not missing, "\n".join(missing)
    assert reasons == 6, reasons  # nosql's 24 and 32 client processes on one softnic fabric


def test_the_check_above_can_fail():
    """Without the added statement points, the repository's nosql figures lack points on softnic."""
    exp = experiment.parse(kRoot / "experiments" / "nosql-fig13-rwratio.yaml")
    bare = copy.copy(exp)
    bare.conclusions = []
    plain = rows(sweep.expand(bare, sweep.Reduction(max_values=3), "softnic"))
    assert not [r for r in plain if r["get_fraction"] == 0.0]
    full = rows(sweep.expand(exp, sweep.Reduction(max_values=3), "softnic"))
    assert len([r for r in full if r["get_fraction"] == 0.0]) == 3
