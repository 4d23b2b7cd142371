"""A point this host cannot run is stored as unsupported with its reason, counts as done
(exit 0, --resume skips it) and is never drawn as a value; a real failure stays a failure.
The far-NUMA point runs the real rdmalab-bench on softnic; the mixed cases use the fake bench."""
import csv
import json
import os
import re

import pytest

from conftest import kRoot, run_all, softnic_fabrics_left_by, write_experiment
from harness.store import Store
from plots.figures import Figure, Table

kBench = kRoot / "build" / "bin" / "rdmalab-bench"
kNumaNodes = len([n for n in os.listdir("/sys/devices/system/node") if re.fullmatch(r"node\d+", n)])


def stored(out, exp_id, key):
    recs = [json.loads(p.read_text()) for p in (out / "softnic" / exp_id / "points").glob("*.json")]
    return {r["point"]["params"][key]: r for r in recs}


@pytest.mark.skipif(not kBench.exists(), reason="rdmalab-bench not built")
def test_raw_packet_stack_where_the_provider_refuses_is_unsupported_with_its_reason(tmp_path, exp_dir):
    """--stack raw on softnic (RoCE link): the provider refuses raw-packet QPs; the point is
    stored as unsupported with that reason beside the UDP point that runs."""
    exp = write_experiment(exp_dir, "raw", """
        title: UDP datagrams through the kernel and through a raw-packet QP
        mode: tput
        link: roce
        roles: {server: {}, client: {}}
        params: {size: 256, io_batch: 8, tx_depth: 16, iters: 2000}
        sweep: {grid: {stack: [udp, raw]}}
        timeout_s: 20
        plot: {kind: bar, x: stack, y: mops, role: client}
        """, binary=kBench)
    out = tmp_path / "res"
    run_all(exp, "--out", out, check=0)
    points = stored(out, "raw", "stack")
    assert points["udp"]["status"] == "ok", points["udp"]["error"]
    raw = points["raw"]
    assert raw["status"] == "unsupported" and raw["error"] is None and raw["headline"] is None
    assert "refused an IBV_QPT_RAW_PACKET QP (ibv_create_qp: Operation not supported" in raw["unsupported"]
    assert all(role["exit_code"] == 3 for role in raw["roles"]), [role["exit_code"] for role in raw["roles"]]


@pytest.mark.skipif(not kBench.exists(), reason="rdmalab-bench not built")
@pytest.mark.skipif(kNumaNodes != 1, reason=f"this host has {kNumaNodes} NUMA nodes; far memory is supported")
def test_far_numa_on_a_one_node_host_is_unsupported_not_failed(tmp_path, exp_dir):
    exp = write_experiment(exp_dir, "numa", """
        title: SEND bandwidth, source buffers near and far from the device
        mode: tput
        roles: {server: {}, client: {}}
        params: {verb: send, connection: RC, direction: inbound, size: 4096, tx_depth: 16, iters: 2000}
        sweep: {grid: {numa: [near, far]}}
        timeout_s: 20
        plot: {kind: bar, x: numa, y: gbps, role: client}
        """, binary=kBench)
    out = tmp_path / "res"
    r = run_all(exp, "--out", out, check=0)
    points = stored(out, "numa", "numa")
    assert points["near"]["status"] == "ok", points["near"]["error"]
    far = points["far"]
    assert far["status"] == "unsupported" and far["error"] is None and far["headline"] is None
    assert far["unsupported"].startswith("--numa far: this host has 1 NUMA node, so no memory is far from device")
    assert far["schema_version"] == "rdmalab-result/2"
    client = next(x for x in far["roles"] if x["role"] == "client")
    assert client["exit_code"] == 3 and client["document"] is None
    # The other role was told through the rendezvous and stopped, as for a failure.
    server = next(x for x in far["roles"] if x["role"] == "server")
    assert server["exit_code"] not in (0, None)
    assert "unsupported: --numa far" in server["stderr_tail"]
    # The summary counts it apart from failures and says why.
    summary = r.stdout + r.stderr
    assert re.search(r"numa\s*│\s*1\s*│\s*0\s*│\s*1\s*│\s*0\s*│", summary), summary
    assert "unsupported on this host: numa=far #0: --numa far: this host has 1 NUMA node" in summary
    # index.json and results.csv carry the reason.
    index = json.loads((out / "index.json").read_text())
    assert index["schema_version"] == "rdmalab-index/2"
    assert {e["status"] for e in index["points"]} == {"ok", "unsupported"}
    assert next(e for e in index["points"] if e["status"] == "unsupported")["unsupported"] == far["unsupported"]
    with open(out / "softnic" / "numa" / "results.csv") as f:
        rows = [row for row in csv.DictReader(f) if row["param.numa"] == "far"]
    assert [(row["status"], row["unsupported"]) for row in rows] == [("unsupported", far["unsupported"])]
    # The report names it with its reason and never shows a value for it.
    page = (out / "report" / "index.html").read_text()
    assert "1/2 ok, 1 unsupported" in page
    assert f"unsupported: {far['unsupported']}" in page
    assert (out / "report" / "figures" / "softnic--numa.svg").exists()
    fig = Figure(Table(list(Store(out).points("softnic", "numa"))), None)
    [curve] = fig.curves(None)
    assert [x for x, _, _ in curve["points"]] == ["near"]  # the bar drawn for near only
    assert fig.tables[0].not_run_notes() == [f"unsupported on softnic: numa=far: {far['unsupported']}"]
    assert fig.tables[0].lookup(None, None, "far") == (None, f"unsupported ({far['unsupported']})")
    # --resume (and the default suite's implied resume) does not run it again.
    before = (out / "softnic" / "numa" / "points" / f"{far['point']['id']}.json").read_text()
    run_all(exp, "--out", out, "--resume", "--no-report", check=0)
    assert (out / "softnic" / "numa" / "points" / f"{far['point']['id']}.json").read_text() == before
    assert not (out / "softnic" / "numa" / "superseded").exists()
    assert softnic_fabrics_left_by(out) == []


