"""Acceptance 4 and 5: a role killed mid-point, a role that hangs, an unreachable host,
Ctrl-C, resume. Real processes on softnic (the fake bench speaks the real protocol)."""
import json
import signal
import subprocess
import time

from conftest import assert_no_orphans, kRunAll, run_all, softnic_fabrics_left_by, write_experiment


def stored(out, exp_id, backend="softnic"):
    recs = [json.loads(p.read_text()) for p in (out / backend / exp_id / "points").glob("*.json")]
    return sorted(recs, key=lambda r: (r["point"]["params"].get("size", 0), r["point"]["repeat"]))


def test_role_killed_mid_point_other_points_run(tmp_path, exp_dir):
    pids = tmp_path / "pids"
    pids.mkdir()
    exp = write_experiment(exp_dir, "crash", f"""
        title: a client dies by SIGKILL in the middle of the second point
        mode: lat
        roles: {{server: {{count: 1}}, client: {{count: 2}}}}
        params: {{fake_pid_dir: {pids}}}
        sweep:
          - grid: {{size: [8, 512]}}
          - grid: {{size: [64], fake_behavior: [crash]}}
        timeout_s: 20
        plot: {{x: size, y: mops}}
        """)
    out = tmp_path / "res"
    start = time.monotonic()
    r = run_all(exp, "--out", out, "--no-report", check=1)
    assert time.monotonic() - start < 30  # noticed through the rendezvous, not at the deadline
    recs = stored(out, "crash")
    assert [x["status"] for x in recs] == ["ok", "failed", "ok"]
    failed = recs[1]
    assert "client/0 on node1 failed with killed by SIGKILL" in failed["error"]
    assert "FAILED" in r.stderr and "killed by SIGKILL" in r.stderr
    # The failure is recorded with the logs of every role.
    assert {(x["role"], x["index"]) for x in failed["roles"]} == {("server", 0), ("client", 0), ("client", 1)}
    assert all(x["log_stderr"] and x["log_stdout"] for x in failed["roles"])
    # Finished results are intact and complete.
    assert recs[0]["roles"][1]["document"]["results"][0]["size_bytes"] == 8
    assert_no_orphans(pids)
    assert softnic_fabrics_left_by(out) == []


def test_hung_role_is_stopped_at_the_deadline_with_its_children(tmp_path, exp_dir):
    pids = tmp_path / "pids"
    pids.mkdir()
    exp = write_experiment(exp_dir, "hang", f"""
        title: the server hangs, ignores SIGTERM and has a child
        mode: lat
        roles: {{server: {{}}, client: {{}}}}
        params: {{fake_pid_dir: {pids}, fake_target: server/0}}
        sweep: {{zip: {{size: [8, 64], fake_behavior: [hang, ok]}}}}
        timeout_s: 1
        plot: {{x: size, y: mops}}
        """)
    out = tmp_path / "res"
    r = run_all(exp, "--out", out, "--no-report", check=1)
    recs = stored(out, "hang")
    assert [x["status"] for x in recs] == ["failed", "ok"]
    assert "deadline of 2 s passed with server/0, client/0 still running (stopped)" in recs[0]["error"], r.stderr
    assert (pids / "server-0-child.pid").exists()
    assert_no_orphans(pids)


def test_unreachable_host_fails_its_points_only(tmp_path, exp_dir):
    inv = tmp_path / "cluster.yaml"
    inv.write_text(f"""
name: half-broken
control_address: 127.0.0.1
launcher: local
defaults: {{bin_dir: {tmp_path}/nowhere}}
hosts:
  - {{name: a, device: softnic0}}
  - {{name: b, device: softnic1}}
  - {{name: gone, launcher: ssh, address: 127.0.0.1, ssh_port: 1}}
""")
    common = ("\nmode: lat\nparams: {size: 8}\ntimeout_s: 10\nbackends: [verbs]\n"
              "plot: {x: size, y: mops}\n")
    bad = write_experiment(exp_dir, "to-gone", "title: client on the unreachable host\n"
                           "roles: {server: {placement: [0]}, client: {placement: [2]}}" + common)
    good = write_experiment(exp_dir, "to-b", "title: client on a reachable host\n"
                            "roles: {server: {placement: [0]}, client: {placement: [1]}}" + common)
    out = tmp_path / "res"
    r = run_all(bad, good, "--cluster", inv, "--backend", "verbs", "--out", out, "--no-report", check=1)
    [failed] = stored(out, "to-gone", "verbs")
    assert failed["status"] == "failed"
    assert "host gone (127.0.0.1) unreachable over ssh" in failed["error"]
    assert "Connection refused" in failed["error"]
    [ok] = stored(out, "to-b", "verbs")
    assert ok["status"] == "ok", ok["error"]
    # verbs runs try the PCM sidecar on responder nodes; here it records why it cannot run.
    assert ok["provenance"]["pcie_measured"]["a"]["available"] is False
    assert ok["provenance"]["pcie_measured"]["a"]["reason"]
    assert "unreachable over ssh" in r.stderr


