"""Acceptance 4 (bad YAML): every kind of mistake is caught before anything runs, with
file:line and the valid choices; plus sweep expansion and inventories."""
import pathlib

import pytest

from conftest import described_bin_dir, kFake, run_all
from harness import experiment, inventory, sweep
from harness.yamlloc import ConfigError

kGood = f"""id: good
title: a valid experiment
mode: lat
binary: {kFake}
roles:
  server: {{count: 1}}
  client: {{count: $clients}}
params:
  iters: 100
sweep:
  grid:
    size: [8, 64, 512, 4096]
    verb: [read, write]
  zip:
    clients: [1, 2]
    tx_depth: [4, 16]
repeats: 2
plot: {{x: size, y: mops, series: verb}}
"""

# (what is wrong, replacement of one line of kGood (old, new), expected line, expected message parts)
kMistakes = [
    ("unknown key", ("repeats: 2", "repeat: 2"), None, ["unknown key 'repeat'", "did you mean 'repeats'", "valid keys:"]),
    ("wrong type", ("repeats: 2", "repeats: two"), None, ["repeats must be a positive integer, got string 'two'"]),
    ("impossible value", ("repeats: 2", "repeats: 0"), None, ["repeats must be at least 1, got 0"]),
    ("invalid choice", ("plot: {x: size, y: mops, series: verb}", "plot: {x: size, y: mops, series: verb, kind: pie}"), None,
     ["kind 'pie' is not valid; valid: line, bar, table"]),
    ("missing file", (f"binary: {kFake}", "binary: ./no_such_bench"), None, ["binary './no_such_bench' does not exist"]),
    ("missing required key", ("title: a valid experiment", "titel: a valid experiment"), 1, ["missing required key 'title'"]),
    ("unknown metric", ("plot: {x: size, y: mops, series: verb}", "plot: {x: size, y: mopps, series: verb}"), None,
     ["y 'mopps' is not valid", "valid: mops, gbps"]),
    ("plot axis not a parameter", ("plot: {x: size, y: mops, series: verb}", "plot: {x: payload, y: mops}"), None,
     ["x 'payload' is not a parameter", "valid: clients, iters, repeat, size, tx_depth, verb"]),
    ("zip lengths differ", ("    tx_depth: [4, 16]", "    tx_depth: [4, 16, 64]"), 14, ["zip lists must have equal lengths", "clients: 2, tx_depth: 3"]),
    ("role count refers to nothing", ("  client: {count: $clients}", "  client: {count: $nclients}"), None,
     ["count refers to $nclients, which is not a parameter"]),
    ("role count not a count", ("    clients: [1, 2]", "    clients: [1, two]"), 7,
     ["count $clients takes values ['two']; a process count must be a positive integer"]),
    ("duplicate key", ("  iters: 100", "  iters: 100\n  iters: 200"), 10, ["duplicate key 'iters' (first at line 9)"]),
    ("YAML syntax", ("repeats: 2", "repeats: [2"), 18, ["YAML syntax"]),
    ("id differs from file", ("id: good", "id: other"), 1, ["id 'other' differs from the file name 'good'"]),
    ("value listed twice", ("    size: [8, 64, 512, 4096]", "    size: [8, 64, 8]"), None, ["size lists a value twice"]),
]


def test_good_experiment_expands(tmp_path):
    path = tmp_path / "good.yaml"
    path.write_text(kGood)
    exp = experiment.parse(path)
    points = sweep.expand(exp)
    assert len(points) == 4 * 2 * 2 * 2  # size x verb x zip rows x repeats
    assert {(p.params["clients"], p.params["tx_depth"]) for p in points} == {(1, 4), (2, 16)}
    assert {p.roles["client"] for p in points} == {1, 2}
    assert len({p.id for p in points}) == len(points)
    # Ids depend on the point, not on order or unrelated edits.
    path.write_text(kGood.replace("title: a valid experiment", "title: renamed"))
    assert {p.id for p in sweep.expand(experiment.parse(path))} == {p.id for p in points}
    reduced = sweep.expand(exp, sweep.Reduction(max_values=2, repeats=1, params=(("iters", 5), ("duration", 1))))
    assert sorted({p.params["size"] for p in reduced}) == [8, 4096]
    assert len(reduced) == 2 * 2 * 2 and all(p.params["iters"] == 5 and "duration" not in p.params for p in reduced)
    # Categories (verbs) are never thinned; numeric zip rows are.
    one = sweep.expand(exp, sweep.Reduction(max_values=1, repeats=1))
    assert sorted({p.params["verb"] for p in one}) == ["read", "write"] and len(one) == 2
    assert sweep.thin([1, 2, 4, 8, 16, 32, 64], 3) == [1, 8, 64]


@pytest.mark.parametrize("what,change,line,parts", kMistakes, ids=[m[0] for m in kMistakes])
def test_each_mistake_is_reported_with_file_and_line(tmp_path, what, change, line, parts):
    old, new = change
    assert old in kGood
    text = kGood.replace(old, new, 1)
    if line is None:  # the line of the changed text
        line = text.splitlines().index(new.splitlines()[-1]) + 1
    path = tmp_path / "good.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        experiment.parse(path)
    message = str(info.value)
    assert f"{path}:{line}:" in message, message
    for part in parts:
        assert part in message, message


