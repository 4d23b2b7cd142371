#!/usr/bin/python3
"""What `softnic run --netdevs` and `--device-nodes` show the program, and that it goes
with the program.

--netdevs: in a network namespace of its own, device softnicN has interface snicN (up, with
a carrier) holding the device's fabric address (`softnic fabric show --json`), linked from
/sys/class/infiniband/softnicN/device/net/ as rdma-core's tests look for it; the program can
bind and connect sockets on it. Afterwards no snic* interface is in the root namespace and
nothing is left in /tmp, which the program saw as the host's. Each test runs as root and as
a normal user (run_as.py), who gets the namespaces inside a user namespace of its own.

Configuration (set by tests/integration/CMakeLists.txt; defaults for a ./build tree):
  SOFTNIC_CLI, RDMALAB_PEERS_DIR (pairrun.py)
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CLI = Path(os.environ.get("SOFTNIC_CLI", REPO / "build/bin/softnic"))
sys.path.insert(0, os.environ.get("RDMALAB_PEERS_DIR", str(REPO / "benchmarks/peers")))
import pairrun  # noqa: E402
import run_as  # noqa: E402

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
        return pairrun.run_one(run_as.argv(self.user, [str(CLI), "run", "--fabric", self.name, *options_and_program]),
                               os.environ, timeout_s)


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
