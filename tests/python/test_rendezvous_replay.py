"""Recorded rendezvous exchanges (contract 2, docs/contracts.md) replayed against both servers.

The rendezvous server exists twice: harness/rendezvous.py (the harness runs it for every
point) and rdma/rendezvous.cc (a standalone rdmalab-bench server embeds it). Both speak one
protocol: every exchange expects the same replies, error texts included, from either. Each
exchange under tests/python/data/rendezvous/ is a JSON-lines file: a header, then one step a
line, in an order in which every reply follows the requests that cause it:

  {"point": P, "conn": NAME, "send": {...}}      write one request line on connection NAME
  {"point": P, "conn": NAME, "send_line": "..."} write this text and a newline (a malformed request)
  {"point": P, "conn": NAME, "recv": {...}}      read one reply line; it must equal the recorded one
  {"point": P, "conn": NAME, "quiet_ms": T}      nothing arrives on NAME for T ms (a wait still waits)
  {"point": P, "conn": NAME, "eof": true}        the server closes the connection
  {"point": P, "conn": NAME, "close": true}      the participant closes it (after bye, fail, or as a crash)

Each point gets a fresh server. Every read has a deadline; a replay takes a few seconds.
The C++ server runs in build/bin/rendezvous_serve (tests/unit/rendezvous_serve.cc; another
build directory: RDMALAB_BIN_DIR).
"""
from __future__ import annotations

import json
import os
import pathlib
import select
import socket
import subprocess
import time
from typing import Any, Callable, Iterator

import pytest

from harness.rendezvous import RendezvousServer

kRoot = pathlib.Path(__file__).resolve().parents[2]
kData = pathlib.Path(__file__).resolve().parent / "data" / "rendezvous"
kExchanges = sorted(kData.glob("*.jsonl"))
kBinDir = pathlib.Path(os.environ.get("RDMALAB_BIN_DIR", kRoot / "build" / "bin"))
kServeBin = kBinDir / "rendezvous_serve"
kStepTimeoutS = 3.0          # a reply or an end of connection must come within this
kServeDeadlineS = 30         # rendezvous_serve exits by itself after this, whatever happens here
kReplyKeys = {"ok", "value", "error"}

Server = Callable[[str], Iterator[str]]   # token -> context yielding "HOST:PORT"


def load(path: pathlib.Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    assert lines and lines[0].get("exchange") == "rdmalab-rendezvous-exchange/1", f"{path}: no header"
    return lines[0], lines[1:]


class _Conn:
    def __init__(self, address: str, name: str):
        host, _, port = address.rpartition(":")
        self.name = name
        self.sock = socket.create_connection((host, int(port)), timeout=kStepTimeoutS)
        self.buffer = b""

    def send(self, msg: dict[str, Any]) -> None:
        self.sock.sendall(json.dumps(msg).encode() + b"\n")

    def read_line(self, where: str) -> bytes:
        """One line, or b"" at the end of the connection; fails after kStepTimeoutS."""
        deadline = time.monotonic() + kStepTimeoutS
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.sock], [], [], left)[0]:
                pytest.fail(f"{where}: nothing from the server within {kStepTimeoutS} s")
            try:
                chunk = self.sock.recv(4096)
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                return b""
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line


def check_reply(where: str, got: dict[str, Any], want: dict[str, Any]) -> None:
    assert isinstance(got, dict) and set(got) <= kReplyKeys, f"{where}: reply {got} has keys outside {kReplyKeys}"
    assert got == want, f"{where}: expected {want}, got {got}"


def replay(path: pathlib.Path, server: Server) -> int:
    """Replays every point of an exchange against fresh servers; returns the number of steps."""
    head, steps = load(path)
    points: dict[int, list[dict[str, Any]]] = {}
    for step in steps:
        points.setdefault(step["point"], []).append(step)
    for point, point_steps in points.items():
        with server(head["token"]) as address:
            conns: dict[str, _Conn] = {}
            try:
                for n, step in enumerate(point_steps):
                    name = step["conn"]
                    where = f"{path.name} point {point} step {n} ({name})"
                    if "send" in step or "send_line" in step:
                        if name not in conns:
                            conns[name] = _Conn(address, name)
                        if "send" in step:
                            conns[name].send(step["send"])
                        else:
                            conns[name].sock.sendall(step["send_line"].encode() + b"\n")
                    elif "recv" in step:
                        line = conns[name].read_line(where)
                        assert line, f"{where}: the server closed the connection; expected {step['recv']}"
                        check_reply(where, json.loads(line), step["recv"])
                    elif "quiet_ms" in step:
                        c = conns[name]
                        ready = select.select([c.sock], [], [], step["quiet_ms"] / 1000.0)[0]
                        assert not c.buffer and not ready, f"{where}: the server answered within {step['quiet_ms']} ms"
                    elif step.get("eof"):
                        line = conns[name].read_line(where)
                        assert line == b"", f"{where}: expected the server to close the connection, got {line!r}"
                    elif step.get("close"):
                        conns.pop(name).sock.close()
                    else:
                        raise AssertionError(f"{where}: unknown step {step}")
            finally:
                for c in conns.values():
                    c.sock.close()
    return len(steps)