def test_run_all_reports_every_error_and_runs_nothing(tmp_path):
    bad1 = tmp_path / "bad1.yaml"
    bad1.write_text(kGood.replace("id: good", "id: bad1").replace("repeats: 2", "repeat: 2"))
    bad2 = tmp_path / "bad2.yaml"
    bad2.write_text(kGood.replace("id: good", "id: bad2").replace(f"binary: {kFake}\n", "").replace("mode: lat", "mode: nope"))
    out = tmp_path / "res"
    r = run_all(bad1, bad2, "--out", out, "--bin-dir", described_bin_dir(tmp_path / "bin"), check=2)
    assert f"{bad1}:17: experiment: unknown key 'repeat'" in r.stderr
    # The valid modes come from the programs' --describe (here the fixtures).
    assert (f"{bad2}:3: experiment: mode 'nope' is not valid; valid: lat, tput, atomics, echo, sequencer, sgbatch "
            "(rdmalab-bench); kv (rdmalab-kv)") in r.stderr
    assert "2 error(s); nothing was run" in r.stderr
    assert not out.exists()


def test_missing_bench_binary_is_named(tmp_path):
    path = tmp_path / "nobin.yaml"
    path.write_text(kGood.replace("id: good", "id: nobin").replace(f"binary: {kFake}\n", ""))
    r = run_all(path, "--bin-dir", tmp_path, "--out", tmp_path / "res", check=2)
    assert (f"{path}:1: experiment: binary rdmalab-bench and rdmalab-kv not found in {tmp_path} "
            "(build: cmake --build build, or pass --bin-dir)") in r.stderr


def test_inventory_validation(tmp_path):
    inv = tmp_path / "c.yaml"
    inv.write_text("name: c\ncontrol_address: 10.0.0.1\nhosts:\n  - {name: a, launcher: rsh}\n"
                   "  - {name: b, port: one, identity: /no/key}\n  - {name: c}\n  - {name: c}\n")
    with pytest.raises(ConfigError) as info:
        inventory.load(inv)
    text = str(info.value)
    assert f"{inv}:4: hosts[0]: launcher 'rsh' is not valid; valid: local, netns, ssh, slurm" in text
    assert f"{inv}:5: hosts[1]: port must be an integer, got string 'one'" in text
    assert f"{inv}:5: hosts[1]: identity file '/no/key' does not exist" in text
    assert f"{inv}:7: hosts[3]: host name 'c' appears twice" in text


def test_inventory_defaults_apply(tmp_path):
    inv = tmp_path / "c.yaml"
    inv.write_text("name: c\ncontrol_address: 10.0.0.1\ndefaults: {device: mlx5_0, gid_index: 3, user: bench}\n"
                   "hosts:\n  - {name: n1, address: 10.0.0.11}\n  - {name: n2, device: mlx5_1}\n")
    c = inventory.load(inv)
    assert [(h.name, h.address, h.device, h.gid_index, h.user, h.launcher) for h in c.hosts] == [
        ("n1", "10.0.0.11", "mlx5_0", 3, "bench", "ssh"), ("n2", "n2", "mlx5_1", 3, "bench", "ssh")]


def test_every_shipped_experiment_and_suite_validates():
    root = pathlib.Path(__file__).resolve().parents[2]
    r = run_all("--list", check=0)
    assert "smoke" in r.stderr and "herd14-fig2-latency" in r.stderr
    files = sorted((root / "experiments").glob("*.yaml"))
    assert len(files) > 10


def test_readme_documents_every_key():
    from harness import conclusions, inventory as inv, suites
    text = (pathlib.Path(__file__).resolve().parents[2] / "harness" / "README.md").read_text()
    for table in (experiment.KEYS, experiment.ROLE_KEYS, experiment.PLOT_KEYS, experiment.REFERENCE_KEYS,
                  inv.INVENTORY_KEYS, inv.HOST_KEYS, suites.SUITE_KEYS, conclusions.CONCLUSION_KEYS):
        for key in table:
            assert f"| `{key}` |" in text, key
    for flag in ("--cluster", "--backend", "--out", "--resume", "--force", "--dry-run", "--list", "--fail-fast",
                 "--no-report", "--bin-dir", "--model-bin", "--profile", "--experiments-dir"):
        assert f"`{flag}" in text, flag


def test_bad_yaml_leaves_finished_results_intact(tmp_path):
    good = tmp_path / "good.yaml"
    good.write_text(kGood.replace("repeats: 2", "repeats: 1").replace("[8, 64, 512, 4096]", "[8]"))
    out = tmp_path / "res"
    run_all(good, "--out", out, "--no-report", check=0)
    before = {p: p.read_text() for p in out.rglob("*.json")}
    assert len([p for p in before if "points" in p.parts]) == 4
    bad = tmp_path / "bad.yaml"
    bad.write_text(kGood.replace("id: good", "id: bad").replace("iters: 100", "iters: [100]"))
    r = run_all(good, bad, "--out", out, "--resume", check=2)
    assert f"{bad}:9: params: parameter iters must be a string, number or boolean, got list [100]" in r.stderr
    assert {p: p.read_text() for p in out.rglob("*.json")} == before


def test_example_inventories_validate():
    clusters = pathlib.Path(__file__).resolve().parents[2] / "experiments" / "clusters"
    slurm = inventory.load(clusters / "example-slurm.yaml")
    assert [h.launcher for h in slurm.hosts] == ["slurm", "slurm"] and slurm.hosts[1].slurm_node == "node2"
    try:
        ssh = inventory.load(clusters / "example-ssh.yaml")
        assert [h.gid_index for h in ssh.hosts] == [3, 3]
    except ConfigError as exc:  # only the key file may be missing on this machine
        assert all("identity file" in m for m in exc.messages), exc.messages
