"""./run_all.py explore: the space file's validation (file:line errors), the search against the
exhaustive optimum, scoring in lines against contract 3 point by point, resume after an
interrupt, anomaly finding and shrinking, and the report in headless Chromium. All on the real
rdmalab-model (the model backend stands in for a measured one where a test needs points run)."""
import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import textwrap
import time

import jsonschema
import pytest

from conftest import kRoot, kRunAll
from harness.explore import command
from harness.explore.anomalies import Finder, Observation, typical_ratio
from harness.explore.scoring import Scorer
from harness.explore.search import Search, pareto_front, ranked
from harness.explore.space import parse
from harness.runner import RunConfig
from harness.yamlloc import ConfigError

kBinDir = kRoot / "build" / "bin"
kModelBin = pathlib.Path(os.environ.get("RDMALAB_MODEL_BIN", kBinDir / "rdmalab-model"))
kChromium = shutil.which("chromium")
needs_model = pytest.mark.skipif(not kModelBin.exists(), reason=f"{kModelBin} not built")

kSmallSpace = """
    title: a small sequencer space
    mode: sequencer
    roles: {server: {count: 1}, client: {count: 3}}
    params: {count: 20000}
    model_params: {profile: cib, window_bound: false}
    timeout_s: 10
    dimensions:
      design: [herd-rpc, herd-rpc-batch, atomics]
      threads: {range: [1, 8], scale: log2}
      tx_depth: [1, 4, 16]
    constraints: ["threads * tx_depth <= 64"]
    cost: {cores: threads}
    objective: {maximize: mops, role: client, aggregate: sum}
    baseline: {design: herd-rpc, threads: 1, tx_depth: 4}
    """


def write_space(directory, space_id, body):
    path = directory / f"{space_id}.yaml"
    path.write_text(f"id: {space_id}\n" + textwrap.dedent(body))
    return path


def bound(path):
    space = parse(path)
    exp = command.bind(space, "model", kBinDir, kModelBin, measured=False)
    cfg = RunConfig(backend="model", root=kRoot, bin_dir=kBinDir, run_id="test", model_bin=kModelBin)
    return space, Scorer(exp, cfg)


@needs_model
def test_annealing_finds_the_exhaustive_optimum(tmp_path):
    space, scorer = bound(write_space(tmp_path, "small", kSmallSpace))
    assert space.size == 36 and len(list(space.designs())) == 33   # the constraint removes 8 x 16
    every = Search(space, scorer).exhaustive()
    best = ranked(space, every)[0]
    assert best.value is not None and best.value > ranked(space, every)[-1].value
    walk = Search(space, scorer).anneal(evaluations=20, seed=7)   # two thirds of the space
    assert len(walk) < len(every)
    assert ranked(space, walk)[0].value == pytest.approx(best.value)
    front = pareto_front(space, every)
    # Cheapest first, each costlier design strictly better: the front is monotone.
    assert [f.costs["cores"] for f in front] == sorted({f.costs["cores"] for f in front})
    assert all(b.value > a.value for a, b in zip(front, front[1:]))
    assert front[-1].value == pytest.approx(best.value)


@needs_model
def test_scoring_in_lines_equals_contract_3_point_by_point(tmp_path):
    space, scorer = bound(write_space(tmp_path, "small", kSmallSpace))
    designs = [space.params(d) for d in list(space.designs())[:9]]
    lined = scorer.score(designs, lambda ds: "threads")
    assert scorer.processes < len(designs)          # lines: fewer processes than designs
    one_by_one = [scorer._score_one(scorer.request(d)) for d in designs]
    for a, b in zip(lined, one_by_one):
        assert a.mops == pytest.approx(b.mops) and a.bottleneck == b.bottleneck