class python_server:
    def __init__(self, token: str):
        self.rv = RendezvousServer(host="127.0.0.1", token=token)

    def __enter__(self) -> str:
        return self.rv.start().address

    def __exit__(self, *exc: object) -> None:
        self.rv.close()


class cpp_server:
    def __init__(self, token: str):
        self.token = token
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> str:
        self.proc = subprocess.Popen([str(kServeBin), self.token, "0", str(kServeDeadlineS)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert self.proc.stdout is not None
        ready = select.select([self.proc.stdout], [], [], kStepTimeoutS)[0]
        line = self.proc.stdout.readline().decode() if ready else ""
        if not line.startswith("port "):
            self.__exit__()
            pytest.fail(f"rendezvous_serve printed {line!r}, expected 'port N'")
        return f"127.0.0.1:{int(line.split()[1])}"

    def __exit__(self, *exc: object) -> None:
        assert self.proc is not None
        self.proc.stdin.close()  # type: ignore[union-attr]
        try:
            self.proc.wait(kStepTimeoutS)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()  # type: ignore[union-attr]
        self.proc.stderr.close()  # type: ignore[union-attr]


def test_exchanges_exist():
    names = {p.name for p in kExchanges}
    assert {"bench-lat-run.jsonl", "protocol-cases.jsonl"} <= names, f"recordings missing from {kData}: {names}"


@pytest.mark.parametrize("path", kExchanges, ids=lambda p: p.stem)
def test_python_server(path):
    assert replay(path, python_server) > 0


@pytest.mark.parametrize("path", kExchanges, ids=lambda p: p.stem)
def test_cpp_server(path):
    if not kServeBin.exists():
        pytest.skip(f"{kServeBin} is not built (cmake --build build --target rendezvous_serve)")
    assert replay(path, cpp_server) > 0


kLongLine = "x" * ((1 << 20) + 1)   # one byte over the line limit of both servers


def long_line_exchange(tmp_path: pathlib.Path) -> pathlib.Path:
    """A line over 1 MiB ends its connection and, once hello'd, aborts the point (too big to keep as data)."""
    token = "long-line-token"
    steps = [
        {"conn": "server/0", "send": {"op": "hello", "token": token, "role": "server", "index": 0}},
        {"conn": "server/0", "recv": {"ok": True}},
        {"conn": "client/0", "send": {"op": "hello", "token": token, "role": "client", "index": 0}},
        {"conn": "client/0", "recv": {"ok": True}},
        {"conn": "client/0", "send": {"op": "get", "key": "server/0/endpoint", "timeout_ms": 5000}},
        {"conn": "server/0", "send_line": kLongLine},
        {"conn": "server/0", "recv": {"ok": False, "error": "line longer than 1048576 bytes"}},
        {"conn": "server/0", "eof": True},
        {"conn": "client/0", "recv": {"ok": False, "error": "participant server/0 failed: disconnected"}},
        {"conn": "server/0", "close": True},
        {"conn": "client/0", "send": {"op": "bye"}},
        {"conn": "client/0", "recv": {"ok": True}},
        {"conn": "client/0", "eof": True},
        {"conn": "client/0", "close": True},
    ]
    path = tmp_path / "long-line.jsonl"
    head = {"exchange": "rdmalab-rendezvous-exchange/1", "token": token, "source": "test_rendezvous_replay.py"}
    path.write_text("\n".join(json.dumps(s) for s in [head, *({"point": 0, **s} for s in steps)]) + "\n")
    return path


def test_long_line_python_server(tmp_path):
    assert replay(long_line_exchange(tmp_path), python_server) > 0


def test_long_line_cpp_server(tmp_path):
    if not kServeBin.exists():
        pytest.skip(f"{kServeBin} is not built (cmake --build build --target rendezvous_serve)")
    assert replay(long_line_exchange(tmp_path), cpp_server) > 0
