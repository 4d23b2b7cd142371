"""memcached and Redis behind rdmalab-kv (issue 13, acceptance 1 for the TCP stores): the
real servers from Debian, 4 clients x W=4, every GET's value checked against what was PUT;
and the failures a user meets: a missing program, a store that exits, one that answers
with a protocol error, a server role that dies (its store goes with it)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

import kvrun
from kvrun import benchrun

FAKE_STORE = Path(__file__).resolve().parent / "fake_store.py"
# Acceptance 1: 4 clients x W=4, 1 million mixed operations (250000 per client). One
# connection per window slot is the default and the slow one (a round trip per request):
# memcached's text protocol runs it at full length, the others pipelined, and
# test_large_keys_and_values runs each protocol in its other mode.
ACCEPTANCE = ["--clients", "4", "--window", "4", "--iters", "250000", "--keys", "100000", "--validate",
              "--warmup", "0"]
STORES = {"memcached": "memcached", "redis": "redis-server"}


def require(system: str) -> None:
    if shutil.which(STORES[system]) is None:
        pytest.skip(f"{STORES[system]} is not installed (scripts/install-deps.sh)")


def check_run(run, operations: int) -> dict:
    """Both roles succeeded; the server's document counts every operation, every GET hit
    and was checked, no value was wrong; returns the server's document."""
    assert run.ok, run.describe()
    server = run.server.document
    validation = server["validation"]
    assert validation["enabled"] and validation["ok"], validation
    assert validation["wrong_key"] == 0 and validation["corrupt"] == 0, validation
    counts = server["results"][0]
    assert counts["ops"] >= operations, counts  # the core counts whole windows
    assert counts["get_misses"] == 0 and counts["puts_refused"] == 0 and counts["unanswered"] == 0, counts
    assert validation["checked"] == counts["gets"] > 0, (validation, counts)
    assert len(server["results"][0]["per_peer"]) == 4
    return server


def assert_port_closed(address: str) -> None:
    host, port = address.rsplit(":", 1)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((host, int(port)), timeout=2).close()


@pytest.mark.parametrize("system,args", [
    ("memcached", ["--protocol", "text", "--put-fraction", "0.05"]),
    ("memcached", ["--protocol", "binary", "--put-fraction", "0.5", "--pipeline"]),
    ("redis", ["--put-fraction", "0.5", "--pipeline"]),
], ids=["memcached-text", "memcached-binary-pipelined", "redis-pipelined"])
def test_million_operations_no_wrong_value(system: str, args: list[str]) -> None:
    require(system)
    run = kvrun.standalone(system, [*ACCEPTANCE, *args])
    server = check_run(run, 1_000_000)
    stats = server["server"]["counters_during_run"]
    served = stats["cmd_get"] + stats["cmd_set"] if system == "memcached" else stats["total_commands_processed"]
    assert served >= 1_000_000, stats  # the store saw every request (and the statistics' own)
    assert_port_closed(server["server"]["address"])  # the store went with the server role


@pytest.mark.parametrize("system,args", [
    ("memcached", ["--protocol", "text", "--pipeline"]),
    ("memcached", ["--protocol", "binary"]),
    ("redis", []),
], ids=["memcached-text-pipelined", "memcached-binary", "redis"])
def test_large_keys_and_values(system: str, args: list[str]) -> None:
    """The other connection mode of each protocol, with 250-byte keys and 1000-byte values
    (split over several reads, with every byte value in them)."""
    require(system)
    run = kvrun.standalone(system, ["--clients", "4", "--window", "4", "--iters", "5000", "--keys", "20000",
                                    "--key-size", "250", "--value-size", "1000", "--put-fraction", "0.5",
                                    "--validate", "--warmup", "0", *args])
    check_run(run, 20_000)


def test_missing_program_is_one_line() -> None:
    start = time.monotonic()
    line = kvrun.single_error(kvrun.server_alone("memcached", ["--server-bin", "/nonexistent"]))
    assert "--server-bin /nonexistent: no such file" in line and "memcached" in line, line
    assert time.monotonic() - start < 5


def test_program_not_on_path(tmp_path: Path) -> None:
    line = kvrun.single_error(kvrun.server_alone("redis", [], env={"PATH": str(tmp_path)}))
    assert f"redis-server not found on PATH ({tmp_path})" in line and "--server-bin" in line, line


def test_store_that_exits_names_its_output() -> None:
    """redis-server given memcached's program: memcached exits on redis-server's flags."""
    require("memcached")
    start = time.monotonic()
    line = kvrun.single_error(kvrun.server_alone("redis", ["--server-bin", shutil.which("memcached")]))
    assert "exited with status" in line and "before accepting connections on 127.0.0.1:" in line, line
    assert "its last output" in line, line
    assert time.monotonic() - start < 10


@pytest.mark.parametrize("system,reply,expected", [
    ("memcached", "SERVER_ERROR out of memory storing object\\r\\n",
     "answered the preload's SET of key '"),
    ("redis", "-ERR unknown command\\r\\n", "answered the preload's SET of key '"),
])
def test_protocol_error_during_preload(system: str, reply: str, expected: str) -> None:
    line = kvrun.single_error(kvrun.server_alone(system, ["--server-bin", str(FAKE_STORE)],
                                                 env={"FAKE_STORE_REPLY": reply}))
    assert expected in line and reply.split("\\r")[0] in line, line


def test_protocol_error_during_run_fails_both_sides() -> None:
    """No preload: the first GET meets the error; the client names it, the server learns of it."""
    start = time.monotonic()
    run = kvrun.standalone("memcached", ["--clients", "4", "--window", "4", "--iters", "1000", "--preload=false"],
                           server_args=["--server-bin", str(FAKE_STORE)], timeout_s=60, kv_timeout_s=30,
                           env={"FAKE_STORE_REPLY": "ERROR\\r\\n"})
    line = kvrun.single_error(run.clients[0])
    assert "memcached at 127.0.0.1:" in line and "with 'ERROR' (memcached text protocol)" in line, line
    assert "client/0 failed" in kvrun.single_error(run.server)
    assert run.elapsed_s < 20


def test_server_role_killed_takes_its_store_along() -> None:
    """SIGKILL the server role alone (not its process group) mid-run: PR_SET_PDEATHSIG ends
    the store at once, and the client fails naming a lost peer or the store."""
    require("redis")
    store_port = benchrun.free_port()
    argvs = kvrun.standalone_argvs("redis", ["--clients", "1", "--window", "1", "-D", "30", "--keys", "1000"],
                                   kv_timeout_s=40, server_args=["--tcp-port", str(store_port)])
    fabric = f"kv-kill-{store_port}"
    env = benchrun.softnic_env(fabric, 2, "ib")
    procs = [subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              start_new_session=True) for argv in argvs]
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:  # the run is under way once the store serves the client
            try:
                socket.create_connection(("127.0.0.1", store_port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        time.sleep(1.0)
        os.kill(procs[0].pid, signal.SIGKILL)
        procs[0].wait(timeout=10)
        time.sleep(0.5)
        assert_port_closed(f"127.0.0.1:{store_port}")
        _, stderr = procs[1].communicate(timeout=30)
        line = kvrun.single_error(benchrun.Role(argvs[1], procs[1].returncode, "", stderr))
        assert "redis at 127.0.0.1:" in line or "rendezvous" in line or "peer" in line, line
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        benchrun.remove_fabric(fabric)