def test_unsupported_and_failed_points_side_by_side(tmp_path, exp_dir):
    """The unsupported role exits after its peers have already failed because of it: its own
    exit status still decides, and a point that really failed makes the run exit 1."""
    exp = write_experiment(exp_dir, "mixed", """
        title: one point this host cannot run, one that fails, one that works
        mode: lat
        roles: {server: {}, client: {count: 2}}
        sweep: {zip: {size: [8, 64, 512], fake_behavior: [unsupported, fail, ok]}}
        timeout_s: 20
        plot: {x: size, y: mops}
        """)
    out = tmp_path / "res"
    r = run_all(exp, "--out", out, check=1)
    points = stored(out, "mixed", "size")
    assert {size: rec["status"] for size, rec in points.items()} == {8: "unsupported", 64: "failed", 512: "ok"}
    assert points[8]["unsupported"] == "--numa far: this host has 1 NUMA node (fake)"
    assert "client/0 on node1 failed with exit code 1: rdmalab-bench: error: ibv_create_qp" in points[64]["error"]
    assert "unsupported" not in points[64] and points[64]["error"]
    assert re.search(r"mixed\s*│\s*1\s*│\s*0\s*│\s*1\s*│\s*1\s*│", r.stdout + r.stderr), r.stdout + r.stderr
    page = (out / "report" / "index.html").read_text()
    assert "1/3 ok, 1 unsupported" in page and "1 failed point(s)" in page
    # --resume re-runs the failed point only; the unsupported one is done.
    unsupported_file = out / "softnic" / "mixed" / "points" / f"{points[8]['point']['id']}.json"
    before = unsupported_file.read_text()
    r = run_all(exp, "--out", out, "--resume", "--no-report", check=1)
    assert unsupported_file.read_text() == before
    superseded = list((out / "softnic" / "mixed" / "superseded").glob("*/*.json"))
    assert [json.loads(p.read_text())["point"]["params"]["size"] for p in superseded] == [64]


def test_only_unsupported_and_ok_points_exit_zero(tmp_path, exp_dir):
    exp = write_experiment(exp_dir, "fine", """
        title: every point ran or cannot run here
        mode: lat
        roles: {server: {}, client: {}}
        params: {fake_target: server/0}
        sweep: {zip: {size: [8, 64], fake_behavior: [ok, unsupported]}}
        timeout_s: 20
        plot: {x: size, y: mops}
        """)
    out = tmp_path / "res"
    run_all(exp, "--out", out, "--no-report", check=0)
    points = stored(out, "fine", "size")
    assert points[64]["status"] == "unsupported" and points[8]["status"] == "ok"
