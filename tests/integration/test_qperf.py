#!/usr/bin/python3
"""qperf's RDMA tests, unmodified, on softnic.

Every test at once, each with a qperf server of its own on softnic0 and its client on
softnic1: a timed test of TEST_TIME_S, then qperf's results exchange over
its TCP socket: the exchange only works if the test's SIGALRM ends the server's wait in
ibv_get_cq_event (a signal interrupts that wait with EINTR, as on a NIC). Every client must
exit 0 within PAIR_TIMEOUT_S and print its result.

qperf addresses UC and UD peers by LID only (it has no GID option), which no RoCE NIC
accepts, so on RoCE only the RC tests run, connected through rdma_cm (`-cm1`, softnic's
librdmacm). Debian's qperf 0.4.11 sends its rdma_cm port to the client before it listens
(fixed upstream after that release, linux-rdma/qperf 118a571), so a client that is quicker
than a descheduled server is rejected at connection setup, before any measurement; such a
test is run again, at most CM_RACE_RETRIES times.

Configuration (set by tests/integration/CMakeLists.txt; defaults for a ./build tree):
  SOFTNIC_CLI, RDMALAB_PEERS_DIR (pairrun.py), QPERF (the qperf program)
  SOFTNIC_TEST_LINKS   comma list of link layers to test (default ib,roce)
  QPERF_RUNS           how many times each test runs (default 1)
"""

from __future__ import annotations

import concurrent.futures
import itertools
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

from softnic_env import CLI, LINKS
import pairrun

QPERF = os.environ.get("QPERF") or shutil.which("qperf")
RUNS = int(os.environ.get("QPERF_RUNS", "1"))

TEST_TIME_S = "1"
PAIR_TIMEOUT_S = 30.0
SERVER_START_TIMEOUT_S = 10.0
RC_TESTS = ["rc_lat", "rc_bw", "rc_rdma_write_lat", "rc_rdma_read_lat", "rc_compare_swap_mr",
            "rc_fetch_add_mr", "ver_rc_compare_swap", "ver_rc_fetch_add"]
LID_ONLY_TESTS = ["uc_lat", "ud_lat"]
CM_RACE_RETRIES = 2
_CM_RACE = "unexpected event from RDMA CM: Event rejected"
_RESULT = re.compile(r"^\s+(latency|bw|msg_rate)\s+=\s+[\d.]+ \S+$", re.M)
_fabric_ids = itertools.count()

pytestmark = pytest.mark.skipif(QPERF is None, reason="qperf is not installed")


def _tests(link: str) -> list[str]:
    return RC_TESTS + LID_ONLY_TESTS if link == "ib" else RC_TESTS


def _run_test_retrying_cm_race(run: list[str], devices: list[str], test: str) -> str | None:
    for _ in range(1 + CM_RACE_RETRIES):
        failure = _run_test(run, devices, test)
        if failure is None or _CM_RACE not in failure:
            break
    return failure


def _run_test(run: list[str], devices: list[str], test: str) -> str | None:
    """One qperf server and its client for `test`; None on success, else what went wrong.
    (A qperf server serves one client at a time: each test gets a server of its own.)"""
    port = pairrun.free_port()
    with tempfile.TemporaryFile("w+") as server_out:
        server = subprocess.Popen(run + [QPERF, "-lp", str(port)], stdout=server_out, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            if not pairrun.wait_listening(port, server, time.monotonic() + SERVER_START_TIMEOUT_S):
                return f"{test}: the qperf server did not listen on port {port}"
            client = pairrun.run_one(run + [QPERF, "-lp", str(port), "-t", TEST_TIME_S, *devices, "127.0.0.1", test],
                                     os.environ, PAIR_TIMEOUT_S)
        finally:
            os.killpg(server.pid, signal.SIGKILL)  # the server and the child it forked
            server.wait()
        if client.returncode == 0 and _RESULT.search(client.output):
            return None
        server_out.seek(0)
        return f"{test}: exit {client.returncode}\n{client.output}--- server:\n{server_out.read()}"


@pytest.mark.parametrize("link", LINKS)
def test_qperf_rdma_tests(link):
    fabric = f"qperf-{os.getpid()}-{next(_fabric_ids)}"
    run = [str(CLI), "run", "--fabric", fabric, "--link", link, "--devices", "2", "--"]
    # IB: devices named per side; RoCE: rdma_cm picks them from the addresses.
    devices = ["-li", "softnic1:1", "-ri", "softnic0:1"] if link == "ib" else ["-cm1"]
    tests = _tests(link)
    failures = []
    try:
        with concurrent.futures.ThreadPoolExecutor(len(tests)) as pool:
            for attempt in range(RUNS):
                for failure in pool.map(lambda test: _run_test_retrying_cm_race(run, devices, test), tests):
                    if failure:
                        failures.append(f"run {attempt + 1} of {RUNS}, {failure}")
        assert not failures, "\n".join(failures)
    finally:
        pairrun.run_one([str(CLI), "fabric", "rm", "--fabric", fabric], os.environ, 30)
