"""Experiment files checked against the programs' own descriptions (`BIN --describe`), before
anything runs (issue 28, acceptance 1): unknown keys, bad choices, values out of range, keys a
mode or a key-value system does not take, keys the harness sets, each with file:line and the
nearest valid names; only declared parameters are passed on; descriptions cached per build.

Unit tests use the fixture descriptions (data/describe/); the acceptance test also runs with the
real binaries (RDMALAB_BIN_DIR, default build/bin) and is skipped, saying why, without them."""
import json
import os
import pathlib
import subprocess
import time

import pytest

from conftest import described_bin_dir, kDescribeFixtures, kFake, kRoot, run_all
from harness import describe, experiment, validate
from harness.inventory import Host
from harness.runner import Placed, PointRunner, RunConfig
from harness.sweep import expand

kRealBinDir = pathlib.Path(os.environ.get("RDMALAB_BIN_DIR", kRoot / "build" / "bin"))
kFig9 = kRoot / "experiments" / "herd14-fig9-kv.yaml"


def fixture(name):
    return describe.from_json(json.loads((kDescribeFixtures / f"{name}.json").read_text()), name, name)


def answers_describe(path):
    try:
        return subprocess.run([str(path), "--describe"], capture_output=True, timeout=20).returncode == 0
    except OSError:
        return False


def load(path, backend, bin_dir):
    """(bound experiment or None, error lines) as run_all.py's load step sees them."""
    errors = []
    exp = experiment.parse(path)
    model = validate.load_model(bin_dir, None, errors) if backend == "model" else None
    return validate.load(exp, backend, bin_dir, model, errors), errors


kBench = """id: bench
title: a bench experiment
mode: tput
roles: {server: {}, client: {count: $clients}}
params:
  direction: inbound
  tx_depth: 64
labels: [study]
sweep:
  - grid:
      size: [8, 64]
      clients: [1, 2]
      study: [a]
      verb: [read, write]
  - backends: [model]
    grid:
      size: [8]
      clients: [1]
      study: [b]
      verb: [write]
      post_list: [1]
plot: {x: size, y: mops, series: verb}
"""

kKv = """id: kv
title: a kv experiment
mode: kv
roles: {server: {}, client: {}}
params:
  window: 4
  lock_placement: spread
sweep:
  grid:
    system: [drtm, herd]
plot: {x: system, y: mops}
"""


def write(tmp_path, text, name):
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return path


@pytest.fixture
def bins(tmp_path):
    return described_bin_dir(tmp_path / "bin")


def test_a_valid_file_binds_to_the_program_that_declares_its_mode(tmp_path, bins):
    exp, errors = load(write(tmp_path, kBench, "bench"), "softnic", bins)
    assert errors == [] and exp.binary == "rdmalab-bench" and exp.program.program == "rdmalab-bench"
    exp, errors = load(write(tmp_path, kKv.replace("  lock_placement: spread\n", ""), "kv"), "softnic", bins)
    assert errors == [] and exp.binary == "rdmalab-kv"


# (what, (old, new) in kBench, backend, message parts); the error is on the changed line.
kMistakes = [
    ("unknown key", ("  tx_depth: 64", "  tx_detph: 64"), "softnic",
     ["params: unknown parameter 'tx_detph' (did you mean 'tx_depth'", "rdmalab-bench mode tput takes: verb,"]),
    ("bad choice", ("  direction: inbound", "  direction: inbond"), "softnic",
     ["params: direction 'inbond' is not valid (did you mean 'inbound'?); valid: inbound, outbound, alltoall"]),
    ("out of range", ("  tx_depth: 64", "  tx_depth: 0"), "softnic", ["params: tx_depth 0 is out of range; valid: 1..65536 WRs"]),
    ("wrong type", ("  tx_depth: 64", "  tx_depth: deep"), "softnic", ["params: tx_depth must be an integer, got string 'deep'"]),
    ("key the mode does not take", ("  tx_depth: 64", "  accesses: 2"), "softnic",
     ["params: parameter 'accesses' is not taken by mode tput of rdmalab-bench (modes that take it: echo)"]),
    ("key the harness sets", ("  tx_depth: 64", "  ib_dev: mlx5_0"), "softnic",
     ["params: parameter 'ib_dev' is set by the harness for every run"]),
    ("model: unknown key", ("  tx_depth: 64", "  tx_detph: 64"), "model",
     ["params: unknown parameter 'tx_detph' (did you mean 'tx_depth'", "rdmalab-model mode tput takes:"]),
    ("model: bad value in a model-only block", ("      post_list: [1]", "      post_list: [0]"), "model",
     ["sweep[1].grid: post_list 0 is out of range; valid: 1..4096"]),
]


