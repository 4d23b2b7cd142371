"""kv/peers/herd_scaling.py end to end on softnic, small: every worker count measured, each
worker's rate and no-ops in the document; bad counts and CPU lists refused by name."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kvrun import KV  # noqa: E402

SCRIPT = Path(__file__).resolve().parents[2] / "kv" / "peers" / "herd_scaling.py"
BUILD = KV.resolve().parents[1]
TIMEOUT_S = 120


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["/usr/bin/python3", str(SCRIPT), "--build", str(BUILD), *args], capture_output=True,
                          text=True, timeout=TIMEOUT_S)


def test_every_worker_count_is_measured(tmp_path):
    out = tmp_path / "scaling.json"
    r = run("--workers", "1,2", "--client-cpus", "0", "--threads", "2", "--clients", "4", "--rounds", "1",
            "--duration", "0.3", "--keys", "4096", "--json", str(out))
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    assert doc["schema"] == "rdmalab-herd-scaling/1"
    assert doc["errors"] == {}, doc["errors"]
    for workers in (1, 2):
        [measured] = doc["runs"][str(workers)]
        assert measured["workers"] == workers
        assert measured["mops"] > 0
        assert len(measured["worker_mops"]) == workers and min(measured["worker_mops"]) > 0
        assert len(measured["worker_noops_per_request"]) == workers
        assert doc["medians_mops"][str(workers)] == measured["mops"]
    rows = [line.split() for line in r.stdout.splitlines() if line.strip()[:1].isdigit()]
    assert [row[0] for row in rows] == ["1", "2"], r.stdout


def test_bad_counts_and_cpus_are_named():
    for args, named in ((["--workers", "1,0"], "--workers '1,0'"), (["--workers", "two"], "--workers 'two'"),
                        (["--client-cpus", "x"], "--client-cpus 'x'")):
        r = run(*args)
        assert r.returncode == 2, r.stdout + r.stderr
        assert named in r.stderr, r.stderr
