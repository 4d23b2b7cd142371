"""Large sweeps: a dry run of a million points answers in seconds with the count and an
estimated time, and a run estimated past the threshold stops before it starts unless --yes."""
import resource

from conftest import described_bin_dir, run_all, write_experiment

kMillionPoints = """
    title: a million-point sweep
    mode: tput
    roles: {{server: {{}}, client: {{}}}}
    params: {{warmup: 0.1}}
    sweep: {{grid: {{size: {sizes}, duration: {durations}, tx_depth: {depths}}}}}
    plot: {{x: size, y: mops}}
    """
kDryRunLimitS = 5


def million(exp_dir):
    return write_experiment(exp_dir, "million", kMillionPoints.format(
        sizes=[8 * i for i in range(1, 101)], durations=[round(0.1 + 0.01 * i, 2) for i in range(100)],
        depths=list(range(1, 101))))


def test_a_million_point_dry_run_answers_in_seconds_with_an_estimate(tmp_path, exp_dir):
    exp = million(exp_dir)
    bins = described_bin_dir(tmp_path / "bin")
    # CPU seconds, not the wall clock: the host is shared, and other work must not fail this.
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = run_all(exp, "--backend", "model", "--dry-run", "--bin-dir", bins, "--out", tmp_path / "res", check=0)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    assert cpu_s <= kDryRunLimitS, (cpu_s, r.stderr[-2000:])
    assert "1000000" in r.stderr and "estimated time: 2.8 h for 1000000 points" in r.stderr, r.stderr[-2000:]
    # Measured, each point's own warmup and duration count: 0.1 + 0.1..1.09 s, plus the start-up.
    r = run_all(exp, "--backend", "softnic", "--dry-run", "--bin-dir", bins, "--out", tmp_path / "res", check=0)
    assert "estimated time: 318.1 h for 1000000 points" in r.stderr, r.stderr[-2000:]
    assert not (tmp_path / "res").exists()


def test_a_run_past_the_threshold_needs_yes(tmp_path, exp_dir):
    exp = million(exp_dir)
    bins = described_bin_dir(tmp_path / "bin")
    r = run_all(exp, "--backend", "softnic", "--bin-dir", bins, "--out", tmp_path / "res", check=2)
    assert "1000000 points to run on softnic, estimated 318.1 h: more than 60 min; pass --yes" in r.stderr, r.stderr
    assert not (tmp_path / "res" / "softnic").exists()
