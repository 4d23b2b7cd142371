"""Bad input and failing peers: one clear error line naming the value and what is valid,
a non-zero exit, and no hang (every case ends well inside --timeout)."""

from __future__ import annotations

import os
import re
import subprocess
import time

import pytest

import benchrun

kExitError, kExitUnsupported = 1, 3  # rdma/program.h
kNumaNodes = len([n for n in os.listdir("/sys/devices/system/node") if re.fullmatch(r"node\d+", n)])


def run_alone(args: list[str], timeout_s: float = 20) -> benchrun.Role:
    """A standalone server alone, on a fabric of its own."""
    fabric = f"bench-alone-{benchrun.free_port()}"
    argv = [str(benchrun.BENCH), *args, "-p", str(benchrun.free_port()), "--timeout", "5"]
    if not any(a.startswith("-d") for a in args):
        argv += ["-d", "softnic0"]
    try:
        return benchrun.run_processes([argv], benchrun.softnic_env(fabric, 2, "ib"), timeout_s).server
    finally:
        benchrun.remove_fabric(fabric)


def single_error(role: benchrun.Role) -> str:
    assert role.returncode not in (0, None), role.stderr
    assert len(role.error_lines) == 1, role.stderr
    return role.error_lines[0]


@pytest.mark.parametrize("args,expected", [
    (["foo"], ["unknown mode 'foo'", "valid modes are lat, tput"]),
    (["tput", "--verb", "read", "-c", "UC"], ["read over UC is impossible", "-c RC"]),
    (["tput", "--verb", "write", "-c", "UD"], ["write over UD is impossible", "SEND"]),
    (["lat", "--verb", "cas", "-c", "UC"], ["cas over UC is impossible"]),
    (["tput", "--verb", "send", "-c", "UD", "-s", "8192"], ["--size 8192 over UD", "MTU of 4096"]),
    (["tput", "-t", "4", "-Q", "8"], ["--tx-depth 4 is too small", "cq-mod"]),
    (["tput", "--bogus"], ["unknown flag --bogus"]),
    (["tput", "-s", "abc"], ["bad value 'abc' for --size"]),
    (["tput", "--direction", "sideways"], ["bad value 'sideways'", "inbound, outbound, alltoall"]),
    (["atomics", "--verb", "faa", "-s", "16"], ["--size 16", "exactly 8 bytes"]),
    (["tput", "--header-only", "--verb", "write"], ["--header-only needs --verb send"]),
    (["lat", "--verb", "read", "--lat-method", "pingpong"], ["only WRITE and SEND can ping-pong"]),
    (["lat", "--verb", "write", "--events"], ["-e/--events with --verb write ping-pong", "use --verb send"]),
    (["tput", "--events"], ["-e/--events applies to lat over RDMA only"]),
    (["tput", "-R", "-c", "UD", "--verb", "send"], ["-R/--rdma_cm with -c UD", "UD needs no connection"]),
    (["lat", "-R", "-c", "UD", "--verb", "send"], ["-R/--rdma_cm with -c UD"]),
    (["lat", "-R", "--stack", "udp", "-s", "64"], ["-R/--rdma_cm connects QPs", "--stack rdma only"]),
    (["tput", "-D", "1", "-n", "5"], ["both given"]),
    (["tput", "-d", "mlx5_9"], ["device 'mlx5_9' not found", "softnic0"]),
    (["tput", "--direction", "alltoall"], ["all-to-all runs need the coordinator"]),
    (["lat", "--stack", "udp", "-s", "8"], ["--size 8 with --stack udp", "24..65507"]),
    (["echo", "--stack", "tcp"], ["--stack tcp applies to lat and tput"]),
    (["lat", "--io-batch", "4"], ["--io-batch 4 applies to --stack udp and raw only"]),
    (["lat", "--stack", "raw", "-s", "8"], ["--size 8 with --stack raw", "24..65507"]),
    (["tput", "--stack", "raw", "--verb", "read"], ["--verb read with --stack raw", "datagrams are sends"]),
    (["tput", "--stack", "udp", "--sge", "2"], ["--stack udp runs one client and one server over one socket"]),
    (["tput", "--buffers", "2", "--validate"], ["--numa, --page-offset and --buffers place", "--validate"]),
    (["tput", "--verb", "write", "--distribution", "zipf"], ["--distribution zipf with --verb write",
                                                             "keyed addresses are for READs", "use --verb read"]),
    (["tput", "--verb", "read", "--distribution", "gauss"], ["bad value 'gauss'", "none, uniform, zipf"]),
    (["tput", "--verb", "read", "--placement", "unclustered"], ["--placement, --keys and --zipf-theta",
                                                                "need --distribution uniform|zipf"]),
    (["tput", "--verb", "read", "--distribution", "zipf", "--zipf-theta", "1.5"], ["zipf_theta", "1.5"]),
    (["tput", "--verb", "read", "--zipf-theta", "0.5"], ["--placement, --keys and --zipf-theta"]),
    (["tput", "--verb", "read", "--distribution", "zipf", "--keys", str(2**29)], ["keys", str(2**29), "268435456"]),
    (["tput", "--verb", "read", "--distribution", "zipf", "--validate"], ["does not combine with --validate"]),
    (["lat", "--verb", "read", "--distribution", "uniform"], ["--distribution uniform applies to mode tput",
                                                              "not mode lat"]),
])
def test_bad_input(args: list[str], expected: list[str]) -> None:
    start = time.monotonic()
    line = single_error(run_alone(args))
    for fragment in expected:
        assert fragment in line, line
    assert time.monotonic() - start < 10


