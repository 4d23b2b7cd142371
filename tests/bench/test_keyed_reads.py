"""tput --verb read --distribution uniform|zipf --placement clustered|unclustered (nosql
Fig. 14): every READ goes to a key-chosen value inside the server's array, and the keys
follow the asked distribution. Each client reports what its first READs touched
(`key_reads`); softnic itself fails a READ outside the server's registered region."""

from __future__ import annotations

import math

import pytest

import benchrun
from benchrun import check_documents

KEYS = 100_000
VALUE_BYTES = 16
THETA = 0.99


def keyed_run(distribution: str, placement: str) -> list[dict]:
    run = benchrun.standalone("tput", ["--verb", "read", "-t", "16", "-s", str(VALUE_BYTES), "-n", "20000",
                                       "--warmup", "0.02", "--keys", str(KEYS), "--distribution", distribution,
                                       "--placement", placement], clients=2)
    server, *clients = check_documents(run)
    assert server["results"][0]["mops"] > 0
    assert server["config"]["distribution"] == distribution and server["config"]["placement"] == placement
    return [client["results"][0]["key_reads"] for client in clients]


def check_in_bounds(reads: dict) -> None:
    assert reads["keys"] == KEYS and reads["value_stride_bytes"] == VALUE_BYTES
    assert reads["region_bytes"] == KEYS * VALUE_BYTES
    assert 0 <= reads["lowest_offset_bytes"] <= reads["highest_offset_bytes"] < reads["region_bytes"]
    assert reads["sampled_reads"] >= 20000


@pytest.mark.parametrize("placement", ["clustered", "unclustered"])
def test_uniform_keys_cover_the_array_as_chance_would(placement: str) -> None:
    for reads in keyed_run("uniform", placement):
        check_in_bounds(reads)
        draws = reads["sampled_reads"]
        expected_distinct = KEYS * (1 - math.exp(-draws / KEYS))  # distinct keys among `draws` uniform draws
        assert reads["distinct_keys"] == pytest.approx(expected_distinct, rel=0.03), reads
        assert reads["hottest_key_share"] < 10 / draws + 1e-3, reads
        assert reads["expected_hottest_key_share"] == pytest.approx(1 / KEYS)
        assert reads["zipf_theta"] is None


def test_zipf_keys_have_the_promised_hottest_key_and_placement_decides_locality() -> None:
    zeta = math.fsum(rank ** -THETA for rank in range(KEYS, 0, -1))
    hot: dict[str, list[dict]] = {}
    for placement in ("clustered", "unclustered"):
        for reads in keyed_run("zipf", placement):
            check_in_bounds(reads)
            assert reads["zipf_theta"] == THETA
            assert reads["expected_hottest_key_share"] == pytest.approx(1 / zeta, rel=1e-9)
            # ~8.3% of READs; 20000 draws put the sample within ~2.5% of it (1 sigma)
            assert reads["hottest_key_share"] == pytest.approx(1 / zeta, rel=0.12), reads
            assert reads["distinct_keys"] < 0.6 * reads["sampled_reads"], reads
            # in order: the hottest key's value is the array's first; randomly placed: elsewhere
            assert (reads["hottest_slot"] == 0) == (placement == "clustered"), reads
            hot.setdefault(placement, []).append(reads)
    # In popularity order the hot values are neighbours (16 B values: 4 a line, 256 a page);
    # placed at random each hot value takes a line and a page of its own.
    for clustered, unclustered in zip(hot["clustered"], hot["unclustered"]):
        assert clustered["cache_lines_for_half_of_reads"] * 3 < unclustered["cache_lines_for_half_of_reads"], hot
        assert clustered["pages_for_half_of_reads"] * 10 < unclustered["pages_for_half_of_reads"], hot


def test_outbound_keyed_reads_go_to_each_clients_array() -> None:
    """--direction outbound: the server READs key-chosen values from every client's array."""
    run = benchrun.standalone("tput", ["--verb", "read", "-t", "16", "-s", str(VALUE_BYTES), "-n", "5000",
                                       "--warmup", "0.02", "--keys", str(KEYS), "--distribution", "zipf",
                                       "--placement", "unclustered", "--direction", "outbound"], clients=2)
    server, *_ = check_documents(run)
    row = server["results"][0]
    assert len(row["per_peer"]) == 2 and row["ops"] >= 5000
    check_in_bounds(row["key_reads"])
    assert row["key_reads"]["hottest_key_share"] == pytest.approx(row["key_reads"]["expected_hottest_key_share"],
                                                                  rel=0.12)
