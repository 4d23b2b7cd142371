"""benchmarks/peers/compare_perftest.py: both tools get the same test (inline size, warm-up),
a perftest that silently used another inline size is caught, and a guest log parses into
ratios, also for the A/A control (perftest against itself)."""
import sys
import types

import pytest

from conftest import kRoot

sys.path.insert(0, str(kRoot / "benchmarks" / "peers"))
import compare_perftest as cp  # noqa: E402


def options(**overrides):
    base = dict(inline="auto", lat_iters=1000, bw_seconds=2, bw_warmup=1, runs=1, against="rdmalab-bench",
                gid_index=None, server_core=0, client_core=1, server_dev="rxe0", client_dev="rxe1",
                bench="build/bin/rdmalab-bench", lat_sizes=[64], bw_sizes=[64], lat_verbs=["write"],
                bw_verbs=["write"], target_band=0.15)
    base.update(overrides)
    return types.SimpleNamespace(**base)


def flag(argv, name):
    return argv[argv.index(name) + 1]


def perftest_output(kind, value, inline_used):
    header = (" #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]\n"
              f" 64      1000          1.00           9.00         {value}          2.00\n") if kind == "lat" else (
              " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n"
              f" 64         1000             0.00               1.00               {value}\n")
    return f" Max inline data : {inline_used}[B]\n{'-' * 40}\n{header}{'-' * 40}\n"


def test_rate_pairs_share_window_and_warmup():
    a = options(bw_seconds=2, bw_warmup=1, inline="mlx5")
    m = cp.Metric("bw", "write", 64)
    perftest, bench = m.perftest_args(a), m.bench_args(a)
    # perftest samples between its margins: -D 4 -f 1 is 1 s of warm-up, then 2 s measured
    assert (flag(perftest, "-D"), flag(perftest, "-f")) == ("4", "1")
    assert (flag(bench, "-D"), flag(bench, "--warmup")) == ("2", "1")
    assert flag(perftest, "-I") == flag(bench, "-I") == "220"


def test_latency_pairs_have_no_warmup_like_perftest():
    bench = cp.Metric("lat", "send", 64).bench_args(options(server_dev="mlx5_0", client_dev="mlx5_1"))
    assert flag(bench, "--warmup") == "0" and flag(bench, "-I") == "236"


@pytest.mark.parametrize("devices", [("softnic0", "softnic1"), ("rxe0", "rxe1"), ("mlx5_0", "rxe0")])
def test_inline_auto_gives_both_tools_zero_where_perftest_does_not_know_the_device(devices):
    a = options(server_dev=devices[0], client_dev=devices[1])
    m = cp.Metric("lat", "write", 64)
    assert flag(m.perftest_args(a), "-I") == flag(m.bench_args(a), "-I") == "0"


def test_perftest_that_ignored_the_inline_size_is_an_error():
    m = cp.Metric("lat", "write", 64)
    with pytest.raises(cp.ParseError, match="--inline none"):
        cp.check_perftest_inline(perftest_output("lat", 5.0, 0), m, options(inline="mlx5"))
    cp.check_perftest_inline(perftest_output("lat", 5.0, 0), m, options(inline="none"))
    cp.check_perftest_inline(perftest_output("lat", 5.0, 220), m, options(inline="mlx5"))


def guest_log(a, values):
    """A log as the guest script prints it, one block per pair, from {(metric, round, side): value}."""
    blocks = []
    for (metric, round_index, side), value in values.items():
        kind = "lat" if "_lat_" in metric else "bw"
        if side == "perftest" or a.against == "perftest":
            body = perftest_output(kind, value, 0)
        else:
            key = "lat_us_p50" if kind == "lat" else "mops"
            body = '# table\n=== JSON\n{"results": [{"%s": %s}]}\n' % (key, value)
        blocks.append(f"=== BEGIN {metric}/{round_index}/{side}\n{body}=== END {metric}/{round_index}/{side} "
                      "client=0 server=0")
    return "\n".join(blocks) + "\n"


@pytest.mark.parametrize("against", ["rdmalab-bench", "perftest"])
def test_guest_log_gives_the_median_of_paired_ratios(against):
    a = options(inline="none", runs=3, against=against, bw_verbs=[])
    values = {("write_lat_64B", 0, "perftest"): 10.0, ("write_lat_64B", 0, "rdmalab"): 11.0,
              ("write_lat_64B", 1, "perftest"): 20.0, ("write_lat_64B", 1, "rdmalab"): 40.0,
              ("write_lat_64B", 2, "perftest"): 10.0, ("write_lat_64B", 2, "rdmalab"): 10.5}
    [row] = cp.parse_guest_log(a, guest_log(a, values))
    assert row["errors"] == []
    assert row["ratio"] == pytest.approx(1.1)  # ratios 1.1, 2.0, 1.05: the bimodal round does not decide
    assert row["within_target"]
    second = next(line for line in cp.guest_script(a).splitlines() if line.startswith("pair write_lat_64B/0/rdmalab"))
    assert ("ib_write_lat" if against == "perftest" else a.bench) in second
