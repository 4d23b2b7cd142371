"""End to end on this machine: local and netns launchers, the store (JSON per point with
provenance, index, CSV), figures and report, the model backend's plumbing, the smoke suite."""
import csv
import json
import os
import shutil
import subprocess
import time

import pytest

from conftest import (assert_no_orphans, described_bin_dir, kDescribeFixtures, kRoot, run_all,
                      softnic_fabrics_left_by, write_experiment)

kTwoRoles = """
    title: two roles, three sizes, two repeats
    mode: lat
    roles: {{server: {{count: 1}}, client: {{count: 2}}}}
    params: {{iters: 100, fake_pid_dir: {pids}}}
    sweep: {{grid: {{size: [8, 64, 512]}}}}
    repeats: 2
    timeout_s: 20
    plot: {{x: size, y: mops, role: client, xlog: true}}
    reference: [{{x: 8, y: 30, source: made up}}]
    """
kProvenanceKeys = {"run_id", "started", "ended", "duration_s", "git", "harness", "coordinator", "hosts", "devices",
                   "provider_library", "binary", "inventory", "command_lines", "rendezvous", "pcie_measured"}


def load_points(out, backend, exp_id):
    return [json.loads(p.read_text()) for p in sorted((out / backend / exp_id / "points").glob("*.json"))]


def test_local_run_stores_points_index_csv_and_report(tmp_path, exp_dir):
    pids = tmp_path / "pids"
    pids.mkdir()
    exp = write_experiment(exp_dir, "two", kTwoRoles.format(pids=pids))
    out = tmp_path / "res"
    r = run_all(exp, "--out", out, check=0)
    recs = load_points(out, "softnic", "two")
    assert len(recs) == 6 and all(x["status"] == "ok" for x in recs)
    rec = recs[0]
    assert rec["schema_version"] == "rdmalab-result/2"
    assert kProvenanceKeys <= set(rec["provenance"]), kProvenanceKeys - set(rec["provenance"])
    assert rec["experiment"]["sha256"] and rec["experiment"]["file"] == str(exp)
    assert [h["device"] for h in rec["provenance"]["hosts"]] == ["softnic0", "softnic1", "softnic2"]
    assert rec["provenance"]["fabric"]["name"].startswith("rdl-")
    roles = {(x["role"], x["index"]): x for x in rec["roles"]}
    assert set(roles) == {("server", 0), ("client", 0), ("client", 1)}
    client = roles[("client", 1)]
    # Contract 1's command line: mode, rendezvous, role, index, peers, device flags, parameters.
    argv = client["argv"][client["argv"].index("--") + 1:]
    assert argv[1:10] == ["lat", "--rendezvous", rec["provenance"]["rendezvous"]["address"], "--role", "client",
                          "--index", "1", "--peers", "1"]
    assert "--ib-dev" in argv and argv[argv.index("--ib-dev") + 1] == "softnic2"
    assert f"--size={rec['point']['params']['size']}" in argv and argv[-1] == "--out_json"
    assert client["document"]["environment"]["device"]["fabric"] == rec["provenance"]["fabric"]["name"]
    assert roles[("server", 0)]["peers"] == 2
    assert rec["headline"]["metric"] == "mops" and rec["headline"]["value"] > 0
    events = rec["provenance"]["rendezvous"]["events"]
    assert sorted(e for e in events if e.startswith("bye")) == ["bye client/0", "bye client/1", "bye server/0"]
    # Index and CSV.
    index = json.loads((out / "index.json").read_text())
    assert len(index["points"]) == 6 and {p["experiment"] for p in index["points"]} == {"two"}
    rows = list(csv.DictReader(open(out / "softnic" / "two" / "results.csv")))
    assert len(rows) == 6 * 3 and {"param.size", "mops", "lat_us_mean", "role"} <= set(rows[0])
    # Figures and report from the stored results.
    report = out / "report" / "index.html"
    assert report.exists() and "report:" in r.stderr
    html = report.read_text()
    assert 'src="figures/softnic--two.png"' in html and "made up" not in html  # sources stay in the YAML
    assert (out / "report" / "figures" / "softnic--two.svg").read_text().startswith("<?xml")
    assert (out / "report" / "figures" / "softnic--two.png").read_bytes()[:4] == b"\x89PNG"
    assert_no_orphans(pids)
    assert softnic_fabrics_left_by(out) == []
    # `report` redraws from the store alone.
    shutil.rmtree(out / "report")
    run_all("report", "--out", out, check=0)
    assert report.exists()


def test_dry_run_runs_nothing(tmp_path, exp_dir):
    exp = write_experiment(exp_dir, "two", kTwoRoles.format(pids=tmp_path))
    r = run_all(exp, "--dry-run", "--out", tmp_path / "res", "--bin-dir", described_bin_dir(tmp_path / "bin"), check=0)
    assert "two" in r.stderr and "--rendezvous HOST:PORT --role server --index 0 --peers 2" in r.stderr
    assert not (tmp_path / "res").exists()


def test_any_python3_on_path_works(tmp_path):
    """run_all.py re-executes under Debian's python3 when the first python3 lacks the packages."""
    r = subprocess.run(["python3", str(kRoot / "run_all.py"), "--list"], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "COLUMNS": "200"})
    assert r.returncode == 0, r.stderr
    assert "herd14-fig2-latency" in r.stderr


