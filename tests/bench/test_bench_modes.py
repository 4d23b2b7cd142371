"""Every rdmalab-bench mode runs on softnic, moves correct data (--validate), and prints
one JSON document per process that validates against the schema in the repo."""

from __future__ import annotations

import json

import pytest

import benchrun
from benchrun import check_documents

SHORT = ["-n", "3000", "--warmup", "0.02"]
LAT_CASES = {
    "write-pingpong": ["--verb", "write"],
    "write-inline-echo": ["--verb", "write_inline", "-Q", "16", "-t", "64"],
    "read": ["--verb", "read"],
    "send-pingpong": ["--verb", "send"],
    "send-pingpong-events": ["--verb", "send", "--events"],
    "send-completion-events": ["--verb", "send", "--lat-method", "completion", "-e"],
    # -R: the QP connected through rdma_cm (softnic's librdmacm here, any provider's elsewhere)
    "write-pingpong-rdma-cm": ["--verb", "write", "-R"],
    "send-uc-rdma-cm": ["--verb", "send", "-c", "UC", "--rdma_cm"],
    "send-ud-pingpong": ["--verb", "send", "-c", "UD"],
    "send-uc-completion": ["--verb", "send", "-c", "UC", "--lat-method", "completion"],
    "write-completion": ["--verb", "write", "--lat-method", "completion"],
    "cas": ["--verb", "cas"],
    "faa": ["--verb", "faa"],
    "sweep": ["--verb", "write", "-s", "1,64,4096"],
}


@pytest.mark.parametrize("case", LAT_CASES, ids=list(LAT_CASES))
def test_lat(case: str) -> None:
    run = benchrun.standalone("lat", [*LAT_CASES[case], *SHORT, "--validate"])
    server, client = check_documents(run)
    sizes = [row["size_bytes"] for row in client["results"]]
    assert sizes == (([1, 64, 4096]) if case == "sweep" else [8])
    for row in client["results"]:
        assert row["ops"] == 3000
        assert 0 < row["lat_us_min"] <= row["lat_us_p50"] <= row["lat_us_p99"] <= row["lat_us_max"]
        expected_kind = "completion" if case in ("read", "cas", "faa", "send-uc-completion", "write-completion",
                                                 "send-completion-events") else "half_rtt"
        assert row["latency_kind"] == expected_kind
    assert server["results"][0]["mops"] is None  # the server does not time anything


TPUT_CASES = {
    "write-rc": ["--verb", "write"],
    "write-uc-inline": ["--verb", "write", "-c", "UC", "-I", "64"],
    "write-postlist-unsignaled": ["--verb", "write", "-l", "8", "-Q", "8", "-t", "64"],
    "write-sge4": ["--verb", "write", "--sge", "4", "-s", "256"],
    "read": ["--verb", "read", "-t", "16"],
    "send-rc": ["--verb", "send"],
    "send-uc-multiqueue": ["--verb", "send", "-c", "UC", "-q", "3"],
    "send-ud": ["--verb", "send", "-c", "UD", "-t", "32"],
    "send-ud-header-only": ["--verb", "send", "-c", "UD", "--header-only", "-t", "32"],
    "write-two-threads": ["--verb", "write", "--threads", "2"],
    "write-sweep": ["--verb", "write", "-s", "256,8"],
    "read-sweep": ["--verb", "read", "-s", "4096,16", "-t", "8"],
    "send-sweep": ["--verb", "send", "-s", "1024,32", "-Q", "4"],
    # -R: every QP (3 per client, 2 clients) connected through rdma_cm on one listening port
    "write-rc-multiqueue-rdma-cm": ["--verb", "write", "-q", "3", "-R"],
    "send-uc-two-threads-rdma-cm": ["--verb", "send", "-c", "UC", "-q", "2", "--threads", "2", "--rdma_cm"],
}


@pytest.mark.parametrize("case", TPUT_CASES, ids=list(TPUT_CASES))
def test_tput_inbound(case: str) -> None:
    run = benchrun.standalone("tput", [*TPUT_CASES[case], *SHORT, "--validate"], clients=2)
    server, *clients = check_documents(run)
    row = server["results"][0]
    assert row["mops"] > 0 and row["gbps"] is not None
    assert [p["peer"] for p in row["per_peer"]] == ["client/0", "client/1"]
    assert row["uniformity_ratio"] >= 1
    assert row["ops"] == sum(c["results"][0]["ops"] for c in clients)
    threads = 2 if "two-threads" in case else 1
    for client in clients:
        assert len(client["results"][0]["per_thread"]) == threads
        assert client["results"][0]["ops"] >= 3000 * threads
    if "-c" in TPUT_CASES[case] and "UD" in TPUT_CASES[case]:
        assert row["received_ops"] <= row["sent_ops"]
    if "send" in TPUT_CASES[case]:
        assert server["validation"]["checks"][0]["checked_messages"] > 0