def test_device_refusing_a_qp_is_an_error() -> None:
    """ibv_create_qp's EINVAL has more than one cause: an error with the likely one, not a limit."""
    run = benchrun.standalone("tput", ["-I", "1024", "-s", "1024", "--verb", "write_inline"], timeout_s=30,
                              bench_timeout_s=20)
    line = single_error(run.clients[0])
    assert "inline 1024 B" in line and "lower --inline_size" in line, line
    assert run.clients[0].returncode == kExitError
    assert "client/0 failed" in single_error(run.server)
    assert run.elapsed_s < 10


@pytest.mark.parametrize("args,expected", [
    (["-t", "20000"], ["queue depth 20000", "max_qp_wr 16384"]),
    pytest.param(["--numa", "far"], ["--numa far: this host has 1 NUMA node, so no memory is far from device softnic1"],
                 marks=pytest.mark.skipif(kNumaNodes != 1, reason=f"{kNumaNodes} NUMA nodes: far memory exists")),
])
def test_host_limits_are_unsupported(args: list[str], expected: list[str]) -> None:
    """Valid requests this host or device cannot serve: the client (which creates the sending QPs
    and buffers) exits kExitUnsupported with one line naming the limit, and the server learns of it
    through the rendezvous instead of waiting."""
    run = benchrun.standalone("tput", args, timeout_s=30, bench_timeout_s=20)
    client = run.clients[0]
    assert client.returncode == kExitUnsupported, client.stderr
    assert client.error_lines == [] and len(client.unsupported_lines) == 1, client.stderr
    for fragment in expected:
        assert fragment in client.unsupported_lines[0], client.stderr
    assert "client/0 failed: unsupported: " in single_error(run.server)
    assert run.elapsed_s < 10


@pytest.mark.parametrize("link,expected", [
    ("roce", ["softnic1 refused an IBV_QPT_RAW_PACKET QP (ibv_create_qp: Operation not supported, errno 95)",
              "its provider has no raw-packet QPs"]),
    ("ib", ["--stack raw: softnic1 port 1 is InfiniBand", "raw-packet QPs carry Ethernet frames"]),
])
@pytest.mark.parametrize("mode", ["lat", "tput"])
def test_raw_packet_stack_is_unsupported_where_the_provider_refuses(mode: str, link: str,
                                                                    expected: list[str]) -> None:
    """--stack raw on softnic: both sides exit kExitUnsupported with the provider's reason, never
    an error; a NIC with raw-packet QPs would run it instead (untested here: no such NIC)."""
    run = benchrun.standalone(mode, ["--stack", "raw", "-s", "64", "--io-batch", "8", "-n", "100"], link=link,
                              timeout_s=30, bench_timeout_s=20)
    client = run.clients[0]
    assert client.returncode == kExitUnsupported, client.stderr
    assert client.error_lines == [] and len(client.unsupported_lines) == 1, client.stderr
    for fragment in expected:
        assert fragment in client.unsupported_lines[0], client.stderr
    # Both sides meet before asking their providers, so each reports its own refusal.
    assert run.server.returncode == kExitUnsupported, run.server.stderr
    assert expected[0].replace("softnic1", "softnic0") in run.server.unsupported_lines[0], run.server.stderr
    assert run.elapsed_s < 10