def test_interrupt_then_resume_runs_only_missing_points(tmp_path, exp_dir):
    pids = tmp_path / "pids"
    pids.mkdir()
    exp = write_experiment(exp_dir, "long", f"""
        title: six points of 0.4 s
        mode: tput
        roles: {{server: {{}}, client: {{}}}}
        params: {{duration: 0.4, fake_pid_dir: {pids}}}
        sweep: {{grid: {{size: [1, 2, 3, 4, 5, 6]}}}}
        timeout_s: 20
        plot: {{x: size, y: mops}}
        """)
    out = tmp_path / "res"
    proc = subprocess.Popen(["/usr/bin/python3", str(kRunAll), str(exp), "--out", str(out), "--no-report"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    points = out / "softnic" / "long" / "points"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(list(points.glob("*.json"))) < 2:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "interrupted" in err
    assert_no_orphans(pids)
    assert softnic_fabrics_left_by(out) == []
    done = {p.name: p.read_text() for p in points.glob("*.json")}
    assert 2 <= len(done) < 6
    assert all(json.loads(t)["status"] == "ok" for t in done.values())

    # Without --resume or --force an existing result is never silently replaced.
    r = run_all(exp, "--out", out, "--no-report", check=2)
    assert "already stored" in r.stderr and "--resume" in r.stderr

    r = run_all(exp, "--out", out, "--no-report", "--resume", check=0)
    after = {p.name: p.read_text() for p in points.glob("*.json")}
    assert len(after) == 6
    for name, text in done.items():
        assert after[name] == text  # finished points were skipped, not re-run
    assert f"{len(done)}" in r.stderr  # the summary's skipped column

    # --force re-runs everything and keeps the replaced files.
    run_all(exp, "--out", out, "--no-report", "--force", check=0)
    superseded = list((out / "softnic" / "long" / "superseded").glob("*/*.json"))
    assert len(superseded) == 6
    index = json.loads((out / "index.json").read_text())
    assert len(index["points"]) == 6 and all(p["status"] == "ok" for p in index["points"])


def test_fail_fast_stops_after_the_first_failed_point(tmp_path, exp_dir):
    exp = write_experiment(exp_dir, "ff", """
        title: the second of four points fails
        mode: lat
        roles: {server: {}, client: {}}
        sweep:
          zip: {size: [1, 2, 3, 4], fake_behavior: [ok, fail, ok, ok]}
        timeout_s: 20
        plot: {x: size, y: mops}
        """)
    out = tmp_path / "res"
    r = run_all(exp, "--out", out, "--fail-fast", "--no-report", check=1)
    recs = stored(out, "ff")
    assert [(x["point"]["params"]["size"], x["status"]) for x in recs] == [(1, "ok"), (2, "failed")]
    # A role that reports its failure through the rendezvous is named with its reason.
    assert "client/0 on node1 failed with exit code 1: rdmalab-bench: error: ibv_create_qp" in recs[1]["error"]
    assert "--fail-fast" in r.stderr


def test_role_printing_no_document_fails_its_point(tmp_path, exp_dir):
    exp = write_experiment(exp_dir, "garbage", """
        title: the client prints text instead of its JSON document
        mode: lat
        roles: {server: {}, client: {}}
        params: {size: 8, fake_behavior: garbage}
        plot: {x: size, y: mops}
        """)
    out = tmp_path / "res"
    run_all(exp, "--out", out, "--no-report", check=1)
    [rec] = stored(out, "garbage")
    assert rec["error"] == "client/0 on node1: stdout is not one JSON document (Expecting value at line 1)"
    client = next(r for r in rec["roles"] if r["role"] == "client")
    assert client["stdout_tail"] == "this is not json\n"
    server = next(r for r in rec["roles"] if r["role"] == "server")
    assert server["document"]["schema_version"] == "rdmalab-bench/1"  # what did work is kept
