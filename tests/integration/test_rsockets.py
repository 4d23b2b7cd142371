#!/usr/bin/python3
"""Debian's rsocket programs, and socket programs under Debian's librspreload, unmodified on
softnic's librdmacm.so.1 (rsockets) and libibverbs.so.1.

Each case is a server and a client on a two-device fabric of its own, IB and RoCE, as root and
as a normal user (run_as.py). The rsocket programs' server binds the wildcard and the client
connects to softnic0's address (so from softnic1); the client starts once the server's
listener exists in the fabric directory (no sleeps). Data is checked: rstream and riostream
verify every transfer (-T v), rcopy's copy is compared with its source, udpong (datagram
rsockets) matches every echo by sequence number, and iperf3 and
sockperf must have moved their bytes through the fabric (softnic0's counters), not through a
kernel socket librspreload fell back to. The librspreload programs connect to 127.0.0.1
(softnic's device 0): a connection librspreload gives to the kernel then stays on loopback.

Configuration (set by tests/integration/CMakeLists.txt; defaults for a ./build tree):
  SOFTNIC_LIBRARY_DIR  directory holding softnic's libibverbs.so.1 and librdmacm.so.1
  SOFTNIC_CLI          the softnic command
  RSPRELOAD            Debian's librspreload.so
  SOFTNIC_TEST_LINKS   comma list of link layers to test (default ib,roce)
"""

from __future__ import annotations

import filecmp
import itertools
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from softnic_env import LIB_DIR, CLI, LINKS, fabric_env
import run_as

RSPRELOAD = Path(os.environ.get("RSPRELOAD", "/usr/lib/x86_64-linux-gnu/rsocket/librspreload.so"))

PAIR_TIMEOUT_S = 120.0
RCOPY_BYTES = 3 * 1024 * 1024 + 12345  # not a multiple of any buffer size
IPERF_SECONDS = "2"
_ports = itertools.count(21000 + os.getpid() % 20000)
_fabric_ids = itertools.count()


class Fabric:
    """A two-device fabric owned by `user`; programs run as that user."""

    def __init__(self, link: str, user: str):
        self.link, self.user = link, user
        self.uid = run_as.NORMAL_UID if user == "user" and os.geteuid() == 0 else os.getuid()
        self.name = f"rs-{os.getpid()}-{next(_fabric_ids)}-{link}"
        self.cli(["fabric", "create", "--fabric", self.name, "--devices", "2", "--link", link])
        devices = json.loads(self.cli(["fabric", "show", "--fabric", self.name, "--json"]))["devices"]
        self.server_address = devices[0]["ipv4"]

    def cli(self, args: list[str]) -> str:
        return subprocess.run(run_as.argv(self.user, [str(CLI), *args]), check=True, capture_output=True,
                              text=True, timeout=30).stdout

    def tx_bytes(self) -> int:
        """Bytes softnic0 has sent and received: a program's traffic crosses it either way."""
        counters = json.loads(self.cli(["counters", "--fabric", self.name, "--json"]))["devices"][0]["counters"]
        return counters["tx_bytes"] + counters["rx_bytes"]

    def listener(self, port: int) -> list[Path]:
        """softnic's listener names for `port` on softnic0's address or on any, stream (cm-) or
        datagram (cm-udp-) (cm/ids.cc, ListenerPath)."""
        directory = Path(f"/dev/shm/softnic-{self.uid}-{self.name}")
        a, b, c, d = (int(x) for x in self.server_address.split("."))
        return [directory / f"{space}-{port:04x}-{address}" for space in ("cm", "cm-udp")
                for address in (f"{a:02x}{b:02x}{c:02x}{d:02x}", "00000000")]

    def env(self, preload: bool = False) -> dict[str, str]:
        env = fabric_env(self.name, self.link)
        if preload:
            env["LD_PRELOAD"] = str(RSPRELOAD)
        return env


@pytest.fixture(params=[(link, user) for link in LINKS for user in run_as.USERS],
                ids=lambda p: f"{p[0]}-{p[1]}")