def test_missing_server_times_out_with_address() -> None:
    start = time.monotonic()
    port = benchrun.free_port()
    result = subprocess.run([str(benchrun.BENCH), "tput", "-d", "softnic1", "-p", str(port), "--timeout", "2",
                             "127.0.0.1"], env=benchrun.softnic_env("bench-missing", 2, "ib"),
                            capture_output=True, text=True, timeout=30)
    benchrun.remove_fabric("bench-missing")
    line = single_error(benchrun.Role([], result.returncode, result.stdout, result.stderr))
    assert f"cannot reach the rendezvous/server at 127.0.0.1:{port}" in line
    assert time.monotonic() - start < 8


def test_mismatched_symmetric_option() -> None:
    run = benchrun.standalone("tput", ["-n", "1000"], client_args=["-s", "128"], timeout_s=30)
    line = single_error(run.clients[0])
    assert "option size differs" in line and "[64]" in line and "[128]" in line
    assert "client/0 failed" in single_error(run.server)


@pytest.mark.parametrize("victim", ["client", "server"])
def test_peer_dies_mid_run(victim: str) -> None:
    """SIGKILL one side one second into a 20 s run: the survivor fails fast, naming why."""
    position = 1 if victim == "client" else 0
    run = benchrun.standalone("tput", ["-D", "20", "--warmup", "0"], timeout_s=40, bench_timeout_s=30,
                              kill_after={position: 1.0})
    survivor = run.roles[1 - position]
    line = single_error(survivor)
    if victim == "client":
        assert "participant client/0 failed: disconnected" in line
    else:
        assert "peer stopped answering" in line or "rendezvous" in line
    assert run.elapsed_s < 15, run.describe()


def test_rdma_cm_without_listener_is_rejected_within_the_timeout() -> None:
    """-R whose rdma_cm request finds no listener: the server is up (the rendezvous works) but
    on another softnic fabric, so the client's REQ meets no listener and is REJECTED at once;
    the server's wait for the request ends at its --timeout, naming what it waited for."""
    port = benchrun.free_port()
    server_fabric, client_fabric = f"bench-cm-server-{port}", f"bench-cm-client-{port}"
    common = ["tput", "-R", "-q", "2", "-p", str(port), "--timeout", "4"]
    start = time.monotonic()
    server = subprocess.Popen([str(benchrun.BENCH), *common, "-d", "softnic0"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=benchrun.softnic_env(server_fabric, 2, "ib"))
    try:
        client = subprocess.run([str(benchrun.BENCH), *common, "-d", "softnic1", "127.0.0.1"], capture_output=True,
                                text=True, timeout=30, env=benchrun.softnic_env(client_fabric, 2, "ib"))
        client_elapsed_s = time.monotonic() - start
        server_out, server_err = server.communicate(timeout=30)
    finally:
        if server.poll() is None:
            server.kill()
        benchrun.remove_fabric(server_fabric)
        benchrun.remove_fabric(client_fabric)
    line = single_error(benchrun.Role([], client.returncode, client.stdout, client.stderr))
    assert "rdma_cm connect: got RDMA_CM_EVENT_REJECTED" in line and "instead of RDMA_CM_EVENT_CONNECT_RESPONSE" in line
    assert client_elapsed_s < 4
    line = single_error(benchrun.Role([], server.returncode, server_out, server_err))
    assert "rdma_cm listen" in line or "client/0 failed" in line, line
    assert time.monotonic() - start < 10
