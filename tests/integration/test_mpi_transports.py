#!/usr/bin/python3
"""Open MPI on softnic by its two transports: a ping-pong of our own
(benchmarks/peers/mpi_pingpong.c, 2 ranks, 8-byte messages, the checked ones verified on both
ranks) over pml ucx (UCX_TLS=rc_verbs,ud_verbs,self: no shared memory, so the
messages cross the fabric) and over mtl ofi (libfabric's verbs provider under ofi_rxm), IB and
RoCE, as root and as a normal user (run_as.py). Each run is `mpirun` under `softnic run
--device-nodes` (UCX opens a device only where its /dev/infiniband node exists), with
`--netdevs` for libfabric (its verbs provider finds devices through their interfaces), on a
two-device fabric of its own; softnic0's counters must show the round trips.

Configuration (set by tests/integration/CMakeLists.txt; defaults for a ./build tree):
  SOFTNIC_CLI   the softnic command
  MPICC, MPIRUN Open MPI's compiler wrapper and launcher
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest

from softnic_env import REPO, CLI, LINKS
import run_as

MPICC = os.environ.get("MPICC") or shutil.which("mpicc")
MPIRUN = os.environ.get("MPIRUN") or shutil.which("mpirun")

RUN_TIMEOUT_S = 120
ROUND_TRIPS = 2000
PINGPONG = ["--min", "8", "--max", "8", "--iters", str(ROUND_TRIPS), "--warmup", "100", "--check", "500"]
SOURCE = REPO / "benchmarks" / "peers" / "mpi_pingpong.c"
TRANSPORTS = {
    "ucx": (["--device-nodes"], ["--mca", "pml", "ucx", "-x", "UCX_TLS=rc_verbs,ud_verbs,self"]),
    "ofi": (["--netdevs", "--device-nodes"], ["--mca", "pml", "cm", "--mca", "mtl", "ofi", "-x",
                                              "FI_PROVIDER=verbs;ofi_rxm"]),
}
CASES = [(link, transport, user) for link in LINKS for transport in TRANSPORTS for user in run_as.USERS]

pytestmark = pytest.mark.skipif(MPICC is None or MPIRUN is None, reason="Open MPI (openmpi-bin) is not installed")


@pytest.fixture(scope="module")
def pingpong():
    with tempfile.TemporaryDirectory() as work:
        os.chmod(work, 0o755)  # the normal user runs it
        binary = Path(work) / "mpi_pingpong"
        subprocess.run([MPICC, "-O2", "-o", str(binary), str(SOURCE)], check=True,
                       capture_output=True, timeout=120)
        yield binary


@pytest.mark.parametrize("link,transport,user", CASES, ids=[f"{l}-{t}-{u}" for l, t, u in CASES])
def test_mpi_pingpong(pingpong, link, transport, user):
    reason = run_as.unavailable(user, [CLI, CLI.parent.parent / "lib/softnic/libibverbs.so.1", pingpong])
    if reason:
        pytest.skip(reason)
    as_user = lambda command: run_as.argv(user, command)  # noqa: E731
    fabric = f"mpi-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    views, mca = TRANSPORTS[transport]
    try:
        subprocess.run(as_user([str(CLI), "fabric", "create", "--fabric", fabric, "--devices", "2", "--link", link]),
                       check=True, capture_output=True, timeout=30)
        # Two ranks on one host: mpirun must not refuse root, nor pick a network that is not there.
        run = as_user([str(CLI), "run", "--fabric", fabric, *views, "--", MPIRUN, "--allow-run-as-root", "-np", "2",
                       *mca, str(pingpong), *PINGPONG])
        result = subprocess.run(run, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, stdin=subprocess.DEVNULL)
        out = result.stdout + result.stderr
        assert result.returncode == 0, f"{' '.join(run)}: exit {result.returncode}\n{out}"
        doc = json.loads(result.stdout[result.stdout.index("{"):])   # a wrong byte exits 1, above
        assert doc["checked_messages"] > 0 and len(doc["results"]) == 1, out
        lat_us = doc["results"][0]["lat_us"]
        show = subprocess.run(as_user([str(CLI), "counters", "--fabric", fabric, "--json"]), check=True,
                              capture_output=True, text=True, timeout=30)
        packets = sum(d["counters"]["tx_packets"] for d in json.loads(show.stdout)["devices"])
        assert packets >= 2 * ROUND_TRIPS, f"only {packets} packets crossed softnic: MPI took another path\n{out}"
        print(f"{link} {transport} {user}: 8 B one-way {lat_us} us")
    finally:
        subprocess.run(as_user([str(CLI), "fabric", "rm", "--fabric", fabric]), capture_output=True, timeout=30)