def fabric(request):
    link, user = request.param
    reason = run_as.unavailable(user, [CLI, LIB_DIR / "librdmacm.so.1"])
    if reason:
        pytest.skip(reason)
    f = Fabric(link, user)
    yield f
    subprocess.run(run_as.argv(user, [str(CLI), "fabric", "rm", "--fabric", f.name]), capture_output=True, timeout=30)


def _start(argv, env, out, cwd=None):
    return subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True, cwd=cwd)


def _kill(proc):
    if proc is not None and proc.poll() is None:
        os.killpg(proc.pid, 9)
        proc.wait()


def _read(f) -> str:
    f.seek(0)
    return f.read()


def run_pair(fabric: Fabric, server, client, port: int, env: dict[str, str], server_exits: bool = True,
             cwd: str | None = None):
    """The server, then (once it listens on softnic) the client. Returns (server exit code or
    None if it runs on by design and was stopped, server output, client exit code, client output)."""
    deadline = time.monotonic() + PAIR_TIMEOUT_S
    listener = fabric.listener(port)
    with tempfile.TemporaryFile("w+") as sout, tempfile.TemporaryFile("w+") as cout:
        s = _start(run_as.argv(fabric.user, server), env, sout, cwd)
        c = None
        try:
            while not any(p.exists() for p in listener):
                assert s.poll() is None, f"server exited {s.returncode} before listening:\n{_read(sout)}"
                assert time.monotonic() < deadline, f"server never listened on {listener}:\n{_read(sout)}"
                time.sleep(0.005)
            c = _start(run_as.argv(fabric.user, client), env, cout, cwd)
            c.wait(timeout=max(0.1, deadline - time.monotonic()))
            if server_exits:
                s.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
        finally:
            _kill(c)
            _kill(s)
        s_rc = s.returncode if server_exits else None
        return s_rc, _read(sout), (c.returncode if c else None), _read(cout)


def _check(result, server, client, server_exits: bool = True):
    s_rc, s_out, c_rc, c_out = result
    report = (f"--- server {' '.join(server)}: exit {s_rc}\n{s_out}\n"
              f"--- client {' '.join(client)}: exit {c_rc}\n{c_out}")
    assert c_rc == 0 and (s_rc == 0 or not server_exits), report
    return s_out, c_out


def _dynamic_symbols(library: Path, defined: bool) -> set[str]:
    """'name@VERSION' of the RDMACM-versioned symbols `library` defines (or imports)."""
    out = subprocess.run(["objdump", "-T", str(library)], check=True, capture_output=True, text=True).stdout
    symbols = set()
    for line in out.splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[-2].strip("()").startswith("RDMACM_") and ("*UND*" in line) != defined:
            symbols.add(f"{fields[-1]}@{fields[-2].strip('()')}")
    return symbols


@pytest.mark.skipif(not RSPRELOAD.exists(), reason="librspreload is not installed")
def test_librspreload_binds_every_import():
    """Every librdmacm symbol librspreload imports, with its version, softnic's library defines."""
    imported = _dynamic_symbols(RSPRELOAD, defined=False)
    assert len(imported) >= 20, imported  # rsocket ... rfcntl: the parse found them
    missing = imported - _dynamic_symbols(LIB_DIR / "librdmacm.so.1", defined=True)
    assert not missing, f"librspreload imports what softnic's librdmacm.so.1 lacks: {sorted(missing)}"


def test_rsocket_calls(fabric):
    """rsocket_calls.py: SO_RCVTIMEO ends a datagram receive with EAGAIN; a non-blocking
    rconnect to a port nobody listens on is EINPROGRESS, then rpoll's POLLOUT|POLLERR and
    SO_ERROR ECONNREFUSED; AF_UNIX is refused with EAFNOSUPPORT alone."""
    script = Path(__file__).with_name("rsocket_calls.py")
    run = subprocess.run(run_as.argv(fabric.user, ["/usr/bin/python3", str(script), str(LIB_DIR / "librdmacm.so.1"),
                                                   fabric.server_address]),
                         env=fabric.env(), capture_output=True, text=True, timeout=PAIR_TIMEOUT_S)
    assert run.returncode == 0 and "FAIL" not in run.stdout, run.stdout + run.stderr


