"""Puts the repository root on sys.path so that `harness` and `plots` import from the tree."""
import pathlib
import sys

kRoot = pathlib.Path(__file__).resolve().parents[2]
if str(kRoot) not in sys.path:
    sys.path.insert(0, str(kRoot))

import atexit
import json
import os
import shutil
import signal
import subprocess
import tempfile
import textwrap

import pytest

kRunAll = kRoot / "run_all.py"
kFake = kRoot / "tests" / "python" / "fake_bench.py"
kRunTimeoutS = 120
kDescribeFixtures = kRoot / "tests" / "python" / "data" / "describe"
# Descriptions are cached per build of a binary; the tests' binaries (fake_bench, shims) change
# with the fixtures, not with their own mtime, so the tests keep a cache of their own.
if "RDMALAB_CACHE_DIR" not in os.environ:
    os.environ["RDMALAB_CACHE_DIR"] = tempfile.mkdtemp(prefix="rdmalab-test-cache-")
    atexit.register(shutil.rmtree, os.environ["RDMALAB_CACHE_DIR"], True)


def run_all(*args, timeout=kRunTimeoutS, check=None, model=False):
    """Runs run_all.py as a user would (its own process), returns CompletedProcess. Without
    `model`, a run leaves out the model's predictions that every run adds (--no-model): most tests
    run fake_bench experiments, which the model cannot predict."""
    if not model and args and str(args[0]) not in ("report", "paper", "score", "import", "check"):
        args = (*args, "--no-model")
    r = subprocess.run(["/usr/bin/python3", str(kRunAll), *map(str, args)], capture_output=True, text=True,
                       timeout=timeout, env={**os.environ, "COLUMNS": "200"})
    if check is not None:
        assert r.returncode == check, f"exit {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    return r


def write_experiment(directory, exp_id, body, binary=kFake):
    """A fake-bench experiment file named after its id."""
    path = directory / f"{exp_id}.yaml"
    path.write_text(f"id: {exp_id}\nbinary: {binary}\n" + textwrap.dedent(body))
    return path


def hang_experiment(exp_dir, pids):
    """One point whose client hangs after connecting, ignores SIGTERM and leaves a child."""
    return write_experiment(exp_dir, "hang", f"""
        title: the client hangs and leaves a child
        mode: lat
        roles: {{server: {{}}, client: {{}}}}
        params: {{size: 8, fake_behavior: hang, fake_pid_dir: {pids}}}
        timeout_s: 1
        plot: {{x: size, y: mops}}
        """)


def run_hung_point(exp_dir, tmp_path, cluster, run=run_all):
    """hang_experiment run (by `run`: run_all or a launcher's wrapper of it) on `cluster`; its one
    stored point, which must have failed, and the directory of its processes' pids."""
    pids = tmp_path / "pids"
    pids.mkdir()
    out = tmp_path / "res"
    run(hang_experiment(exp_dir, pids), "--cluster", cluster, "--out", out, "--no-report", check=1)
    [rec] = [json.loads(p.read_text()) for p in (out / "softnic" / "hang" / "points").glob("*.json")]
    return rec, pids


def pair_experiment(exp_dir, pids, title, timeout_s):
    """Two points (size 8 and 64), a server and a client each, every process's pid in `pids`."""
    return write_experiment(exp_dir, "pair", f"""
        title: {title}
        mode: lat
        roles: {{server: {{}}, client: {{}}}}
        params: {{iters: 100, fake_pid_dir: {pids}}}
        sweep: {{grid: {{size: [8, 64]}}}}
        timeout_s: {timeout_s}
        plot: {{x: size, y: mops}}
        """)


def pid_alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    except FileNotFoundError:
        return False


def alive_pids(pid_dir):
    return [p for p in (int(f.read_text()) for f in pid_dir.glob("*.pid")) if pid_alive(p)]


def assert_no_orphans(pid_dir):
    """Every process a fake role or its helper child ever was is gone."""
    pids = [int(p.read_text()) for p in pid_dir.glob("*.pid")]
    assert pids, f"no pid files in {pid_dir}: the fake roles never ran"
    alive = [p for p in pids if pid_alive(p)]
    for p in alive:  # do not leak them into later tests even when failing
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert not alive, f"orphan processes left behind: {alive}"


def softnic_fabrics_left_by(out):
    """The softnic fabrics still present of the runs that stored points under `out` (named
    rdl-RUN_ID-...): other runs on the machine, such as a second test session, are not counted."""
    run_ids = {json.loads(p.read_text())["provenance"]["run_id"] for p in pathlib.Path(out).glob("**/points/*.json")}
    prefixes = tuple(f"softnic-{os.getuid()}-rdl-{run_id}-" for run_id in run_ids)
    assert run_ids, f"no stored point under {out} names its run"
    return [n for n in os.listdir("/dev/shm") if n.startswith(prefixes)]


@pytest.fixture
def exp_dir(tmp_path):
    d = tmp_path / "experiments"
    d.mkdir()
    return d


def described_bin_dir(directory):
    """A --bin-dir whose rdmalab-bench, rdmalab-kv and rdmalab-model answer --describe with the
    fixtures and do nothing else, and whose softnic exists: enough for a dry run."""
    directory.mkdir(parents=True, exist_ok=True)
    for name in ("rdmalab-bench", "rdmalab-kv", "rdmalab-model"):
        (directory / name).write_text(f'#!/bin/sh\n[ "$1" = --describe ] && exec cat {kDescribeFixtures / name}.json\n'
                                      'echo "fixture shim: only --describe" >&2\nexit 1\n')
    (directory / "softnic").write_text("#!/bin/sh\nexit 1\n")
    for f in directory.iterdir():
        f.chmod(0o755)
    return directory