def test_tput_outbound_three_clients() -> None:
    run = benchrun.standalone("tput", ["--verb", "write", "--direction", "outbound", *SHORT, "--validate"], clients=3)
    server, *clients = check_documents(run)
    row = server["results"][0]
    assert row["ops"] >= 3000 and len(row["per_peer"]) == 3
    assert sum(p["ops"] for p in row["per_peer"]) >= row["ops"]
    for client in clients:
        assert client["results"][0]["mops"] is None
        assert client["validation"]["checks"][0]["checked_messages"] > 0


@pytest.mark.parametrize("verb,rdma_cm", [("write", False), ("send", False), ("write", True)])
def test_tput_alltoall_under_rendezvous(verb: str, rdma_cm: bool) -> None:
    """With -R the nodes' UC QPs connect through rdma_cm (each node listens on --port + its
    index, the higher index requests), the rendezvous still carries regions and results."""
    connection = "UD" if verb == "send" else "UC"
    run = benchrun.coordinated("tput", ["--verb", verb, "-c", connection, "--direction", "alltoall", *SHORT,
                                        "--validate", *(["-R", "-p", str(benchrun.free_port())] if rdma_cm else [])],
                               roles=[("node", 3)], link="roce" if rdma_cm else "ib")
    documents = check_documents(run)
    aggregate = documents[0]["results"][0]
    assert [p["peer"] for p in aggregate["per_peer"]] == ["node/0", "node/1", "node/2"]
    assert aggregate["ops"] == sum(d["results"][0]["ops"] for d in documents[1:]) + documents[0]["results"][0]["per_peer"][0]["ops"]


def test_tput_rdma_cm_under_the_coordinator() -> None:
    """-R under the coordinator: the server publishes where it listens through the
    rendezvous; 2 clients x 2 QPs connect through rdma_cm."""
    run = benchrun.coordinated("tput", ["--verb", "write", "-q", "2", "-R", "-p", str(benchrun.free_port()), *SHORT,
                                        "--validate"], roles=[("server", 1), ("client", 2)])
    server, *clients = check_documents(run)
    row = server["results"][0]
    assert [p["peer"] for p in row["per_peer"]] == ["client/0", "client/1"]
    assert row["ops"] == sum(c["results"][0]["ops"] for c in clients)


@pytest.mark.parametrize("verb,counters,rdma_cm", [("faa", 1, False), ("faa", 64, False), ("cas", 1, False),
                                                   ("cas", 16, False), ("cas", 4, False), ("faa", 16, True),
                                                   ("cas", 4, True)])
def test_atomics_counters_add_up(verb: str, counters: int, rdma_cm: bool) -> None:
    # Z = 4 repeats the size: a second measured row must reuse the CAS result slots correctly.
    sizes = ["-s", "8,8"] if counters == 4 else []
    run = benchrun.standalone("atomics", ["--verb", verb, "--counters", str(counters), *sizes, *SHORT,
                                          "--validate", *(["-R", "-q", "2"] if rdma_cm else [])], clients=2)
    server, *_ = check_documents(run)
    check = server["validation"]["checks"][0]
    assert check["ok"] and check["counter_sum"] == check["expected_sum"] > 0


def test_modeled_pcie_counters_follow_the_posting_pattern() -> None:
    """Doorbell batches of 4 (one 8 B doorbell + 26 B TLP header per batch) and 64 B
    payload writes (+26 B header) at the responder, per op; totals are per-op x ops."""
    run = benchrun.standalone("tput", ["--verb", "write", "-l", "4", "-Q", "8", *SHORT])
    server, client = check_documents(run)
    requester = client["pcie"]["modeled"]["rows"][0]
    responder = server["pcie"]["modeled"]["rows"][0]
    assert requester["side"] == "requester" and responder["side"] == "responder"
    assert requester["per_op"]["pcie_mmio_bytes"] == pytest.approx((8 + 26) / 4)
    assert responder["per_op"]["pcie_d2h_bytes"] == pytest.approx(64 + 26)
    for modeled, document in ((requester, client), (responder, server)):
        ops = document["results"][0]["ops"]
        assert modeled["ops"] == ops
        for key, value in modeled["per_op"].items():
            assert modeled["total"][key] == pytest.approx(value * ops)


def test_roce_link_layer_with_gid_index() -> None:
    run = benchrun.standalone("lat", ["--verb", "send", "-x", "0", *SHORT], link="roce")
    _, client = check_documents(run)
    assert client["environment"]["device"]["link_layer"] == "Ethernet"


def test_out_json_file_and_table(tmp_path) -> None:
    out = tmp_path / "client.json"
    run = benchrun.standalone("tput", [*SHORT], client_args=[f"--out_json={out}"])
    assert run.ok, run.describe()
    assert "Mops" in run.clients[0].stdout  # the table goes to stdout when JSON goes to a file
    assert json.loads(out.read_text())["role"] == "client"