@pytest.mark.parametrize("mode", [[], ["-T", "a"]], ids=["default", "async"])
def test_rstream(fabric, mode):
    """Every size of rstream's latency and bandwidth sets, each transfer verified."""
    port = next(_ports)
    common = ["-p", str(port), "-T", "v", *mode]
    server, client = ["rstream", *common], ["rstream", "-s", fabric.server_address, *common]
    s_out, c_out = _check(run_pair(fabric, server, client, port, fabric.env()), server, client)
    for out in (s_out, c_out):
        assert "64_lat" in out and "1m_bw" in out, out


PEER_DEATH_NOTICED_S = 10.0


@pytest.mark.parametrize("mode", [[], ["-T", "a"], ["-T", "b"]], ids=["nonblocking", "async", "blocking"])
def test_rstream_client_ends_when_its_server_dies(fabric, mode):
    """The server is killed (SIGKILL) once data flows; its client, polling, waiting in rpoll or
    blocked in a call, must fail within PEER_DEATH_NOTICED_S instead of waiting for ever."""
    port = next(_ports)
    common = ["-p", str(port), "-S", "1000000", "-C", "1000000", *mode]  # runs for minutes if left
    env = fabric.env()
    with tempfile.TemporaryFile("w+") as sout, tempfile.TemporaryFile("w+") as cout:
        server = _start(run_as.argv(fabric.user, ["rstream", *common]), env, sout)
        client = None
        try:
            deadline = time.monotonic() + PAIR_TIMEOUT_S
            while not any(p.exists() for p in fabric.listener(port)):
                assert server.poll() is None and time.monotonic() < deadline, _read(sout)
                time.sleep(0.005)
            client = _start(run_as.argv(fabric.user, ["rstream", "-s", fabric.server_address, *common]), env, cout)
            while fabric.tx_bytes() < 100_000_000:  # data flows: both sides are in the transfer
                assert client.poll() is None and time.monotonic() < deadline, _read(cout)
                time.sleep(0.01)
            _kill(server)
            client.wait(timeout=PEER_DEATH_NOTICED_S)
            assert client.returncode != 0, _read(cout)
        finally:
            _kill(client)
            _kill(server)


def test_riostream(fabric):
    """RDMA WRITEs into the peer's riomap'ed buffer, each transfer verified."""
    port = next(_ports)
    common = ["-p", str(port), "-T", "v"]
    server, client = ["riostream", *common], ["riostream", "-s", fabric.server_address, *common]
    s_out, c_out = _check(run_pair(fabric, server, client, port, fabric.env()), server, client)
    for out in (s_out, c_out):
        assert "4k_bw" in out and "1m_bw" in out, out


def test_rcopy(fabric):
    """rcopy's server serves copies forever: it is stopped once the client is done."""
    port = next(_ports)
    with tempfile.TemporaryDirectory() as work:
        os.chmod(work, 0o777)  # the normal user's server writes the copy here
        source, copy = Path(work) / "source.bin", Path(work) / "copy.bin"
        source.write_bytes(os.urandom(RCOPY_BYTES))
        os.chmod(source, 0o644)
        server = ["rcopy", "-p", str(port)]
        client = ["rcopy", str(source), f"{fabric.server_address}:{copy}", "-p", str(port)]
        _check(run_pair(fabric, server, client, port, fabric.env(), server_exits=False, cwd=work), server, client,
               server_exits=False)
        assert copy.exists() and filecmp.cmp(source, copy, shallow=False), f"{copy} differs from {source}"


UDPONG_MODES = {"nonblocking": [], "async": ["-T", "a"], "blocking": ["-T", "b"]}


@pytest.mark.parametrize("mode", UDPONG_MODES)
@pytest.mark.parametrize("test", ["echo", "bandwidth"])
def test_udpong(fabric, mode, test):
    """Datagram rsockets, one udpong set of 1000-byte datagrams per case: 2000 echoes (each
    reply matched by sequence number), or 20000 one way. Not udpong's default run (9 sizes of
    each): its client resends after 1 ms without a reply and then reads one stale reply per
    round trip for good, so on a host with more busy processes than cores each late reply
    slows every later echo, and the run takes minutes (kernel UDP would fare the same)."""
    options = [*UDPONG_MODES[mode], "-S", "1000"] + (["-T", "e", "-C", "2000"] if test == "echo" else ["-C", "20000"])
    rows = _udpong_rows(fabric, options)
    assert len(rows) == 1 and rows[0][0] == "custom", rows
    if test == "echo":
        assert rows[0][2] == "4k", rows  # 2000 each way
    else:
        assert int(rows[0][2].rstrip("k")) > 0, rows  # datagrams the server counted (UDP may drop)