@needs_model
def test_bad_space_file_gets_file_line_errors(tmp_path):
    path = write_space(tmp_path, "bad", """
        title: mistakes everywhere
        mode: sequencer
        roles: {server: {count: 1}, client: {count: 3}}
        dimensions:
          design: [herd-rpc, herd-rcp]
          thraeds: [1, 2]
          tx_depth: {range: [4, 1]}
        constraints: ["threads <= corse"]
        cost: {cores: threads}
        objective: {maximize: mops_per_core}
        baseline: {design: herd-rpc, thraeds: 1}
        search: {seed: -1}
        """)
    with pytest.raises(ConfigError) as exc:
        space = parse(path)
        command.bind(space, "model", kBinDir, kModelBin, measured=False)
    text = "\n".join(exc.value.messages)
    assert re.search(rf"{path}:9: dimensions.tx_depth: range must be \[LO, HI\]", text), text
    assert re.search(rf"{path}:11: cost.cores: 'threads' names 'threads'.*did you mean 'thraeds'", text), text
    assert re.search(rf"{path}:12: objective: maximize 'mops_per_core' is not valid", text), text
    assert re.search(rf"{path}:14: search: seed must be a non-negative integer", text), text
    assert re.search(rf"{path}:13: baseline: no value for dimension 'tx_depth'", text) is None  # tx_depth was invalid
    # The dimensions against rdmalab-model's description, once the file's own keys are right.
    fixed = path.read_text().replace("{range: [4, 1]}", "[1, 4]").replace("corse", "cores").replace(
        "mops_per_core", "mops").replace("seed: -1", "seed: 1").replace("cost: {cores: threads}", "cost: {cores: thraeds}")
    fixed = fixed.replace("threads <= cores", "thraeds <= cores").replace("thraeds: 1}", "thraeds: 1, tx_depth: 1}")
    path.write_text(fixed)
    with pytest.raises(ConfigError) as exc:
        command.bind(parse(path), "model", kBinDir, kModelBin, measured=False)
    text = "\n".join(exc.value.messages)
    assert re.search(rf"{path}:7: sweep.grid: design 'herd-rcp' is not valid \(did you mean 'herd-rpc'", text), text
    assert re.search(rf"{path}:8: sweep.grid: unknown parameter 'thraeds' \(did you mean 'threads'", text), text


def explore(*args, timeout=120):
    return subprocess.Popen(["/usr/bin/python3", str(kRunAll), "explore", *map(str, args), "--bin-dir", kBinDir,
                             "--model-bin", kModelBin], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "COLUMNS": "200"})


@pytest.fixture(scope="module")
def resumed(tmp_path_factory):
    """An explore interrupted while measuring (SIGINT), then run again to the end."""
    if not kModelBin.exists():
        pytest.skip(f"{kModelBin} not built")
    tmp = tmp_path_factory.mktemp("explore")
    space = write_space(tmp, "small", kSmallSpace.replace("objective:", "search: {top: 6, stratified: 6}\n    objective:"))
    out = tmp / "res"
    points = out / "explore" / "small" / "model" / "small" / "points"
    first = explore(space, "--backend", "model", "--budget-points", 14, "--out", out)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and first.poll() is None and len(list(points.glob("*.json"))) < 1:
        time.sleep(0.02)
    first.send_signal(signal.SIGINT)
    first.communicate(timeout=60)
    before = {p.name: p.stat().st_mtime_ns for p in points.glob("*.json")}
    second = explore(space, "--backend", "model", "--budget-points", 14, "--out", out)
    stdout, stderr = second.communicate(timeout=120)
    assert second.returncode == 0, stderr[-3000:]
    return {"first_rc": first.returncode, "before": before, "points": points, "stderr": stderr,
            "summary": json.loads((out / "explore" / "small" / "summary.json").read_text()),
            "report": out / "explore" / "small" / "report" / "index.html"}


def test_interrupted_explore_resumes_without_remeasuring(resumed):
    before, points, summary = resumed["before"], resumed["points"], resumed["summary"]
    assert resumed["first_rc"] == 130 and before, "the first run was not interrupted while measuring"
    after = {p.name: p.stat().st_mtime_ns for p in points.glob("*.json")}
    assert all(after[name] == mtime for name, mtime in before.items())   # not one stored point re-run
    assert summary["points_run"] == len(after) - len(before)
    measured = summary["measured"]
    assert len(measured) == len(after) and all(m["measured"] is not None for m in measured)
    # Measured on the model backend: scoring in lines agrees with contract 3 point by point.
    assert summary["typical_ratio"] == pytest.approx(1.0) and summary["anomalies"] == []
    schema = json.loads((kRoot / "docs" / "schemas" / "rdmalab-explore.schema.json").read_text())
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in jsonschema.Draft202012Validator(schema).iter_errors(summary)]
    assert errors == []


