"""Run a server/client pair of third-party tools (perftest, ibv_*_pingpong, ucx_perftest)
that do their own TCP handshake on 127.0.0.1.

The client starts only once the server listens on its port (seen in the server's
/proc/PID/net/tcp*, which is also right for a server in a network namespace of its own, as
under `softnic run --netdevs`), never after a fixed sleep. Each process runs in its own process group; on timeout or
error both groups are killed. Used by compare_ucx.py and tests/integration.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import socket
import subprocess
import tempfile
import time
from typing import Mapping, Sequence

_TCP_LISTEN = "0A"
_POLL_INTERVAL_S = 0.005
# After the client has failed, how long the server may take to notice before it is killed.
_SERVER_GRACE_AFTER_CLIENT_FAILURE_S = 3.0


@dataclasses.dataclass
class ProcResult:
    argv: list[str]
    returncode: int | None  # negative: killed by that signal; None: never started
    output: str  # stdout and stderr, interleaved


@dataclasses.dataclass
class PairResult:
    server: ProcResult
    client: ProcResult
    timed_out: bool
    elapsed_s: float

    @property
    def ok(self) -> bool:
        return not self.timed_out and self.server.returncode == 0 and self.client.returncode == 0

    def describe(self) -> str:
        """A failure report: both commands, exit codes and outputs."""
        parts = [f"timed out: {self.timed_out}, elapsed {self.elapsed_s:.1f} s"]
        for role, r in (("server", self.server), ("client", self.client)):
            parts.append(f"--- {role}: {' '.join(r.argv)}\n--- exit code: {r.returncode}\n{r.output.rstrip()}")
        return "\n".join(parts)


def free_port() -> int:
    """A TCP port that was free a moment ago (the kernel's choice for port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening_ports(pid: int) -> set[int]:
    """The ports listened on in the network namespace of process `pid`."""
    ports = set()
    for table in ("tcp", "tcp6"):
        try:
            with open(f"/proc/{pid}/net/{table}") as f:
                next(f)
                for line in f:
                    fields = line.split()
                    if len(fields) > 3 and fields[3] == _TCP_LISTEN:
                        ports.add(int(fields[1].rsplit(":", 1)[1], 16))
        except OSError:  # no IPv6, or the process has exited
            continue
    return ports


def wait_listening(port: int, proc: subprocess.Popen, deadline: float) -> bool:
    """True once something listens on `port` where `proc` runs; False if `proc` exits or
    the deadline passes."""
    while time.monotonic() < deadline:
        if port in _listening_ports(proc.pid):
            return True
        if proc.poll() is not None:
            return False
        time.sleep(_POLL_INTERVAL_S)
    return False


def _kill_group(proc: subprocess.Popen) -> None:
    """Kills what is left of the group `proc` leads (it may have exited, leaving children)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def _wait(proc: subprocess.Popen, deadline: float) -> bool:
    try:
        proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        return True
    except subprocess.TimeoutExpired:
        return False


def _start(argv: Sequence[str], env: Mapping[str, str], out) -> subprocess.Popen:
    return subprocess.Popen(list(argv), env=dict(env), stdout=out, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True)


def run_pair(server_argv: Sequence[str], client_argv: Sequence[str], port: int,
             env: Mapping[str, str], timeout_s: float = 60.0,
             client_env: Mapping[str, str] | None = None) -> PairResult:
    """Start the server, wait until it listens on `port`, run the client, wait for both.

    The whole pair gets `timeout_s`; on expiry both process groups are killed (exit code
    -9) and the result says timed_out. `client_env` defaults to `env`.
    """
    start = time.monotonic()
    deadline = start + timeout_s
    timed_out = False
    with tempfile.TemporaryFile("w+") as sout, tempfile.TemporaryFile("w+") as cout:
        server = _start(server_argv, env, sout)
        client = None
        try:
            if not wait_listening(port, server, deadline):
                timed_out = server.poll() is None
            else:
                client = _start(client_argv, env if client_env is None else client_env, cout)
                if not _wait(client, deadline):
                    timed_out = True
                elif client.returncode == 0:
                    timed_out = not _wait(server, deadline)
                else:
                    _wait(server, min(deadline, time.monotonic() + _SERVER_GRACE_AFTER_CLIENT_FAILURE_S))
        finally:
            for p in (client, server):
                if p is not None:
                    _kill_group(p)
        sout.seek(0)
        cout.seek(0)
        s_res = ProcResult(list(server_argv), server.returncode, sout.read())
        if client is None:
            c_res = ProcResult(list(client_argv), None,
                               f"(not started: the server did not listen on port {port})")
        else:
            c_res = ProcResult(list(client_argv), client.returncode, cout.read())
    return PairResult(s_res, c_res, timed_out, time.monotonic() - start)


def run_one(argv: Sequence[str], env: Mapping[str, str], timeout_s: float = 60.0) -> ProcResult:
    """Run a single process in its own group; killed (exit code -9) on timeout."""
    with tempfile.TemporaryFile("w+") as out:
        p = _start(argv, env, out)
        _wait(p, time.monotonic() + timeout_s)
        _kill_group(p)
        out.seek(0)
        return ProcResult(list(argv), p.returncode, out.read())