def _udpong_rows(fabric: Fabric, options: list[str]) -> list[list[str]]:
    port = next(_ports)
    server = ["udpong", "-p", str(port), *options]
    client = ["udpong", "-s", fabric.server_address, "-p", str(port), *options]
    _, c_out = _check(run_pair(fabric, server, client, port, fabric.env(), server_exits=False), server, client,
                      server_exits=False)
    return [line.split() for line in c_out.splitlines() if line.startswith("custom")]


@pytest.mark.skipif(not RSPRELOAD.exists() or shutil.which("iperf3") is None, reason="librspreload or iperf3 missing")
def test_iperf3_under_rspreload(fabric):
    port = next(_ports)
    before = fabric.tx_bytes()
    server = ["iperf3", "-s", "-1", "-p", str(port)]
    client = ["iperf3", "-c", "127.0.0.1", "-p", str(port), "-t", IPERF_SECONDS, "-J"]
    _, c_out = _check(run_pair(fabric, server, client, port, fabric.env(preload=True)), server, client)
    end = json.loads(c_out)["end"]
    # The receiver stops counting at the test's end, so it may count a little less than was sent.
    sent, received = end["sum_sent"]["bytes"], end["sum_received"]["bytes"]
    assert 0 < received <= sent, end
    assert fabric.tx_bytes() - before >= received, "iperf3's data did not cross softnic (librspreload fell back)"


@pytest.mark.skipif(not RSPRELOAD.exists() or shutil.which("iperf3") is None, reason="librspreload or iperf3 missing")
def test_iperf3_udp_under_rspreload(fabric):
    """iperf3 -u at 1 Gb/s: datagram rsockets, the server's second socket on its port
    (SO_REUSEADDR), datagrams sized by the control connection's TCP_MAXSEG."""
    port = next(_ports)
    before = fabric.tx_bytes()
    server = ["iperf3", "-s", "-1", "-p", str(port)]
    client = ["iperf3", "-c", "127.0.0.1", "-p", str(port), "-t", IPERF_SECONDS, "-u", "-b", "1G", "-J"]
    _, c_out = _check(run_pair(fabric, server, client, port, fabric.env(preload=True)), server, client)
    total = json.loads(c_out)["end"]["sum"]
    # UDP: nothing is retransmitted, so some may be lost; most must arrive.
    assert total["packets"] > 0 and total["lost_packets"] < total["packets"] / 2, total
    assert fabric.tx_bytes() - before >= total["bytes"] / 2, "iperf3's datagrams did not cross softnic"


@pytest.mark.skipif(not RSPRELOAD.exists() or shutil.which("sockperf") is None,
                    reason="librspreload or sockperf missing")
@pytest.mark.parametrize("protocol", [["--tcp"], []], ids=["tcp", "udp"])
def test_sockperf_under_rspreload(fabric, protocol):
    """sockperf's ping-pong over TCP (stream rsockets) and UDP (its default: datagram
    rsockets); its server answers forever and is stopped after the client."""
    port = next(_ports)
    before = fabric.tx_bytes()
    server = ["sockperf", "sr", *protocol, "-i", "127.0.0.1", "-p", str(port)]
    # sockperf sizes its table of sequence numbers for --mps messages a second (default ~600k)
    # and stops with "_seqN > m_maxSequenceNo" past it: rsockets ping-pong faster than that.
    client = ["sockperf", "pp", *protocol, "-i", "127.0.0.1", "-p", str(port), "-t", "1", "--mps", "4000000"]
    _, c_out = _check(run_pair(fabric, server, client, port, fabric.env(preload=True), server_exits=False),
                      server, client, server_exits=False)
    assert "Summary: Latency is" in c_out, c_out
    assert fabric.tx_bytes() - before > 0, "sockperf's messages did not cross softnic (librspreload fell back)"
