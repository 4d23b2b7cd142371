#!/usr/bin/python3
"""Third-party verbs programs, unmodified, on softnic.

Debian's ibv_devinfo, rdma-core's ibv_*_pingpong and perftest run against softnic's
libibverbs.so.1: each pair is a server on softnic0 and a client on softnic1, two
processes on one fabric, doing their own TCP handshake on 127.0.0.1. Both must exit 0
(and print their result lines) within PAIR_TIMEOUT_S. Every case runs on an IB link
layer (LIDs) and on a RoCE one (GIDs; -g 0 / -x 0), each on a fabric of its own that is
removed afterwards.

Configuration (set by tests/integration/CMakeLists.txt; defaults for a ./build tree):
  SOFTNIC_LIBRARY_DIR  directory holding softnic's libibverbs.so.1
  SOFTNIC_CLI          the softnic command (fabric rm, run)
  RDMALAB_PEERS_DIR    benchmarks/peers (pairrun.py: pair runner with readiness + timeouts)
  IBVERBS_UTILS_DIR    where ibv_devinfo and ibv_*_pingpong live
  PERFTEST_DIR         where ib_write_bw etc. live
  SOFTNIC_TEST_LINKS   comma list of link layers to test (default ib,roce)
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import re
import warnings
from pathlib import Path

import pytest

from softnic_env import LIB_DIR, CLI, PERFTEST_DIR, LINKS, fabric_env
import pairrun

UTILS_DIR = Path(os.environ.get("IBVERBS_UTILS_DIR", "/usr/bin"))

PAIR_TIMEOUT_S = 60.0
SINGLE_TIMEOUT_S = 30.0
SERVER_DEV = "softnic0"
CLIENT_DEV = "softnic1"
ITERS = "1000"

_fabric_ids = itertools.count()


@dataclasses.dataclass(frozen=True)
class Fabric:
    name: str
    link: str

    def env(self) -> dict[str, str]:
        return fabric_env(self.name, self.link)


@pytest.fixture(scope="session", autouse=True)
def softnic_built():
    lib = LIB_DIR / "libibverbs.so.1"
    assert lib.exists(), f"{lib} is missing: build the softnic_ibverbs target first"
    assert CLI.exists(), f"{CLI} is missing: build the softnic target first"


@pytest.fixture(params=LINKS)
def fabric(request):
    f = Fabric(f"it-{os.getpid()}-{next(_fabric_ids)}-{request.param}", request.param)
    yield f
    r = pairrun.run_one([str(CLI), "fabric", "rm", "--fabric", f.name], os.environ, SINGLE_TIMEOUT_S)
    if r.returncode != 0:
        warnings.warn(f"softnic fabric rm --fabric {f.name} exited {r.returncode}: {r.output.strip()}")


# ---------------------------------------------------------------------------------------
# ibv_devinfo / ibv_devices (one process)

def _single(argv, env):
    r = pairrun.run_one(argv, env, SINGLE_TIMEOUT_S)
    assert r.returncode == 0, f"{' '.join(argv)} exited {r.returncode}:\n{r.output}"
    return r.output


def test_devinfo(fabric):
    env = fabric.env()
    want_link = {"ib": "InfiniBand", "roce": "Ethernet"}[fabric.link]
    out = _single([str(UTILS_DIR / "ibv_devinfo")], env)
    for dev in (SERVER_DEV, CLIENT_DEV):
        assert re.search(rf"hca_id:\s+{dev}\b", out), out
    assert "PORT_ACTIVE" in out, out
    assert re.search(rf"link_layer:\s+{want_link}", out), out

    out = _single([str(UTILS_DIR / "ibv_devinfo"), "-v"], env)
    assert re.search(r"max_qp_wr:\s+\d+", out), out
    assert re.search(r"active_mtu:\s+4096", out), out
    # ibv_devinfo prints a GID only if ibv_query_gid_type (IBVERBS_PRIVATE_34) returns a
    # type it knows: 0 (IB/RoCE v1) or 1 (RoCE v2), the sysfs enum, not enum ibv_gid_type.
    assert re.search(r"GID\[\s*0\]:", out), f"ibv_devinfo -v printed no GID[0] line:\n{out}"

    out = _single([str(UTILS_DIR / "ibv_devinfo"), "-d", CLIENT_DEV, "-v"], env)
    assert re.search(rf"hca_id:\s+{CLIENT_DEV}\b", out) and SERVER_DEV not in out, out

    out = _single([str(UTILS_DIR / "ibv_devices")], env)
    assert SERVER_DEV in out and CLIENT_DEV in out, out


def test_devinfo_through_cli(fabric):
    """The wrapper command: softnic run --fabric F --link L -- ibv_devinfo."""
    out = _single([str(CLI), "run", "--fabric", fabric.name, "--link", fabric.link, "--",
                   str(UTILS_DIR / "ibv_devinfo")], os.environ)
    assert re.search(rf"hca_id:\s+{SERVER_DEV}\b", out), out


# ---------------------------------------------------------------------------------------
# Server/client pairs

@dataclasses.dataclass(frozen=True)
class Case:
    id: str
    tool: str
    args: tuple[str, ...]
    kind: str  # "pingpong" or "perftest"
    result_rows: int = 1  # perftest: how many result rows the client prints (at least)
    rates: bool = True  # pingpong: prints its rates (ibv_xsrq_pingpong prints "success" only)


def _pp(tool, *args):
    return Case(" ".join((tool,) + args), tool, args + ("-n", ITERS, "-c"), "pingpong")


def _xsrq():
    # Its -c is the number of clients, not "check the data" as the other pingpongs' -c.
    return Case("ibv_xsrq_pingpong", "ibv_xsrq_pingpong", ("-n", ITERS), "pingpong", rates=False)


def _pt(tool, *args, rows=1):
    a = args if "-n" in args else args + ("-n", ITERS)
    return Case(" ".join((tool,) + args), tool, a + ("-F",), "perftest", rows)


CASES = [
    _pp("ibv_rc_pingpong"),
    _pp("ibv_rc_pingpong", "-N"),
    _pp("ibv_rc_pingpong", "-e"),
    _pp("ibv_uc_pingpong"),
    _pp("ibv_ud_pingpong"),
    _pp("ibv_srq_pingpong"),
    _xsrq(),
    _pt("ib_write_bw"),
    _pt("ib_write_lat"),
    _pt("ib_read_bw"),
    _pt("ib_read_lat"),
    _pt("ib_send_bw"),
    _pt("ib_send_lat"),
    _pt("ib_atomic_bw", "-A", "FETCH_AND_ADD"),
    _pt("ib_atomic_bw", "-A", "CMP_AND_SWAP"),
    _pt("ib_atomic_lat", "-A", "FETCH_AND_ADD"),
    _pt("ib_atomic_lat", "-A", "CMP_AND_SWAP"),
    _pt("ib_write_bw", "-c", "UC"),
    _pt("ib_send_bw", "-c", "UC"),
    _pt("ib_send_bw", "-c", "UD"),
    _pt("ib_send_lat", "-c", "UD"),
    _pt("ib_send_bw", "-c", "XRC"),
    _pt("ib_send_lat", "-c", "XRC"),  # both sides send: XRC send and receive QPs on each
    # Sleeps on completion channels: one event per completion, or it loses step (issue 14, item 9).
    _pt("ib_send_lat", "-e", "-n", "20000"),
    _pt("ib_write_bw", "-q", "4"),
    _pt("ib_write_bw", "-a", "-n", "100", rows=23),  # sizes 2 .. 2^23
]

# "8192000 bytes in 0.01 seconds = 6553.60 Mbit/sec" / "1000 iters in 0.01 seconds = 10.00 usec/iter"
_PINGPONG_BW = re.compile(r"^\d+ bytes in [\d.]+ seconds = [\d.]+ Mbit/sec$", re.M)
_PINGPONG_LAT = re.compile(r"^\d+ iters in [\d.]+ seconds = [\d.]+ usec/iter$", re.M)
# A perftest result row: "#bytes #iterations" then at least two more numbers.
_PERFTEST_ROW = re.compile(r"^[ \t]*\d+[ \t]+\d+(?:[ \t]+[\d.]+){2,}[ \t]*$", re.M)


def _argvs(case: Case, link: str, port: int):
    d = PERFTEST_DIR if case.kind == "perftest" else UTILS_DIR
    gid = {"pingpong": ["-g", "0"], "perftest": ["-x", "0"]}[case.kind] if link == "roce" else []
    common = [str(d / case.tool), *case.args, "-p", str(port), *gid]
    return common + ["-d", SERVER_DEV], common + ["-d", CLIENT_DEV, "127.0.0.1"]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_pair(fabric, case):
    _run_pair_and_check(fabric, case, fabric.env())


SINGLE_THREADED_CASES = [_pt("ib_write_lat"), _pt("ib_write_bw", "-q", "4"), _pt("ib_send_lat")]


@pytest.mark.parametrize("case", SINGLE_THREADED_CASES, ids=[c.id for c in SINGLE_THREADED_CASES])
def test_pair_single_threaded(fabric, case):
    """SOFTNIC_SINGLE_THREADED=1: fast posts without the QP lock give the same results."""
    _run_pair_and_check(fabric, case, dict(fabric.env(), SOFTNIC_SINGLE_THREADED="1"))


def test_single_threaded_value_is_checked(fabric):
    argv = [str(UTILS_DIR / "ibv_devinfo")]
    r = pairrun.run_one(argv, dict(fabric.env(), SOFTNIC_SINGLE_THREADED="yes"), SINGLE_TIMEOUT_S)
    assert r.returncode != 0, r.output
    assert "SOFTNIC_SINGLE_THREADED='yes' is not valid: use 1" in r.output, r.output


def _run_pair_and_check(fabric, case, env):
    port = pairrun.free_port()
    server, client = _argvs(case, fabric.link, port)
    r = pairrun.run_pair(server, client, port, env, PAIR_TIMEOUT_S)
    assert r.ok, f"[{fabric.link}] {case.id} failed\n{r.describe()}"
    if case.kind == "pingpong":
        for role in (r.server, r.client):
            printed = (_PINGPONG_BW.search(role.output) and _PINGPONG_LAT.search(role.output)) if case.rates \
                else re.search(r"^success$", role.output, re.M)
            assert printed, f"[{fabric.link}] {case.id}: no result lines\n{r.describe()}"
    else:
        rows = _PERFTEST_ROW.findall(r.client.output)
        assert len(rows) >= case.result_rows, \
            f"[{fabric.link}] {case.id}: {len(rows)} result rows, want {case.result_rows}\n{r.describe()}"
