#!/usr/bin/python3
"""What `softnic run --netdevs` and `--device-nodes` show the program, that every run of a
fabric shares it, and that it goes with the last of their programs.

--netdevs: in a network namespace of its own, device softnicN has interface snicN (up, with
a carrier) holding the device's fabric address (`softnic fabric show --json`), linked from
/sys/class/infiniband/softnicN/device/net/ as rdma-core's tests look for it; the program can
bind and connect sockets on it. Afterwards no snic* interface is in the root namespace and
nothing is left in /tmp, which the program saw as the host's. Programs of separate runs of
one fabric share the view: they meet over TCP on a device address, two runs started at once
get one view, a run asking for what the view lacks fails clearly, and once every program has
exited the next run builds a fresh view (`softnic fabric show` names the view's members).
Each test runs as root and as a normal user (run_as.py), who gets the namespaces inside a
user namespace of its own.

Configuration (set by tests/integration/CMakeLists.txt; defaults for a ./build tree):
  SOFTNIC_CLI, RDMALAB_PEERS_DIR (pairrun.py)
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from softnic_env import CLI
import pairrun
import run_as


TIMEOUT_S = 30.0
DEVICES = 3
_fabric_ids = itertools.count()

# Run inside `softnic run --netdevs`: what the program sees, as JSON.
_PROBE = r"""
import json, os, socket, subprocess, sys
seen = {"sysfs": {}, "interfaces": json.loads(subprocess.check_output(["ip", "-j", "addr", "show"]))}
for dev in sorted(os.listdir("/sys/class/infiniband")):
    net = f"/sys/class/infiniband/{dev}/device/net"
    names = os.listdir(net)
    seen["sysfs"][dev] = {"names": names,
                          "operstate": open(f"{net}/{names[0]}/operstate").read().strip()}
address = sys.argv[1]
server = socket.create_server((address, 0))
client = socket.create_connection(server.getsockname(), timeout=5)
peer, _ = server.accept()
client.sendall(b"ping")
seen["tcp_on_device_address"] = peer.recv(4).decode()
open(sys.argv[2], "w").write("written by the program")
print(json.dumps(seen))
"""


class Fabric:
    """A fabric made for one test, and the user whose programs use it."""

    def __init__(self, name: str, user: str):
        self.name = name
        self.user = user

    def run(self, *options_and_program: str, timeout_s: float = TIMEOUT_S) -> pairrun.ProcResult:
        """`softnic run --fabric NAME OPTIONS... -- PROGRAM...` as the fabric's user."""
        return pairrun.run_one(self._argv(*options_and_program), os.environ, timeout_s)

    def start(self, *options_and_program: str) -> subprocess.Popen:
        """`run` in the background; its stdout is a text pipe. The pid is the program's."""
        return subprocess.Popen(self._argv(*options_and_program), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, text=True)

    def view(self) -> dict | None:
        """The shared view as `softnic fabric show --json` reports it."""
        r = pairrun.run_one(run_as.argv(self.user, [str(CLI), "fabric", "show", "--fabric", self.name, "--json"]),
                            os.environ, TIMEOUT_S)
        assert r.returncode == 0, r.output
        return json.loads(r.output)["view"]

    def _argv(self, *options_and_program: str) -> list[str]:
        return run_as.argv(self.user, [str(CLI), "run", "--fabric", self.name, *options_and_program])


def _fabric_addresses(fabric: Fabric) -> list[str]:
    r = pairrun.run_one(run_as.argv(fabric.user, [str(CLI), "fabric", "show", "--fabric", fabric.name, "--json"]),
                        os.environ, TIMEOUT_S)
    assert r.returncode == 0, r.output
    return [d["ipv4"] for d in json.loads(r.output)["devices"]]


def _root_interfaces() -> set[str]:
    r = pairrun.run_one(["ip", "-j", "link", "show"], os.environ, TIMEOUT_S)
    assert r.returncode == 0, r.output
    return {link["ifname"] for link in json.loads(r.output)}