@pytest.mark.skipif(kChromium is None, reason="chromium not installed (scripts/install-deps.sh installs it)")
def test_explore_report_loads_in_headless_chromium(resumed):
    r = subprocess.run([kChromium, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000",
                        "--dump-dom", resumed["report"].as_uri()], capture_output=True, text=True, timeout=90)
    body = re.search(r"<body[^>]*>", r.stdout)
    assert body, r.stdout[:2000] + r.stderr[-2000:]
    attrs = dict(re.findall(r'(data-[\w-]+)="([^"]*)"', body.group(0)))
    assert attrs["data-sections"].split() == ["matters", "best", "measured", "pareto", "anomalies"]
    assert attrs["data-images-total"] == attrs["data-images-loaded"] == "3" and attrs["data-images-broken"] == ""
    assert "What matters" in r.stdout and "Pareto front" in r.stdout
    # explain folded under every best design, not printed beside them.
    assert r.stdout.count("<details><summary>#") == len(resumed["summary"]["best"]) > 0


def planted_finder(space, measured):
    """A Finder whose backend measures `measured(design)` with no budget limit; the model predicts 10 everywhere."""
    class Backend:                    # the budget side of Finder's measurer: unlimited
        interrupted = False

        def left(self):
            return 100

        def out_of_time(self):
            return False

    finder = Finder(space, None, Backend())
    finder.observe = lambda designs, run=True: [Observation(d, measured(d), 10.0, repr(d)) for d in designs]
    return finder


def test_anomalies_found_and_shrunk_to_the_dimensions_that_make_them(tmp_path):
    """A backend whose rate drops to a quarter only when design is atomics and threads > 1 (the model
    predicts 10 everywhere, measurements are planted by that rule): the ratio anomaly
    at (atomics, 4, 16) shrinks to design and threads; tx_depth goes back to the baseline."""
    space = parse(write_space(tmp_path, "small", kSmallSpace))
    finder = planted_finder(space, lambda d: 10.0 * (0.25 if d["design"] == "atomics" and d["threads"] > 1 else 1.0))
    obs = finder.observe([{"design": "herd-rpc", "threads": 1, "tx_depth": 4},
                          {"design": "herd-rpc", "threads": 2, "tx_depth": 4},
                          {"design": "atomics", "threads": 1, "tx_depth": 4},
                          {"design": "atomics", "threads": 4, "tx_depth": 16}])
    typical = typical_ratio(obs)
    assert typical == pytest.approx(1.0)
    found = finder.find(obs, typical)
    ratio = [a for a in found if a.kind == "ratio"]
    assert [a.design for a in ratio] == [{"design": "atomics", "threads": 4, "tx_depth": 16}]
    a = ratio[0]
    finder.shrink(a, typical)
    assert a.kept == ["design", "threads"] and a.minimal == {"design": "atomics", "threads": 4, "tx_depth": 4}
    assert a.shrunk == "yes"
    path = finder.write(a, 1, tmp_path / "anomalies")
    doc = path.read_text()
    assert "id: small-anomaly-1" in doc and "tx_depth: 4" in doc
    from harness.experiment import parse as parse_experiment
    exp = parse_experiment(path)              # a valid experiment: baseline row, then the anomaly
    assert exp.sweep[0]["zip"] == {"design": ["herd-rpc", "atomics"], "threads": [1, 4]}


def test_shrinking_keeps_a_cause_whose_move_leaves_only_a_milder_anomaly(tmp_path):
    """A planted tenfold slowdown (atomics with threads > 1) beside a milder one of another cause
    (tx_depth 16: 0.6x, just past the 1.5x threshold). From (atomics, 4, 16), moving design or
    threads back leaves the milder one only: the planted anomaly has gone and both stay; moving
    tx_depth back keeps the tenfold one. The minimal design is exactly the planted region's."""
    space = parse(write_space(tmp_path, "small", kSmallSpace))
    finder = planted_finder(space, lambda d: 10.0 * (0.1 if d["design"] == "atomics" and d["threads"] > 1 else 1.0)
                            * (0.6 if d["tx_depth"] == 16 else 1.0))
    obs = finder.observe([{"design": "herd-rpc", "threads": 1, "tx_depth": 4},
                          {"design": "herd-rpc", "threads": 2, "tx_depth": 4},
                          {"design": "herd-rpc-batch", "threads": 1, "tx_depth": 1},
                          {"design": "atomics", "threads": 4, "tx_depth": 16}])
    typical = typical_ratio(obs)
    a = max((x for x in finder.find(obs, typical) if x.kind == "ratio"), key=lambda x: x.severity)
    assert a.design == {"design": "atomics", "threads": 4, "tx_depth": 16}
    finder.shrink(a, typical)
    assert [s["result"] for s in a.steps] == ["anomaly gone: kept", "anomaly gone: kept", "anomaly persists: moved"]
    assert a.kept == ["design", "threads"] and a.minimal == {"design": "atomics", "threads": 4, "tx_depth": 4}
