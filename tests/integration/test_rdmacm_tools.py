#!/usr/bin/python3
"""Debian's rdma_cm programs, unmodified, on softnic's librdmacm.so.1 and libibverbs.so.1.

Each pair is a server bound to softnic0's address and a client that resolves it (and so
connects from softnic1), two processes on one fabric of their own, IB and RoCE. The client
starts once the server's listener exists in the fabric directory (no sleeps); both must
exit 0 within PAIR_TIMEOUT_S. Also: a connection to an address nobody listens on is
rejected at once, and a client whose server dies ends instead of hanging.

Configuration (set by tests/integration/CMakeLists.txt; defaults for a ./build tree):
  SOFTNIC_LIBRARY_DIR  directory holding softnic's libibverbs.so.1 and librdmacm.so.1
  SOFTNIC_CLI          the softnic command (fabric rm)
  RDMACM_UTILS_DIR     where rping, ucmatose, udaddy, rdma_server, rdma_client live
  PERFTEST_DIR         where ib_write_bw etc. live
  SOFTNIC_TEST_LINKS   comma list of link layers to test (default ib,roce)
"""

from __future__ import annotations

import errno
import itertools
import json
import os
import re
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from softnic_env import LIB_DIR, CLI, PERFTEST_DIR, LINKS, fabric_env

UTILS_DIR = Path(os.environ.get("RDMACM_UTILS_DIR", "/usr/bin"))

PAIR_TIMEOUT_S = 60.0
REJECT_WITHIN_S = 5.0
UDADDY_PORT = 7174  # udaddy has no port flag
_ports = itertools.count(20000 + os.getpid() % 20000)
_fabric_ids = itertools.count()


def listener_paths(fabric: str, address: str, port: int) -> list[Path]:
    """Where softnic's librdmacm puts a listener on `address` or on any address, of the TCP or
    the UDP port space (softnic/cm/ids.cc, ListenerPath)."""
    paths = []
    for a, b, c, d in ((int(x) for x in address.split(".")), (0, 0, 0, 0)):
        for space in ("cm", "cm-udp"):
            paths.append(Path(f"/dev/shm/softnic-{os.getuid()}-{fabric}/{space}-{port:04x}-{a:02x}{b:02x}{c:02x}{d:02x}"))
    return paths


def listening(paths: list[Path]) -> bool:
    return any(p.exists() for p in paths)


class Fabric:
    """A fabric of two devices; softnic0's address as `softnic fabric show --json` gives it."""

    def __init__(self, link: str):
        self.link = link
        self.name = f"cm-{os.getpid()}-{next(_fabric_ids)}-{link}"
        subprocess.run([str(CLI), "fabric", "create", "--fabric", self.name, "--devices", "2", "--link", link],
                       check=True, capture_output=True, timeout=30)
        show = subprocess.run([str(CLI), "fabric", "show", "--fabric", self.name, "--json"], check=True,
                              capture_output=True, text=True, timeout=30)
        devices = json.loads(show.stdout)["devices"]
        self.server_address = devices[0]["ipv4"]
        self.client_address = devices[1]["ipv4"]
        assert re.fullmatch(r"10\.55\.\d+\.1", self.server_address), self.server_address

    def env(self) -> dict[str, str]:
        return fabric_env(self.name, self.link)


@pytest.fixture(scope="session", autouse=True)
def softnic_built():
    for lib in ("libibverbs.so.1", "librdmacm.so.1"):
        assert (LIB_DIR / lib).exists(), f"{LIB_DIR / lib} is missing: build softnic_ibverbs and softnic_rdmacm"


@pytest.fixture(params=LINKS)
def fabric(request):
    f = Fabric(request.param)
    yield f
    subprocess.run([str(CLI), "fabric", "rm", "--fabric", f.name], capture_output=True, timeout=30)


def _start(argv, env, out):
    return subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True)


def _kill(proc):
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _read(f) -> str:
    f.seek(0)
    return f.read()


def run_pair(fabric: Fabric, server_argv, client_argv, port: int, timeout_s: float = PAIR_TIMEOUT_S):
    """Server, then (once its listener exists) the client; returns both exit codes and outputs."""
    env = fabric.env()
    deadline = time.monotonic() + timeout_s
    listener = listener_paths(fabric.name, fabric.server_address, port)
    with tempfile.TemporaryFile("w+") as sout, tempfile.TemporaryFile("w+") as cout:
        server = _start(server_argv, env, sout)
        client = None
        try:
            while not listening(listener):
                assert server.poll() is None, f"server exited {server.returncode} before listening:\n{_read(sout)}"
                assert time.monotonic() < deadline, f"server did not listen on {listener[0]} or {listener[1]}:\n{_read(sout)}"
                time.sleep(0.005)
            client = _start(client_argv, env, cout)
            for p in (client, server):
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
        finally:
            for p in (client, server):
                if p is not None:
                    _kill(p)
        result = (server.returncode, _read(sout), client.returncode if client else None, _read(cout))
    return result