@pytest.mark.parametrize("what,change,backend,parts", kMistakes, ids=[m[0] for m in kMistakes])
def test_each_parameter_mistake_names_file_line_and_the_valid_names(tmp_path, bins, what, change, backend, parts):
    old, new = change
    assert old in kBench
    text = kBench.replace(old, new)
    path = write(tmp_path, text, "bench")
    exp, errors = load(path, backend, bins)
    line = text.splitlines().index(new) + 1
    assert exp is None and len(errors) == 1, errors
    assert errors[0].startswith(f"{path}:{line}: "), errors
    for part in parts:
        assert part in errors[0], errors


@pytest.mark.parametrize("roles,message", [
    ("roles: {server: {}, clinet: {}}",
     "roles: role 'clinet' is not a role of rdmalab-kv (did you mean 'client'?); valid: server, client"),
    ("roles: {server: {params: {retry_ms: 5}}, client: {}}",
     "roles.server.params: parameter 'retry_ms' is read by the client role of rdmalab-kv, not by role server"),
], ids=["role the program has not", "key the role does not read"])
def test_roles_are_the_programs_and_a_role_gets_only_what_it_reads(tmp_path, bins, roles, message):
    text = kKv.replace("roles: {server: {}, client: {}}", roles).replace("  lock_placement: spread\n", "")
    path = write(tmp_path, text, "kv")
    exp, errors = load(path, "softnic", bins)
    assert exp is None and len(errors) == 1, errors
    assert errors[0].startswith(f"{path}:4: {message}"), errors


def test_a_suite_reduction_value_is_checked_as_the_experiments_own(tmp_path, bins):
    exp, errors = load(write(tmp_path, kBench, "bench"), "softnic", bins)
    assert errors == []
    assert validate.check_reduction(exp, (("tx_depth", 32),), "suite s") == []
    problems = validate.check_reduction(exp, (("tx_depth", 0), ("iters", 0)), "suite s")
    assert problems == ["suite s: reduce.params: tx_depth 0 is out of range; valid: 1..65536 WRs (overriding bench's tx_depth)"]


def test_a_key_the_kv_system_does_not_read_is_an_error_per_system(tmp_path, bins):
    path = write(tmp_path, kKv, "kv")
    exp, errors = load(path, "softnic", bins)
    assert exp is None
    assert errors == [f"{path}:7: params: parameter 'lock_placement' is not read by system herd of rdmalab-kv "
                      "(systems that read it: drtm, drtm-write); set it only where the sweep gives those systems"], errors
    # Per point: in a zip, a system-specific key is checked with the system of its own rows.
    zipped = kKv.replace("  lock_placement: spread\n", "").replace(
        "  grid:\n    system: [drtm, herd]", "  zip:\n    system: [drtm, herd]\n    lock_placement: [spread, same-bits]")
    assert "lock_placement: [spread, same-bits]" in zipped
    _, errors = load(write(tmp_path, zipped, "kv"), "softnic", bins)
    assert len(errors) == 1 and "not read by system herd" in errors[0], errors
    one = kKv.replace("system: [drtm, herd]", "system: [drtm]")
    assert load(write(tmp_path, one, "kv"), "softnic", bins)[1] == []


def test_every_error_of_a_file_together_and_blocks_checked_only_where_they_run(tmp_path, bins):
    text = (kBench.replace("  tx_depth: 64", "  tx_depth: 0\n  windw: 3")
            .replace("      post_list: [1]", "      post_list: [1]\n      qpp: [1]"))
    path = write(tmp_path, text, "bench")
    _, errors = load(path, "softnic", bins)
    assert [e.split(": ")[0] for e in errors] == [f"{path}:7", f"{path}:8"], errors  # not the model-only block
    _, errors = load(path, "model", bins)
    assert len(errors) == 3 and "unknown parameter 'qpp' (did you mean 'qp'?)" in errors[2], errors