kFakeModel = """#!/usr/bin/python3
import json, sys
if sys.argv[1:] == ["--describe"]:
    sys.stdout.write(open("DESCRIPTION").read())
    sys.exit(0)
req = json.load(sys.stdin)
if req["params"].get("size") == 999:
    sys.stderr.write("rdmalab-model: error: size 999 is not supported; valid: 0..65536\\n")
    sys.exit(2)
size = req["params"]["size"]
doc = {"schema_version": "rdmalab-bench/1", "tool": {"name": "rdmalab-model", "version": "fake"},
       "mode": req["mode"], "backend": "model", "prediction": True, "profile": req["profile"],
       "config": {"mode": req["mode"], "size": size},  # the bench says [size]: kept as a warning
       "results": [{"size_bytes": size, "mops": 100.0 / (1 + size / 64), "gbps": None, "lat_us_mean": None,
                    "lat_us_p50": None, "lat_us_p99": None, "bottleneck": "pcie_dma_read",
                    "utilization": {"pcie_dma_read": 0.9}, "pcie_bytes_per_op": 64 + size}],
       "pcie": {"modeled": {}, "measured": None}, "validation": {"enabled": False}}
json.dump({"request": req, **doc}, sys.stdout)
"""


def test_model_backend_plumbing(tmp_path, exp_dir):
    exp = write_experiment(exp_dir, "mod", """
        title: model plumbing
        mode: tput
        roles: {server: {count: 1}, client: {count: 4}}
        params: {profile: cib, direction: inbound}
        labels: [profile]
        sweep: {grid: {size: [8, 64, 999]}}
        plot: {x: size, y: mops}
        """)
    out = tmp_path / "res"
    # Missing model executable: a clear error before anything runs.
    r = run_all(exp, "--backend", "model", "--bin-dir", tmp_path, "--out", out, check=2)
    assert f"model backend: {tmp_path}/rdmalab-model does not exist" in r.stderr
    model = tmp_path / "fake-model"
    model.write_text(kFakeModel.replace("DESCRIPTION", str(kDescribeFixtures / "rdmalab-model.json")))
    model.chmod(0o755)
    r = run_all(exp, "--backend", "model", "--model-bin", model, "--out", out, check=1)
    recs = {x["point"]["params"]["size"]: x for x in load_points(out, "model", "mod")}
    assert recs[8]["status"] == "ok" and recs[64]["status"] == "ok"
    doc = recs[8]["roles"][0]["document"]
    # profile is the harness's (the point's "profile"), never a parameter of the model's point.
    assert doc["request"] == {"experiment": "mod", "profile": "cib", "mode": "tput",
                              "roles": {"server": 1, "client": 4}, "params": {"direction": "inbound", "size": 8}}
    assert doc["results"][0]["bottleneck"] == "pcie_dma_read"
    assert recs[8]["roles"][0]["schema_warnings"] == ["config/size: 8 is not of type 'array'"]
    assert recs[8]["headline"]["value"] == pytest.approx(100 / (1 + 8 / 64))
    assert recs[999]["status"] == "failed"
    assert recs[999]["error"] == "model: exit code 2: rdmalab-model: error: size 999 is not supported; valid: 0..65536"
    assert (out / "report" / "figures" / "model--mod.png").exists()


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("ip") is None, reason="netns launcher needs root and iproute2")
def test_netns_launcher_crosses_a_network(tmp_path, exp_dir):
    pids = tmp_path / "pids"
    pids.mkdir()
    exp = write_experiment(exp_dir, "two", kTwoRoles.format(pids=pids))
    out = tmp_path / "res"
    run_all(exp, "--cluster", "netns", "--out", out, "--no-report", check=0)
    recs = load_points(out, "softnic", "two")
    assert len(recs) == 6 and all(x["status"] == "ok" for x in recs)
    assert recs[0]["provenance"]["rendezvous"]["address"].startswith("10.231.0.1:")
    assert [h["address"] for h in recs[0]["provenance"]["hosts"]] == ["10.231.1.1", "10.231.1.2", "10.231.1.3"]
    assert [h["launcher"] for h in recs[0]["provenance"]["hosts"]] == ["netns"] * 3
    leftover = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert "rdl-" not in leftover
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert "rdlbr" not in links
    assert_no_orphans(pids)


@pytest.mark.skipif(not (kRoot / "build" / "bin" / "rdmalab-bench").exists(), reason="rdmalab-bench not built")
def test_smoke_suite_end_to_end_under_3_minutes(tmp_path):
    start = time.monotonic()
    out = tmp_path / "res"
    r = run_all("smoke", "--out", out, timeout=240)
    elapsed = time.monotonic() - start
    print(f"smoke suite: {elapsed:.1f} s")
    recs = [json.loads(p.read_text()) for p in out.glob("softnic/*/points/*.json")]
    failed = [f"{x['experiment']['id']} {x['point']['params']}: {x['error']}" for x in recs if x["status"] != "ok"]
    assert not failed, "\n".join(failed)
    assert r.returncode == 0, r.stderr[-3000:]
    assert elapsed < 180
    assert len({x["experiment"]["id"] for x in recs}) == 7
    assert len(list((out / "report" / "figures").glob("*.png"))) == 7
    assert softnic_fabrics_left_by(out) == []
