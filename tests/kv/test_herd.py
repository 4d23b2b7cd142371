"""HERD (rdmalab-kv --system herd) end to end on softnic: values, one round trip per request,
lost messages, the guide16 switches, bad input."""

from __future__ import annotations

import os
import subprocess
import uuid

import pytest

from kvrun import KV, benchrun, documents, softnic, standalone

SMALL = ["--keys", "20000", "--value-size", "32"]
# The acceptance runs 60 s (KV_FAULT_SECONDS=60); the default keeps the tier short.
FAULT_SECONDS = os.environ.get("KV_FAULT_SECONDS", "5")


def test_million_mixed_operations_return_only_values_that_were_put():
    # 4 clients x W=4, 1 M operations, half PUTs over 20 000 keys in a 1 MB log: values are
    # overwritten and evicted all the time, and every GET that hits is checked.
    run = standalone("herd", [*SMALL, "--put-fraction", "0.5", "--window", "4", "--clients", "4", "-n", "250000",
                              "--log-mb", "1", "--validate", "--warmup", "0"])
    server, client = documents(run)
    row = client["results"][0]
    assert row["ops"] >= 1_000_000
    v = client["validation"]
    assert v["ok"] and v["wrong_key"] == 0 and v["corrupt"] == 0, v
    assert v["checked"] >= 200_000
    assert row["get_misses"] > 0, "the 1 MB log should have evicted keys (else eviction goes untested)"
    assert row["unanswered"] == 0
    assert server["results"][0]["ops"] == row["ops"]
    assert len(server["results"][0]["per_peer"]) == 4


def test_one_inbound_write_and_one_outbound_send_per_request():
    fabric = f"kv-{uuid.uuid4().hex[:10]}"
    try:
        run = standalone("herd", [*SMALL, "--clients", "2", "-n", "20000", "--warmup", "0"], fabric=fabric)
        server, client = documents(run)
        counts = softnic("counters", "--fabric", fabric, "--device", "softnic0", "--json")["devices"][0]["counters"]
    finally:
        benchrun.remove_fabric(fabric)
    row = client["results"][0]
    requests = row["completed_all"]
    assert row["retries"] == 0 and row["stale_answers"] == 0
    assert requests >= 40_000
    # At the server's device: each request arrived as one packet (the UC WRITE) and left
    # one packet (the UD SEND response) from one posted work request.
    assert counts["rx_packets"] == requests, counts
    assert counts["tx_packets"] == requests, counts
    assert counts["work_requests"] == requests, counts


@pytest.mark.parametrize("flags", [[], ["--batching"], ["--queues", "3"], ["--batching", "--queues", "3"],
                                   ["--workers", "2"], ["--value-size", "500", "--inline_size", "192"]])
def test_guide16_switches_and_non_inline_responses_keep_values_right(flags):
    run = standalone("herd", [*SMALL, "--put-fraction", "0.2", "--clients", "4", "-n", "20000", "--validate",
                              *flags])
    server, client = documents(run)
    assert client["validation"]["ok"] and client["validation"]["checked"] > 0
    workers = server["server"]["workers"]
    assert sum(w["requests"] for w in workers) >= 80_000
    if "--batching" in flags:
        assert any(w["responses_per_doorbell"] > 1 for w in workers), workers
    else:
        assert all(w["responses_per_doorbell"] == 1 for w in workers), workers


def test_keys_beyond_the_caches_deepen_the_pipeline_and_every_request_is_answered():
    # 200 000 keys of 32 B: buckets and entries beyond what a worker takes to stay cached, and
    # 4 clients x W=4 slots: the stages run 3 pushes apart; the run's end drains the pipeline
    # by no-ops (none left unanswered), every GET that hits checked.
    run = standalone("herd", ["--keys", "200000", "--value-size", "32", "--put-fraction", "0.2", "--clients", "4",
                              "--window", "4", "-n", "20000", "--validate"])
    server, client = documents(run)
    workers = server["server"]["workers"]
    assert [w["pipeline_gap"] for w in workers] == [3], workers
    assert client["validation"]["ok"] and client["validation"]["checked"] > 0, client["validation"]
    assert client["results"][0]["unanswered"] == 0
    assert sum(w["requests"] for w in workers) >= 80_000


def test_lost_requests_and_responses_are_retried_without_wrong_values():
    def drop_one_percent(fabric: str) -> None:
        softnic("faults", "set", "--fabric", fabric, "--drop", "0.01")

    run = standalone("herd", [*SMALL, "--put-fraction", "0.5", "--clients", "2", "-D", FAULT_SECONDS, "--retry-ms", "2",
                              "--validate"], before_run=drop_one_percent)
    server, client = documents(run)
    row = client["results"][0]
    print("fault run:", {k: row[k] for k in ("ops", "retries", "stale_answers", "unanswered")},
          "torn:", sum(w["torn"] for w in server["server"]["workers"]), "validation:", client["validation"])
    assert row["retries"] > 0, "with 1% drops some requests must have been sent again"
    assert row["unanswered"] == 0
    assert client["validation"]["ok"], client["validation"]


def test_bad_flag_values_name_the_value_and_what_is_valid():
    for argv, expected in [(["--window", "0"], "--window"), (["--system", "nosuch"], "valid systems are"),
                           (["--value-size", "1001"], "[1, 1000]"), (["--put-fraction", "2"], "put_fraction")]:
        r = subprocess.run([str(KV), "server", *argv], capture_output=True, text=True, timeout=30)
        assert r.returncode == 1, r
        lines = [ln for ln in r.stderr.splitlines() if ln.startswith("rdmalab-kv: error:")]
        assert len(lines) == 1 and expected in lines[0], r.stderr
