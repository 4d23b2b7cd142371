"""rdmalab-bench --stack udp|tcp under the coordinator (issue 19, items 1-2): the RoCE study's
Ethernet side and the NoSQL survey's TCP series run through the kernel's sockets, with the
same JSON schema, between network-namespace hosts where root allows (loopback otherwise)."""
import json
import os
import shutil

import pytest

from conftest import kRoot, run_all, write_experiment

kBench = kRoot / "build" / "bin" / "rdmalab-bench"
kNetns = os.geteuid() == 0 and shutil.which("ip") is not None

pytestmark = pytest.mark.skipif(not kBench.exists(), reason="rdmalab-bench not built")


def client_rows(out, exp_id):
    rows = {}
    for p in (out / "softnic" / exp_id / "points").glob("*.json"):
        rec = json.loads(p.read_text())
        assert rec["status"] == "ok", rec["error"]
        client = next(r for r in rec["roles"] if r["role"] == "client")
        rows[tuple(sorted(rec["point"]["params"].items()))] = (client["document"], rec)
    return rows


@pytest.mark.parametrize("cluster", ["netns" if kNetns else "local"])
def test_udp_batches_cross_the_hosts_network_with_one_way_latency(tmp_path, exp_dir, cluster):
    exp = write_experiment(exp_dir, "udp", """
        title: UDP forwarding, one-way latency by I/O batch
        mode: lat
        roles: {server: {}, client: {}}
        params: {stack: udp, size: 1500, iters: 200}
        sweep: {grid: {io_batch: [1, 8]}}
        timeout_s: 20
        plot: {x: io_batch, y: lat_us_p50, role: client}
        """, binary=kBench)
    out = tmp_path / "res"
    run_all(exp, "--cluster", cluster, "--out", out, "--no-report", check=0)
    rows = client_rows(out, "udp")
    assert len(rows) == 2
    for doc, rec in rows.values():
        row = doc["results"][0]
        assert row["latency_kind"] == "one_way" and row["lat_us_p50"] > 0 and row["ops"] >= 200
        assert row["io_batch"] == rec["point"]["params"]["io_batch"] and row["lost_packets"] == 0
        local, peer = row["socket"]["local"], row["socket"]["peer"]
        if cluster == "netns":  # the datagrams left one namespace host for the other
            hosts = [h["address"] for h in rec["provenance"]["hosts"]]
            assert local.split(":")[0] == hosts[1] and peer.split(":")[0] == hosts[0]
        else:
            assert local.startswith("127.") and peer.startswith("127.")


def test_tcp_requests_of_both_directions_and_a_clear_error_for_a_verb_tcp_lacks(tmp_path, exp_dir):
    exp = write_experiment(exp_dir, "tcp", """
        title: TCP request/response
        mode: tput
        roles: {server: {}, client: {}}
        params: {stack: tcp, tx_depth: 4, duration: 0.2, warmup: 0.05}
        sweep: {grid: {verb: [write, read], size: [8, 512]}}
        timeout_s: 20
        plot: {x: size, y: mops, series: verb, role: client}
        """, binary=kBench)
    out = tmp_path / "res"
    run_all(exp, "--out", out, "--no-report", check=0)
    rows = client_rows(out, "tcp")
    assert len(rows) == 4
    for doc, _ in rows.values():
        assert doc["results"][0]["mops"] > 0 and doc["results"][0]["stack"] == "tcp"
        assert "kernel TCP socket" in doc["notes"][0]
    bad = write_experiment(exp_dir, "tcpbad", """
        title: a verb TCP has no counterpart for
        mode: tput
        roles: {server: {}, client: {}}
        params: {stack: tcp, verb: faa, size: 8}
        timeout_s: 10
        plot: {x: size, y: mops}
        """, binary=kBench)
    run_all(bad, "--out", out, "--no-report", check=1)
    rec = json.loads(next((out / "softnic" / "tcpbad" / "points").glob("*.json")).read_text())
    assert "--verb faa with --stack tcp: write (size-byte requests) or read (size-byte responses)" in rec["error"]
