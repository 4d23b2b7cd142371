#!/usr/bin/python3
"""libfabric's verbs provider, unmodified, on softnic: fi_pingpong over MSG and RDM endpoints.

The verbs provider takes a device only if an IP interface holds its address, so the pair
runs under `softnic run --netdevs` (root only: the tests skip without it), which shows each
device's interface in a network namespace of the program's own. Server and client must
share that namespace to meet over loopback TCP for fi_pingpong's own control exchange, so
one `softnic run` starts this file again as the pair's launcher (`--pair`), which runs the
server on softnic0's address and the client towards it (pairrun: the client starts once
the server's control port listens); both must exit 0 within PAIR_TIMEOUT_S and print their
result rows, with fi_pingpong's data check (`-c`) on.

RDM endpoints (verbs;ofi_rxm) run with rxm's shared receive context (FI_OFI_RXM_USE_SRX=1).
Without it a side often crashes (SIGSEGV inside libfabric 1.17) while closing, after the
ping-pong, in about one run of five on IB and most on RoCE. The cause is a race in ofi_rxm:
its connection-manager thread handles the peer's disconnect while a completion of that
connection is still unread in the CQ; rxm_close_conn closes the verbs
endpoint, then reads that completion and reposts the receive buffer to the endpoint it
just closed (rxm_post_recv's fi_recv through the message operations the verbs close set
to NULL: the faulting instruction; libfabric issue #11828 reports the same flush).
On a NIC the disconnect comes long after the last data has been polled; on softnic it comes
at once, and on a loaded machine the polling thread has often not run by then. Dropping a
destroyed QP's completions, as libmlx5 does, only turns the crash into a lost last message
(the peer's final "fin" is dropped with the QP, and fi_pingpong waits for it forever).
With the shared receive context the receive buffers belong to it, not to a connection's
endpoint, so that late completion is delivered and its buffer reposted to the open SRX.

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
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CLI = Path(os.environ.get("SOFTNIC_CLI", REPO / "build/bin/softnic"))
FI_PINGPONG = os.environ.get("FI_PINGPONG") or shutil.which("fi_pingpong")
LINKS = [s for s in os.environ.get("SOFTNIC_TEST_LINKS", "ib,roce").split(",") if s]
sys.path.insert(0, os.environ.get("RDMALAB_PEERS_DIR", str(REPO / "benchmarks/peers")))
import pairrun  # noqa: E402

PAIR_TIMEOUT_S = 60.0
ITERATIONS = "100"
ENDPOINTS = ["msg", "rdm"]
# rxm's receive buffers in a shared receive context, not per connection (see above).
ENDPOINT_ENV = {"msg": {}, "rdm": {"FI_OFI_RXM_USE_SRX": "1"}}
CASES = [(link, endpoint) for link in LINKS for endpoint in ENDPOINTS]
_ROW = re.compile(r"^64\s+100\s+=100\s+\S+\s+[\d.]+s", re.M)
_fabric_ids = itertools.count()


def _launch_pair(endpoint: str, server_address: str) -> int:
    """Inside the namespace: the pair, reported as JSON on stdout; exits 0 if both passed."""
    port = pairrun.free_port()
    common = [FI_PINGPONG, "-p", "verbs", "-e", endpoint, "-I", ITERATIONS, "-S", "64", "-c"]
    result = pairrun.run_pair(common + ["-B", str(port)], common + ["-P", str(port), server_address],
                              port, dict(os.environ, **ENDPOINT_ENV[endpoint]), PAIR_TIMEOUT_S)
    print(json.dumps({"ok": result.ok, "report": result.describe(), "server": result.server.output,
                      "client": result.client.output}))
    return 0 if result.ok else 1


if __name__ == "__main__" and sys.argv[1:2] == ["--pair"]:
    sys.exit(_launch_pair(sys.argv[2], sys.argv[3]))

import pytest  # noqa: E402

pytestmark = [
    pytest.mark.skipif(FI_PINGPONG is None, reason="fi_pingpong (libfabric-bin) is not installed"),
    pytest.mark.skipif(os.geteuid() != 0, reason="softnic run --netdevs needs root (a network namespace)"),
]


@pytest.mark.parametrize("link,endpoint", CASES, ids=[f"{l}-{e}" for l, e in CASES])
def test_fi_pingpong(link, endpoint):
    fabric = f"ofi-{os.getpid()}-{next(_fabric_ids)}"
    try:
        subprocess.run([str(CLI), "fabric", "create", "--fabric", fabric, "--devices", "2", "--link", link],
                       check=True, capture_output=True, timeout=30)
        show = subprocess.run([str(CLI), "fabric", "show", "--fabric", fabric, "--json"], check=True,
                              capture_output=True, text=True, timeout=30)
        server_address = json.loads(show.stdout)["devices"][0]["ipv4"]
        run = pairrun.run_one([str(CLI), "run", "--fabric", fabric, "--netdevs", "--", sys.executable,
                               __file__, "--pair", endpoint, server_address], os.environ, PAIR_TIMEOUT_S + 30)
        lines = [line for line in run.output.splitlines() if line.startswith("{")]
        assert lines, f"the launcher reported nothing (exit {run.returncode}):\n{run.output}"
        result = json.loads(lines[-1])
        assert run.returncode == 0 and result["ok"], result["report"]
        for side in ("server", "client"):
            assert _ROW.search(result[side]), result["report"]
    finally:
        pairrun.run_one([str(CLI), "fabric", "rm", "--fabric", fabric], os.environ, 30)
