#!/usr/bin/python3
"""libfabric's verbs provider, unmodified, on softnic: fi_pingpong over MSG and RDM endpoints.

The verbs provider takes a device only if an IP interface holds its address, so server and
client each run under `softnic run --netdevs`, which shows each device's interface in a
network namespace: as root, and as a normal user (run_as.py; in a user namespace of its
own). Two runs of one fabric share that namespace, so the client meets the server over TCP
for fi_pingpong's own control exchange (pairrun: the client starts once the server's
control port listens), the server on softnic0's address; both must exit 0 within
PAIR_TIMEOUT_S and print their result rows, with fi_pingpong's data check (`-c`) on.

RDM endpoints (verbs;ofi_rxm) run with rxm's shared receive context (FI_OFI_RXM_USE_SRX=1).
ofi_rxm 1.17 has a race at close: its progress reads the CQ (empty), then the CM events; if
the peer's last message and its disconnect both arrive between the two, rxm_close_conn
closes the connection's verbs endpoint and then drains the shared CQ (libfabric issue
#11828). With receive buffers per connection, that last message's completion either
reposted its buffer through the freed endpoint (the SIGSEGV seen before softnic purged a
destroyed QP's completions, as libmlx5 does) or, purged with the QP, is lost and fi_pingpong
waits for it forever. With the shared receive context the buffers belong to it, a
completion taken from it outlives the QP, and its buffer goes back to the open SRX. On a NIC
the disconnect comes long after the last data; on softnic at once, and on a loaded machine
the polling thread has often not run by then.

Configuration (set by tests/integration/CMakeLists.txt; defaults for a ./build tree):
  SOFTNIC_CLI, RDMALAB_PEERS_DIR (pairrun.py), FI_PINGPONG (the fi_pingpong program)
  SOFTNIC_TEST_LINKS   comma list of link layers to test (default ib,roce)
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import subprocess

import pytest

from softnic_env import CLI, LINKS
import pairrun
import run_as

FI_PINGPONG = os.environ.get("FI_PINGPONG") or shutil.which("fi_pingpong")

PAIR_TIMEOUT_S = 60.0
ITERATIONS = "100"
ENDPOINTS = ["msg", "rdm"]
# rxm's receive buffers in a shared receive context, not per connection (see above).
ENDPOINT_ENV = {"msg": {}, "rdm": {"FI_OFI_RXM_USE_SRX": "1"}}
CASES = [(link, endpoint, user) for link in LINKS for endpoint in ENDPOINTS for user in run_as.USERS]
_ROW = re.compile(r"^64\s+100\s+=100\s+\S+\s+[\d.]+s", re.M)
_fabric_ids = itertools.count()

pytestmark = pytest.mark.skipif(FI_PINGPONG is None, reason="fi_pingpong (libfabric-bin) is not installed")


@pytest.mark.parametrize("link,endpoint,user", CASES, ids=[f"{l}-{e}-{u}" for l, e, u in CASES])
def test_fi_pingpong(link, endpoint, user):
    reason = run_as.unavailable(user, [CLI, CLI.parent.parent / "lib/softnic/libibverbs.so.1"])
    if reason:
        pytest.skip(reason)
    fabric = f"ofi-{os.getpid()}-{next(_fabric_ids)}"
    as_user = lambda command: run_as.argv(user, command)  # noqa: E731
    try:
        subprocess.run(as_user([str(CLI), "fabric", "create", "--fabric", fabric, "--devices", "2", "--link", link]),
                       check=True, capture_output=True, timeout=30)
        show = subprocess.run(as_user([str(CLI), "fabric", "show", "--fabric", fabric, "--json"]), check=True,
                              capture_output=True, text=True, timeout=30)
        server_address = json.loads(show.stdout)["devices"][0]["ipv4"]
        port = pairrun.free_port()
        run = as_user([str(CLI), "run", "--fabric", fabric, "--netdevs", "--", FI_PINGPONG, "-p", "verbs", "-e",
                       endpoint, "-I", ITERATIONS, "-S", "64", "-c"])
        result = pairrun.run_pair(run + ["-B", str(port)], run + ["-P", str(port), server_address], port,
                                  dict(os.environ, **ENDPOINT_ENV[endpoint]), PAIR_TIMEOUT_S)
        assert result.ok, result.describe()
        assert _ROW.search(result.server.output) and _ROW.search(result.client.output), result.describe()
    finally:
        pairrun.run_one(as_user([str(CLI), "fabric", "rm", "--fabric", fabric]), os.environ, 30)