def _tmp_softnic_entries() -> set[str]:
    return {p.name for p in Path("/tmp").iterdir() if p.name.startswith("softnic")}


@pytest.fixture(params=run_as.USERS)
def fabric(request):
    user = request.param
    reason = run_as.unavailable(user, [CLI, CLI.parent.parent / "lib/softnic/libibverbs.so.1"])
    if reason:
        pytest.skip(reason)
    name = f"views-{os.getpid()}-{next(_fabric_ids)}"
    r = pairrun.run_one(run_as.argv(user, [str(CLI), "fabric", "create", "--fabric", name, "--devices", str(DEVICES),
                                           "--link", "roce"]), os.environ, TIMEOUT_S)
    assert r.returncode == 0, r.output
    yield Fabric(name, user)
    pairrun.run_one(run_as.argv(user, [str(CLI), "fabric", "rm", "--fabric", name]), os.environ, TIMEOUT_S)


def test_netdevs_carry_the_fabric_addresses(fabric):
    addresses = _fabric_addresses(fabric)
    interfaces_before = _root_interfaces()
    tmp_before = _tmp_softnic_entries()
    with tempfile.TemporaryDirectory(prefix="views-probe-") as scratch:
        os.chmod(scratch, 0o1777)  # the program may run as another user
        witness = Path(scratch) / "witness"
        r = fabric.run("--netdevs", "--", sys.executable, "-c", _PROBE, addresses[1], str(witness))
        assert r.returncode == 0, r.output
        # /tmp in the program was the host's: its file is here.
        assert witness.read_text() == "written by the program"
    seen = json.loads(r.output.strip().splitlines()[-1])
    assert sorted(seen["sysfs"]) == [f"softnic{i}" for i in range(DEVICES)]
    by_name = {link["ifname"]: link for link in seen["interfaces"]}
    for i, address in enumerate(addresses):
        entry = seen["sysfs"][f"softnic{i}"]
        assert entry == {"names": [f"snic{i}"], "operstate": "up"}, entry
        inet = [a for a in by_name[f"snic{i}"]["addr_info"] if a["family"] == "inet"]
        assert [(a["local"], a["prefixlen"]) for a in inet] == [(address, 24)]
        # rdma-core's tests take the interface's first address.
        assert by_name[f"snic{i}"]["addr_info"][0]["local"] == address
    assert seen["tcp_on_device_address"] == "ping"
    # The namespace went with the program: nothing new in the root one, nothing in /tmp.
    assert not {n for n in _root_interfaces() - interfaces_before if n.startswith("snic")}
    assert _tmp_softnic_entries() <= tmp_before


def test_netdevs_are_private(fabric):
    """The interfaces exist for the program and nowhere else, even while it runs."""
    r = fabric.run("--netdevs", "--", "sh", "-c",
                   "ip -br link show snic0 && ls /sys/class/infiniband && ip -br link show | wc -l")
    assert r.returncode == 0, r.output
    assert r.output.split()[-1] == str(1 + 2 * DEVICES), r.output  # lo, and each device's veth pair
    assert not any(n.startswith("snic") for n in _root_interfaces())
    assert not Path("/sys/class/infiniband/softnic0").exists()


def test_device_nodes_leave_nothing_in_tmp(fabric):
    """--device-nodes used to leave an empty /tmp/softnic-device-nodes behind."""
    leftover = Path("/tmp/softnic-device-nodes")
    if leftover.is_dir() and not any(leftover.iterdir()):
        leftover.rmdir()  # left by an older softnic
    before = _tmp_softnic_entries()
    r = fabric.run("--device-nodes", "--netdevs", "--",
                   "stat", "-c", "%F", "/dev/infiniband/uverbs2", "/sys/class/infiniband/softnic2/device/net/snic2")
    assert r.returncode == 0, r.output
    assert r.output.split("\n")[:2] == ["character special file", "symbolic link"], r.output
    assert _tmp_softnic_entries() <= before
    assert not leftover.exists()