def _check(result, server_argv, client_argv):
    s_rc, s_out, c_rc, c_out = result
    report = (f"--- server {' '.join(server_argv)}: exit {s_rc}\n{s_out}\n"
              f"--- client {' '.join(client_argv)}: exit {c_rc}\n{c_out}")
    assert s_rc == 0 and c_rc == 0, report
    return s_out, c_out


def test_rping(fabric):
    port = next(_ports)
    a = ["-a", fabric.server_address, "-p", str(port), "-C", "20"]
    server, client = [str(UTILS_DIR / "rping"), "-s", *a], [str(UTILS_DIR / "rping"), "-c", "-v", *a]
    _, out = _check(run_pair(fabric, server, client, port), server, client)
    assert len(re.findall(r"^ping data: rdma-ping-\d+:", out, re.M)) == 20, out


def test_ucmatose(fabric):
    port = next(_ports)
    server = [str(UTILS_DIR / "ucmatose"), "-p", str(port), "-c", "2"]
    client = [str(UTILS_DIR / "ucmatose"), "-s", fabric.server_address, "-p", str(port), "-c", "2"]
    s_out, c_out = _check(run_pair(fabric, server, client, port), server, client)
    for out in (s_out, c_out):
        assert "data transfers complete" in out and "return status 0" in out, out


def test_udaddy(fabric):
    server = [str(UTILS_DIR / "udaddy")]
    client = [str(UTILS_DIR / "udaddy"), "-s", fabric.server_address]
    s_out, c_out = _check(run_pair(fabric, server, client, UDADDY_PORT), server, client)
    for out in (s_out, c_out):
        assert "data transfers complete" in out and "return status 0" in out, out


def test_rdma_server_client(fabric):
    port = next(_ports)
    server = [str(UTILS_DIR / "rdma_server"), "-p", str(port)]
    client = [str(UTILS_DIR / "rdma_client"), "-s", fabric.server_address, "-p", str(port)]
    s_out, c_out = _check(run_pair(fabric, server, client, port), server, client)
    assert "rdma_server: end 0" in s_out and "rdma_client: end 0" in c_out, (s_out, c_out)


MCKEY_RECEIVERS = 3
MCKEY_MESSAGES = "10"


def test_mckey_sender_reaches_every_receiver(fabric):
    """mckey's receiver joins one group with MCKEY_RECEIVERS ids (a UD QP each, RECVs posted
    before the join) on softnic0; once all have joined, a sender on softnic1 joins and sends
    MCKEY_MESSAGES; each receiving QP must take every message (mckey waits for all of them).
    Both sides sleep 3 s after joining (for a subnet manager): the sender starts at the
    receiver's joins so that the two sleeps overlap."""
    group = f"239.{os.getpid() % 250}.{next(_ports) % 250}.1"
    mckey = str(UTILS_DIR / "mckey")
    # Line-buffered: the test waits for the receiver's "joined" lines.
    receiver = ["stdbuf", "-oL", mckey, "-m", group, "-b", fabric.server_address, "-c", str(MCKEY_RECEIVERS), "-C", MCKEY_MESSAGES]
    sender = [mckey, "-m", group, "-b", fabric.client_address, "-s", "-C", MCKEY_MESSAGES]
    deadline = time.monotonic() + PAIR_TIMEOUT_S
    with tempfile.TemporaryFile("w+") as rout:
        receiving = _start(receiver, fabric.env(), rout)
        try:
            while _read(rout).count("joined dgid") < MCKEY_RECEIVERS:
                assert receiving.poll() is None, f"receiver exited {receiving.returncode}:\n{_read(rout)}"
                assert time.monotonic() < deadline, f"receiver never joined:\n{_read(rout)}"
                time.sleep(0.005)
            sent = subprocess.run(sender, env=fabric.env(), capture_output=True, text=True, timeout=PAIR_TIMEOUT_S)
            assert sent.returncode == 0 and "return status 0" in sent.stdout, sent.stdout + sent.stderr
            receiving.wait(timeout=max(0.1, deadline - time.monotonic()))
        finally:
            _kill(receiving)
        out = _read(rout)
    assert receiving.returncode == 0 and "return status 0" in out, out
    assert out.count("joined dgid") == MCKEY_RECEIVERS, out


PERFTEST_CASES = [("ib_write_bw", "-R"), ("ib_send_bw", "-R", "-c", "UD"), ("ib_read_lat", "-R")]
_PERFTEST_ROW = re.compile(r"^[ \t]*\d+[ \t]+\d+(?:[ \t]+[\d.]+){2,}[ \t]*$", re.M)


@pytest.mark.parametrize("args", PERFTEST_CASES, ids=[" ".join(c) for c in PERFTEST_CASES])
def test_perftest_rdma_cm(fabric, args):
    port = next(_ports)
    common = [str(PERFTEST_DIR / args[0]), *args[1:], "-p", str(port), "-n", "1000", "-F"]
    server, client = common, common + [fabric.server_address]
    _, out = _check(run_pair(fabric, server, client, port), server, client)
    assert _PERFTEST_ROW.search(out), out


