#!/usr/bin/python3
"""compare_ucx.py's parsers against outputs captured from perftest 4.5 (on softnic) and
ucx_perftest 1.13.1 (-v), tabs and interleaved warnings included."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compare_ucx as c  # noqa: E402

RULE = "-" * 87
LAT = (f"{RULE}\n"
       " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    "
       "t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] \n"
       "Conflicting CPU frequency values detected: 2400.000000 != 1873.463000. CPU Frequency is not max.\n"
       " 8       1000          0.06           67.04        0.08     \t       0.09        \t0.00   "
       "\t\t0.08    \t\t67.04  \n"
       f"{RULE}\n")
BW = (f"{RULE}\n"
      " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n"
      " 32         1000             323.38             131.05 \t\t   4.294103\n"
      f"{RULE}\n")
UCX = ("iterations,50.0_percentile_lat,avg_lat,overall_lat,avg_bw,overall_bw,avg_mr,overall_mr\n"
       "100000,0.055,0.058,0.058,131.01,131.01,17171825,17171825\n")


# -H (histogram): every sorted sample after "#, usec", then the usual table.
LAT_SAMPLES = (f"{RULE}\n"
               " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    "
               "t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] \n"
               "#, usec\n1, 0.260389\n2, 0.260389\n3, 0.265396\n4, 0.275410\n5, 0.390583\n"
               f"{RULE}\n" + LAT.split("\n", 1)[1])


def test_perftest_latency_is_t_typical():
    assert c.perftest_lat_us(LAT) == pytest.approx(0.08)


def test_perftest_latency_with_samples_is_their_median_at_full_resolution():
    assert c.perftest_lat_us(LAT_SAMPLES) == pytest.approx(0.265396)


def test_perftest_rate_is_msgrate():
    assert c.perftest_rate_mpps(BW) == pytest.approx(4.294103)


def test_ucx_csv():
    assert c.ucx_lat_us(UCX) == pytest.approx(0.055)
    assert c.ucx_rate_mpps(UCX) == pytest.approx(17.171825)


@pytest.mark.parametrize("parse,text", [(c.perftest_lat_us, BW), (c.perftest_rate_mpps, LAT),
                                        (c.perftest_lat_us, "Couldn't connect to 127.0.0.1:18515\n"),
                                        (c.perftest_lat_us, "#, usec\n" + RULE + "\n"),
                                        (c.ucx_lat_us, "Waiting for connection...\n")])
def test_wrong_or_missing_output_is_an_error(parse, text):
    with pytest.raises(c.ParseError):
        parse(text)


BENCH_CLIENT = """# rdmalab-bench tput  client/0  device softnic1  send UD
# UD is unreliable: rates count SENDs completed by the sender; see loss_fraction
     #bytes         #ops       Mops       Gb/s    avg[us]    p50[us]    p99[us]  p99.9[us]    max[us]
         32      8814016      4.407      1.128      3.631      3.488      6.896     12.943     41.207
"""


def test_bench_rate_is_the_mops_column():
    assert c.bench_rate_mops(BENCH_CLIENT) == pytest.approx(4.407)


def test_bench_rate_without_a_table_is_a_parse_error():
    with pytest.raises(c.ParseError):
        c.bench_rate_mops("rdmalab-bench: error: --timeout 60 s passed\n")


def test_placement_is_the_class_every_probe_saw():
    bounds = (25.0, 100.0)
    assert c.placement_of([34.0, 36.5, 40.0], bounds) == c.NEAR
    assert c.placement_of([15.0, 14.2], bounds) == c.SIBLING
    assert c.placement_of([220.0, 214.0], bounds) == c.FAR
    assert c.placement_of([35.0, 220.0], bounds) == c.MIXED
    assert c.placement_of([37.0, 15.0], bounds) == c.MIXED
    assert c.placement_of([35.0, None], bounds) == c.MIXED
    assert c.placement_of([], bounds) is None


def test_rounds_that_moved_are_counted_not_used():
    rounds = [{"ratio": 1.0, "placement": c.NEAR}, {"ratio": 1.1, "placement": c.NEAR},
              {"ratio": 0.5, "placement": c.MIXED}, {"ratio": 0.8, "placement": c.FAR},
              {"ratio": None, "placement": c.NEAR}]
    s = c.summarize_rounds(rounds, "ratio")
    assert s["values"] == [1.0, 1.1, 0.8]
    assert s["median"] == pytest.approx(1.0)
    assert s["by_placement"] == {c.NEAR: {"median": pytest.approx(1.05), "rounds": 2},
                                 c.FAR: {"median": pytest.approx(0.8), "rounds": 1}}
    assert s["rounds_mixed"] == 1
    assert c.placement_text(s) == "2 near 1.05x, 1 far 0.80x, 1 mixed"


def test_unprobed_rounds_all_count():
    s = c.summarize_rounds([{"ratio": 0.9, "placement": None}, {"ratio": 1.1, "placement": None}], "ratio")
    assert s["median"] == pytest.approx(1.0) and s["by_placement"] == {} and s["rounds_mixed"] == 0
    assert c.placement_text(s) == "-"