# A server on the device address, in one run: prints its port and namespaces, answers one
# client, and waits for it to hang up.
_SERVER = r"""
import os, socket, sys
server = socket.create_server((sys.argv[1], 0))
server.settimeout(20)
print(server.getsockname()[1], os.readlink("/proc/self/ns/net"), os.readlink("/proc/self/ns/mnt"), flush=True)
peer, _ = server.accept()
peer.settimeout(20)
assert peer.recv(4) == b"ping"
peer.sendall(b"pong")
assert peer.recv(1) == b""
"""

# The client, in another run: its answer, namespaces and the view while both run, as JSON.
_CLIENT = r"""
import json, os, socket, subprocess, sys
address, port, cli, fabric = sys.argv[1:5]
client = socket.create_connection((address, int(port)), timeout=20)
client.sendall(b"ping")
seen = {"reply": client.recv(4).decode(),
        "namespaces": [os.readlink("/proc/self/ns/net"), os.readlink("/proc/self/ns/mnt")],
        "view": json.loads(subprocess.check_output([cli, "fabric", "show", "--fabric", fabric, "--json"]))["view"]}
print(json.dumps(seen))
"""


def _finish(proc: subprocess.Popen) -> str:
    try:
        output, _ = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        output, _ = proc.communicate()
        pytest.fail(f"{proc.args} did not finish in {TIMEOUT_S} s:\n{output}")
    assert proc.returncode == 0, output
    return output


def test_separate_runs_share_one_view(fabric):
    """Two `softnic run --netdevs` meet over TCP on a device address; the view ends with them."""
    address = _fabric_addresses(fabric)[0]
    server = fabric.start("--netdevs", "--", sys.executable, "-c", _SERVER, address)
    try:
        port, *server_namespaces = server.stdout.readline().split()
    except ValueError:
        pytest.fail(f"the server printed no port:\n{_finish(server)}")
    client = fabric.run("--netdevs", "--", sys.executable, "-c", _CLIENT, address, port, str(CLI), fabric.name)
    server_output = _finish(server)
    assert client.returncode == 0, client.output + server_output
    seen = json.loads(client.output.strip().splitlines()[-1])
    assert seen["reply"] == "pong"
    assert seen["namespaces"] == server_namespaces
    assert seen["view"]["netdevs"] and not seen["view"]["device_nodes"], seen["view"]
    assert len(seen["view"]["members"]) == 2 and server.pid in seen["view"]["members"], seen["view"]
    # Both gone: so is the view, and the next run builds a fresh one with itself alone in it.
    assert fabric.view() is None
    third = fabric.start("--netdevs", "--", str(CLI), "fabric", "show", "--fabric", fabric.name, "--json")
    view = json.loads(_finish(third))["view"]
    assert view["members"] == [third.pid], view


def test_runs_started_at_once_get_one_view(fabric):
    runs = [fabric.start("--netdevs", "--", "sh", "-c", "readlink /proc/self/ns/net; sleep 1") for _ in range(4)]
    namespaces = {_finish(run).strip() for run in runs}
    assert len(namespaces) == 1, namespaces


def test_view_holds_what_its_first_run_asked_for(fabric):
    holder = fabric.start("--netdevs", "--", "sleep", "3")
    try:
        # The holder is a member once the view record names it.
        deadline = time.monotonic() + TIMEOUT_S
        while not fabric.view() and time.monotonic() < deadline:
            time.sleep(0.01)
        more = fabric.run("--device-nodes", "--", "true")
        assert more.returncode == 2, more.output
        assert "holds --netdevs" in more.output and "cannot add --device-nodes" in more.output, more.output
        assert f"pids {holder.pid}" in more.output, more.output
        assert fabric.run("--netdevs", "--", "true").returncode == 0
    finally:
        holder.kill()
        holder.communicate()
