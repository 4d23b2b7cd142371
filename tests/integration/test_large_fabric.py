#!/usr/bin/python3
"""Fabrics of many devices (softnic/fabric/layout.h kMaxDevices = 256).

A 256-device fabric: every device listed with an address of its own, an rsocket connection to
the last device, and the fabric file staying sparse through a dead process's reclaim and
`fabric show` (both read only the table ranges ever written). A 64-device fabric runs
herd14-fig9-kv's HERD point (16-byte keys, 32-byte values, 5% PUT, window 4, 8 clients per
process) with 32 client processes, one per device, to completion with every reply checked.

Configuration (set by tests/integration/CMakeLists.txt; defaults for a ./build tree):
  SOFTNIC_LIBRARY_DIR  directory holding softnic's libibverbs.so.1 and librdmacm.so.1
  SOFTNIC_CLI          the softnic command
  RDMALAB_KV           rdmalab-kv
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from softnic_env import REPO, LIB_DIR, CLI

os.environ.setdefault("SOFTNIC_CLI", str(CLI))  # benchrun's softnic
sys.path.insert(0, str(REPO / "tests/kv"))
import kvrun

MAX_DEVICES = 256
# What a 256-device fabric may hold in tmpfs after two runs and a `fabric show`: its few
# written pages, not the ~1 GB of tables a read of every entry would allocate.
SPARSE_LIMIT_BYTES = 64 << 20
HERD_DEVICES = 64
HERD_CLIENT_PROCESSES = 32
PAIR_TIMEOUT_S = 60.0


def cli(*args: str) -> str:
    return subprocess.run([str(CLI), *args], check=True, capture_output=True, text=True, timeout=60).stdout


@pytest.fixture
def fabric_name():
    name = f"large-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    yield name
    subprocess.run([str(CLI), "fabric", "rm", "--fabric", name], capture_output=True, timeout=60)


def used_bytes(name: str) -> int:
    directory = Path(f"/dev/shm/softnic-{os.getuid()}-{name}")
    return sum(p.stat().st_blocks * 512 for p in directory.iterdir())


def rstream_to_last_device(name: str, address: str, port: int) -> None:
    """rstream's server bound to `address` (softnic255's), its client connecting from softnic0."""
    env = dict(os.environ, LD_LIBRARY_PATH=str(LIB_DIR), SOFTNIC_FABRIC=name)
    common = ["-p", str(port), "-S", "100000", "-C", "100", "-T", "v"]
    server = subprocess.Popen(["rstream", "-b", address, *common], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        listener = Path(f"/dev/shm/softnic-{os.getuid()}-{name}/cm-{port:04x}-" +
                        "".join(f"{int(x):02x}" for x in address.split(".")))
        deadline = time.monotonic() + PAIR_TIMEOUT_S
        while not listener.exists():
            assert server.poll() is None and time.monotonic() < deadline, server.stdout.read()
            time.sleep(0.005)
        client = subprocess.run(["rstream", "-s", address, *common], env=env, capture_output=True, text=True,
                                timeout=PAIR_TIMEOUT_S)
        assert client.returncode == 0, client.stdout + client.stderr
        assert server.wait(timeout=PAIR_TIMEOUT_S) == 0, server.stdout.read()
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()


def test_256_devices(fabric_name):
    cli("fabric", "create", "--fabric", fabric_name, "--devices", str(MAX_DEVICES), "--link", "roce")
    devices = json.loads(cli("fabric", "show", "--fabric", fabric_name, "--json"))["devices"]
    assert [d["name"] for d in devices] == [f"softnic{i}" for i in range(MAX_DEVICES)]
    addresses = [d["ipv4"] for d in devices]
    assert len(set(addresses)) == MAX_DEVICES and all(int(a.split(".")[3]) in range(1, 255) for a in addresses)
    for port in (24001, 24002):  # the second run's processes reclaim the first's slots
        rstream_to_last_device(fabric_name, addresses[-1], port)
    cli("fabric", "show", "--fabric", fabric_name, "--json")
    assert used_bytes(fabric_name) < SPARSE_LIMIT_BYTES, f"{used_bytes(fabric_name)} bytes in tmpfs"
    bad = subprocess.run([str(CLI), "fabric", "create", "--fabric", fabric_name + "x", "--devices",
                          str(MAX_DEVICES + 1)], capture_output=True, text=True, timeout=30)
    assert bad.returncode != 0 and f"1..{MAX_DEVICES}" in bad.stderr, bad.stderr


@pytest.mark.skipif(not kvrun.KV.exists(), reason="rdmalab-kv is not built")
def test_herd_point_with_32_client_processes_on_64_devices(fabric_name):
    cli("fabric", "create", "--fabric", fabric_name, "--devices", str(HERD_DEVICES))
    params = ["--key-size", "16", "--value-size", "32", "--put-fraction", "0.05", "--window", "4", "--clients", "8",
              "--keys", "262144", "-D", "1", "--warmup", "0.2", "--validate"]
    run = kvrun.standalone("herd", params, client_processes=HERD_CLIENT_PROCESSES, fabric=fabric_name,
                           timeout_s=600, kv_timeout_s=500)
    docs = kvrun.documents(run)
    clients = docs[1:]
    assert len(clients) == HERD_CLIENT_PROCESSES
    for doc in clients:
        assert doc["validation"]["ok"] and doc["results"][0]["ops"] > 0, doc["results"]
    print("HERD, 32 client processes on 64 devices:",
          f"{sum(d['results'][0]['ops'] for d in clients)} ops")
