#!/usr/bin/python3
"""MPI over UCX's rc_verbs on softnic: MPICH and Open MPI (Debian's, both over UCX) run a
2-rank ping-pong of our own (benchmarks/peers/mpi_pingpong.c) from 256 B to 1 MiB under
`softnic run --device-nodes`, every byte of the checked round trips verified on both ranks
(before and after each size's timed ones, which reuse the same buffers, so registration
caches keep and reuse their entries), as root and as a normal user (run_as.py). The run
must exit 0 within RUN_TIMEOUT_S and rank 0 report every checked message.

Configuration (set by tests/integration/CMakeLists.txt; defaults for a ./build tree):
  SOFTNIC_CLI, RDMALAB_PEERS_DIR (mpi_runs.py)
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from softnic_env import CLI
import mpi_runs
import run_as


RUN_TIMEOUT_S = 180.0
MIN_BYTES, MAX_BYTES, CHECK = 256, 1 << 20, 3
PINGPONG = ["--min", str(MIN_BYTES), "--max", str(MAX_BYTES), "--iters", "50", "--warmup", "5", "--check", str(CHECK)]
_fabric_ids = itertools.count()


@pytest.fixture(scope="module")
def binaries():
    """Both builds of the ping-pong, in a directory every user may read."""
    directory = Path(tempfile.mkdtemp(prefix="rdmalab-mpi-"))
    directory.chmod(0o755)
    built = {}
    for mpi in mpi_runs.MPIS:
        if mpi_runs.missing(mpi) is None:
            built[mpi] = mpi_runs.build(mpi, directory)
    yield built
    shutil.rmtree(directory, ignore_errors=True)


@pytest.mark.parametrize("user", run_as.USERS)
@pytest.mark.parametrize("mpi", list(mpi_runs.MPIS))
def test_pingpong_over_rc_verbs(mpi, user, binaries):
    program = mpi_runs.missing(mpi)
    if program is not None:
        pytest.skip(f"{program} is not installed (scripts/install-deps.sh installs it)")
    reason = run_as.unavailable(user, [CLI, CLI.parent.parent / "lib/softnic/libibverbs.so.1", binaries[mpi]])
    if reason:
        pytest.skip(reason)
    fabric = f"mpi-{os.getpid()}-{next(_fabric_ids)}"
    job = mpi_runs.job(mpi, "rc_verbs", binaries[mpi], PINGPONG, CLI, fabric, run_as.argv(user, []))
    try:
        document = mpi_runs.run(job, RUN_TIMEOUT_S)
    finally:
        subprocess.run(run_as.argv(user, [str(CLI), "fabric", "rm", "--fabric", fabric]), capture_output=True,
                       timeout=30)
    assert document.get("checked_messages") == mpi_runs.expected_messages(MIN_BYTES, MAX_BYTES, CHECK), document
    assert [p["bytes"] for p in document["results"]][-1] == MAX_BYTES, document