def test_no_listener_is_rejected_at_once(fabric):
    for argv in ([str(UTILS_DIR / "ucmatose"), "-s", fabric.server_address, "-p", str(next(_ports))],
                 [str(UTILS_DIR / "rdma_client"), "-s", fabric.server_address, "-p", str(next(_ports))]):
        start = time.monotonic()
        r = subprocess.run(argv, env=fabric.env(), capture_output=True, text=True, timeout=PAIR_TIMEOUT_S)
        assert r.returncode != 0, r.stdout + r.stderr
        assert time.monotonic() - start < REJECT_WITHIN_S, f"{argv[0]} took {time.monotonic() - start:.1f} s"
    assert "RDMA_CM_EVENT_REJECTED" in subprocess.run(
        [str(UTILS_DIR / "ucmatose"), "-s", fabric.server_address, "-p", str(next(_ports))], env=fabric.env(),
        capture_output=True, text=True, timeout=PAIR_TIMEOUT_S).stdout


def test_client_of_a_dead_server_ends(fabric):
    """kill -9 the rping server mid-run: the client sees the connection go and exits."""
    port = next(_ports)
    a = ["-a", fabric.server_address, "-p", str(port), "-C", "100000000"]
    env = fabric.env()
    listener = listener_paths(fabric.name, fabric.server_address, port)
    with tempfile.TemporaryFile("w+") as sout, tempfile.TemporaryFile("w+") as cout:
        server = _start([str(UTILS_DIR / "rping"), "-s", *a], env, sout)
        client = None
        try:
            deadline = time.monotonic() + PAIR_TIMEOUT_S
            while not listening(listener):
                assert server.poll() is None and time.monotonic() < deadline, _read(sout)
                time.sleep(0.005)
            # Line-buffered, so its first ping shows while it runs (rping never flushes).
            client = _start(["stdbuf", "-oL", str(UTILS_DIR / "rping"), "-c", "-v", *a], env, cout)
            while "ping data" not in _read(cout):
                assert client.poll() is None and time.monotonic() < deadline, _read(cout)
                time.sleep(0.01)
            _kill(server)
            killed_at = time.monotonic()
            client.wait(timeout=PAIR_TIMEOUT_S)
            assert time.monotonic() - killed_at < 10, "the client took over 10 s to notice its server died"
        finally:
            for p in (client, server):
                if p is not None:
                    _kill(p)


# Through softnic's librdmacm with ctypes (which lets go of the GIL in each call, so the
# timer thread can acknowledge while rdma_destroy_id waits): an id with a delivered
# ADDR_RESOLVED event, destroyed before the event is acknowledged.
_DESTROY_BEFORE_ACK = r"""
import ctypes, socket, struct, sys, threading
cm = ctypes.CDLL("librdmacm.so.1", use_errno=True)
cm.rdma_create_event_channel.restype = ctypes.c_void_p
RDMA_PS_TCP = 0x106
class sockaddr_in(ctypes.Structure):
    _fields_ = [("family", ctypes.c_ushort), ("port", ctypes.c_uint16), ("addr", ctypes.c_uint32),
                ("zero", ctypes.c_char * 8)]
channel = ctypes.c_void_p(cm.rdma_create_event_channel())
cm_id, event = ctypes.c_void_p(), ctypes.c_void_p()
assert cm.rdma_create_id(channel, ctypes.byref(cm_id), None, RDMA_PS_TCP) == 0
dst = sockaddr_in(socket.AF_INET, socket.htons(7471), struct.unpack("I", socket.inet_aton(sys.argv[1]))[0])
assert cm.rdma_resolve_addr(cm_id, None, ctypes.byref(dst), 2000) == 0
assert cm.rdma_get_cm_event(channel, ctypes.byref(event)) == 0
ack_started = threading.Event()
def ack():
    ack_started.set()
    cm.rdma_ack_cm_event(event)
if sys.argv[2] == "ack-later":
    threading.Timer(0.3, ack).start()
rc = cm.rdma_destroy_id(cm_id)
print("destroy", rc, ctypes.get_errno(), "after-ack" if ack_started.is_set() else "before-ack", flush=True)
"""


@pytest.mark.parametrize("link", LINKS[:1])
def test_destroy_id_waits_for_the_acks_of_its_events(link):
    """man rdma_destroy_id: it waits until the id's delivered events are acknowledged;
    softnic gives up after 5 s with EBUSY (and says why) instead of hanging."""
    fabric = Fabric(link)
    try:
        run = lambda how: subprocess.run(["/usr/bin/python3", "-c", _DESTROY_BEFORE_ACK, fabric.server_address, how],
                                         env=fabric.env(), capture_output=True, text=True, timeout=PAIR_TIMEOUT_S)
        r = run("ack-later")
        assert r.returncode == 0 and "destroy 0 " in r.stdout, r.stdout + r.stderr
        assert r.stdout.split()[-1] == "after-ack", r.stdout
        r = run("never")
        assert r.returncode == 0, r.stdout + r.stderr
        assert r.stdout.split()[:3] == ["destroy", "-1", str(errno.EBUSY)], r.stdout
        assert "rdma_ack_cm_event" in r.stderr, r.stderr
    finally:
        subprocess.run([str(CLI), "fabric", "rm", "--fabric", fabric.name], capture_output=True, timeout=30)