def test_labels_and_role_counts_are_neither_checked_nor_passed_on(tmp_path, bins):
    exp, errors = load(write(tmp_path, kBench, "bench"), "softnic", bins)
    assert errors == []
    point = expand(exp, backend="softnic")[0]
    assert {"study", "clients"} <= set(point.params)
    cfg = RunConfig(backend="softnic", root=kRoot, bin_dir=bins, run_id="t")
    runner = PointRunner(cfg, None, None)
    argv = runner.role_argv(exp, point, Placed("client", 0, 1, Host(name="h", launcher="local")), "A:1", None)
    params = [a for a in argv if a.startswith("--") and "=" in a]
    assert params == ["--direction=inbound", "--tx-depth=64", "--size=8", "--verb=read", "--timeout=60"], argv
    assert argv[1] == "tput"
    # The model's point: the role counts in roles, labels and the harness's profile left out.
    exp, errors = load(write(tmp_path, kBench.replace("labels: [study]", "labels: [study, profile]")
                             .replace("      study: [b]", "      study: [b]\n      profile: [cib]"), "bench"),
                       "model", bins)
    assert errors == []
    point = next(p for p in expand(exp, backend="model") if p.params["study"] == "b")
    request = PointRunner(RunConfig(backend="model", root=kRoot, bin_dir=bins, run_id="t"), None, None).model_request(exp, point)
    assert request == {"experiment": "bench", "profile": "cib", "mode": "tput", "roles": {"server": 1, "client": 1},
                       "params": {"direction": "inbound", "tx_depth": 64, "size": 8, "verb": "write", "post_list": 1}}


def test_kv_program_gets_its_role_first_and_false_switches_with_a_true_default_are_passed(tmp_path, bins):
    text = kKv.replace("  lock_placement: spread\n", "  preload: false\n  validate: false\n").replace("[drtm, herd]", "[herd]")
    exp, errors = load(write(tmp_path, text, "kv"), "softnic", bins)
    assert errors == []
    runner = PointRunner(RunConfig(backend="softnic", root=kRoot, bin_dir=bins, run_id="t"), None, None)
    argv = runner.role_argv(exp, expand(exp)[0], Placed("server", 0, 1, Host(name="h", launcher="local")), "A:1", None)
    assert argv[1:4] == ["server", "--rendezvous", "A:1"]
    assert "--preload=false" in argv and not any(a.startswith("--validate") for a in argv), argv


def test_descriptions_are_cached_per_build(tmp_path, monkeypatch):
    monkeypatch.setenv("RDMALAB_CACHE_DIR", str(tmp_path / "cache"))
    count = tmp_path / "count"
    prog = tmp_path / "prog"
    prog.write_text(f"#!/bin/sh\necho x >> {count}\nexec cat {kDescribeFixtures / 'rdmalab-bench.json'}\n")
    prog.chmod(0o755)
    describe._memo.clear()
    assert describe.describe(prog).program == "rdmalab-bench"
    describe._memo.clear()  # a new run reads the cache file
    describe.describe(prog)
    assert count.read_text().count("x") == 1 and list((tmp_path / "cache" / "describe").glob("prog-*.json"))
    # A rebuilt binary (another size and mtime) is described again.
    prog.write_text(prog.read_text() + "# rebuilt\n")
    os.utime(prog, (time.time() + 5, time.time() + 5))
    describe._memo.clear()
    describe.describe(prog)
    assert count.read_text().count("x") == 2


def test_a_custom_binary_must_answer_describe(tmp_path, bins):
    prog = tmp_path / "old-bench"
    prog.write_text("#!/bin/sh\necho 'unknown flag --describe' >&2\nexit 2\n")
    prog.chmod(0o755)
    path = write(tmp_path, kBench.replace("id: bench\n", f"id: bench\nbinary: {prog}\n"), "bench")
    r = run_all(path, "--dry-run", "--bin-dir", bins, "--out", tmp_path / "res", check=2)
    assert (f"{path}:2: experiment: binary {prog}: {prog} --describe exited 2: unknown flag --describe; "
            "every program the harness runs must print its description (rdmalab-describe/1)") in r.stderr


