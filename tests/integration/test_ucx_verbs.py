#!/usr/bin/python3
"""UCX's verbs transports on softnic: ucx_perftest over rc_verbs and ud_verbs.

UCX takes a verbs device only if /dev/infiniband/<its uverbs node> is a character device
it may read and write, so both sides run under `softnic run --device-nodes`, which shows
such nodes in a private mount namespace: as root, and as a normal user (run_as.py; in a
user namespace of its own). Server on
softnic0, client on softnic1, ucx_perftest's own TCP handshake on 127.0.0.1; both must exit
0 within PAIR_TIMEOUT_S and the client print its Final line. ud_verbs has no put (UCX
refuses `put_bw` over UD on any device), so it runs am_lat and am_bw.

Configuration (set by tests/integration/CMakeLists.txt; defaults for a ./build tree):
  SOFTNIC_CLI, RDMALAB_PEERS_DIR (pairrun.py), UCX_PERFTEST (the ucx_perftest program)
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
from pathlib import Path

import pytest

from softnic_env import CLI
import pairrun
import run_as

UCX_PERFTEST = os.environ.get("UCX_PERFTEST") or shutil.which("ucx_perftest")

PAIR_TIMEOUT_S = 90.0
ITERS = "2000"
CASES = [("rc_verbs", "am_lat"), ("rc_verbs", "put_bw"), ("rc_verbs", "am_bw"),
         ("ud_verbs", "am_lat"), ("ud_verbs", "am_bw")]
_FINAL = re.compile(r"^Final:\s+\d+(\s+[\d.]+){7}\s*$", re.M)
_fabric_ids = itertools.count()

pytestmark = pytest.mark.skipif(UCX_PERFTEST is None, reason="ucx_perftest (ucx-utils) is not installed")


def _skip_unless_available(user: str) -> None:
    reason = run_as.unavailable(user, [CLI, CLI.parent.parent / "lib/softnic/libibverbs.so.1"])
    if reason:
        pytest.skip(reason)


@pytest.mark.parametrize("user", run_as.USERS)
@pytest.mark.parametrize("transport,test", CASES, ids=[f"{t}-{x}" for t, x in CASES])
def test_ucx_perftest(transport, test, user):
    _skip_unless_available(user)
    fabric = f"ucx-{os.getpid()}-{next(_fabric_ids)}"
    port = pairrun.free_port()
    run = run_as.argv(user, [str(CLI), "run", "--fabric", fabric, "--devices", "2", "--device-nodes", "--"])
    common = [UCX_PERFTEST, "-t", test, "-x", transport, "-n", ITERS, "-p", str(port)]
    try:
        result = pairrun.run_pair(run + common + ["-d", "softnic0:1"], run + common + ["-d", "softnic1:1", "127.0.0.1"],
                                  port, os.environ, PAIR_TIMEOUT_S)
        assert result.ok, result.describe()
        assert _FINAL.search(result.client.output), result.describe()
    finally:
        pairrun.run_one(run_as.argv(user, [str(CLI), "fabric", "rm", "--fabric", fabric]), os.environ, 30)


@pytest.mark.parametrize("user", run_as.USERS)
def test_device_nodes_are_private(user):
    """The nodes exist for the program and nowhere else."""
    _skip_unless_available(user)
    fabric = f"ucx-{os.getpid()}-{next(_fabric_ids)}"
    try:
        r = pairrun.run_one(run_as.argv(user, [str(CLI), "run", "--fabric", fabric, "--devices", "3", "--device-nodes",
                                               "--", "stat", "-c", "%F %a", "/dev/infiniband/uverbs0",
                                               "/dev/infiniband/uverbs2", "/dev/shm"]), os.environ, 30)
        assert r.returncode == 0, r.output
        assert r.output.split("\n")[:2] == ["character special file 666"] * 2, r.output
        assert not Path("/dev/infiniband/uverbs2").exists()
    finally:
        pairrun.run_one(run_as.argv(user, [str(CLI), "fabric", "rm", "--fabric", fabric]), os.environ, 30)