def test_fake_bench_describes_the_fixture_plus_its_own_flags():
    doc = json.loads(subprocess.run([str(kFake), "--describe"], capture_output=True, text=True, check=True).stdout)
    desc = describe.from_json(doc, str(kFake), "fake_bench")
    assert desc.program == "rdmalab-bench" and desc.takes("lat", "fake_behavior") and desc.takes("tput", "size")


@pytest.mark.parametrize("name", ["rdmalab-bench", "rdmalab-kv", "rdmalab-model"])
def test_fixture_agrees_with_the_real_description(name):
    """The fixtures stand in for the real programs in fast tests; every name they declare must
    mean the same in the real one (regenerate: BIN --describe > tests/python/data/describe/NAME.json)."""
    real = kRealBinDir / name
    if not answers_describe(real):
        pytest.skip(f"{real} is absent or does not answer --describe (cmake --build build)")
    got = describe.describe(real)
    want = fixture(name)
    for mode in want.modes:
        assert mode in got.modes, f"{name}: mode {mode} of the fixture is gone"
        assert set(want.modes[mode].params) <= set(got.modes[mode].params), (name, mode)
    for p in want.params.values():
        q = got.params.get(p.name)
        assert q is not None, f"{name}: parameter {p.name} of the fixture is gone"
        assert (q.type, q.min, q.max, q.choices, q.scope) == (p.type, p.min, p.max, p.choices, p.scope), p.name
    assert set(want.systems) <= set(got.systems), name


def windw_copy(tmp_path):
    """Acceptance 1: herd14-fig9-kv with `window` misspelled."""
    text = kFig9.read_text()
    assert "\n  window: 4\n" in text
    text = text.replace("\n  window: 4\n", "\n  windw: 4\n")
    path = tmp_path / "herd14-fig9-kv.yaml"
    path.write_text(text)
    return path, text.splitlines().index("  windw: 4") + 1


def assert_refused(path, line, bin_dir, tmp_path, *args):
    out = tmp_path / "res"
    r = run_all(path, *args, "--bin-dir", bin_dir, "--out", out, check=2)
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith(f"{path}:{line}: params: unknown parameter 'windw'")]
    assert lines and "did you mean 'window'" in lines[0], r.stderr
    assert "nothing was run" in r.stderr and not out.exists()
    return lines[0]


@pytest.mark.parametrize("backend", [["--backend", "softnic"], ["--backend", "model"], ["--backend", "verbs", "--dry-run"]],
                         ids=["softnic", "model", "verbs-dry-run"])
def test_misspelled_window_is_refused_before_anything_runs_fixture(tmp_path, bins, backend):
    path, line = windw_copy(tmp_path)
    assert_refused(path, line, bins, tmp_path, *backend)


@pytest.mark.parametrize("backend", [["--backend", "softnic"], ["--backend", "model"], ["--backend", "verbs", "--dry-run"]],
                         ids=["softnic", "model", "verbs-dry-run"])
def test_misspelled_window_is_refused_before_anything_runs_real_binaries(tmp_path, backend):
    needed = ["rdmalab-model"] if "model" in backend else ["rdmalab-kv"]
    for name in needed:
        if not answers_describe(kRealBinDir / name):
            pytest.skip(f"{kRealBinDir / name} is absent or does not answer --describe (cmake --build build)")
    path, line = windw_copy(tmp_path)
    print(assert_refused(path, line, kRealBinDir, tmp_path, *backend))


@pytest.mark.parametrize("backend", ["softnic", "verbs", "model"])
def test_shipped_experiments_validate_against_the_real_descriptions(backend):
    """Every experiment file that runs on the backend, against the real programs' descriptions."""
    names = ["rdmalab-model"] if backend == "model" else ["rdmalab-bench", "rdmalab-kv"]
    for name in names:
        if not answers_describe(kRealBinDir / name):
            pytest.skip(f"{kRealBinDir / name} is absent or does not answer --describe (cmake --build build)")
    errors = []
    model = validate.load_model(kRealBinDir, None, errors) if backend == "model" else None
    for path in sorted((kRoot / "experiments").glob("*.yaml")):
        if path.name != "suites.yaml" and backend in (exp := experiment.parse(path)).backends:
            validate.load(exp, backend, kRealBinDir, model, errors)
    assert errors == [], "\n".join(errors)
