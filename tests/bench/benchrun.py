"""Run rdmalab-bench roles on softnic from Python: a standalone server and its clients
(perftest style), or any set of roles under a rendezvous (coordinator style).

Each role gets its own softnic device (softnic0 = server or node 0, then one per
client), its own process group, and the run a fabric of its own, removed afterwards.
Nothing sleeps to synchronize: clients retry their connection until the server listens.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import socket
import subprocess
import time
import uuid
from pathlib import Path
from typing import Sequence

_BUILD = Path(os.environ.get("RDMALAB_BUILD_DIR", Path(__file__).resolve().parents[2] / "build"))
BENCH = Path(os.environ.get("RDMALAB_BENCH", _BUILD / "bin" / "rdmalab-bench"))
SOFTNIC_CLI = Path(os.environ.get("SOFTNIC_CLI", _BUILD / "bin" / "softnic"))
SOFTNIC_LIBRARY_DIR = Path(os.environ.get("SOFTNIC_LIBRARY_DIR", _BUILD / "lib" / "softnic"))
SCHEMA = Path(__file__).resolve().parents[2] / "benchmarks" / "schema" / "rdmalab-bench.schema.json"
_KILL_GRACE_S = 2.0


@dataclasses.dataclass
class Role:
    argv: list[str]
    returncode: int | None
    stdout: str
    stderr: str

    @property
    def document(self) -> dict:
        return json.loads(self.stdout)

    @property
    def error_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.startswith("rdmalab-bench: error:")]

    @property
    def unsupported_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.startswith("rdmalab-bench: unsupported:")]


@dataclasses.dataclass
class Run:
    roles: list[Role]
    elapsed_s: float

    @property
    def ok(self) -> bool:
        return all(r.returncode == 0 for r in self.roles)

    def describe(self) -> str:
        return "\n".join(f"--- {' '.join(r.argv)}\n--- exit {r.returncode}\n{r.stderr.rstrip()}" for r in self.roles)

    @property
    def server(self) -> Role:
        return self.roles[0]

    @property
    def clients(self) -> list[Role]:
        return self.roles[1:]


_VALIDATOR = None


def check_documents(run: Run) -> list[dict]:
    """Every role exited 0 and printed one JSON document that validates against the schema
    and reports no failed validation; returns the documents in role order."""
    global _VALIDATOR
    import jsonschema
    if _VALIDATOR is None:
        _VALIDATOR = jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text()))
    assert run.ok, run.describe()
    documents = [role.document for role in run.roles]
    for document in documents:
        errors = sorted(_VALIDATOR.iter_errors(document), key=lambda e: list(e.path))
        assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors)
        assert document["validation"].get("ok", True), document["validation"]
    return documents


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def softnic_env(fabric: str, devices: int, link: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(LD_LIBRARY_PATH=str(SOFTNIC_LIBRARY_DIR), SOFTNIC_FABRIC=fabric, SOFTNIC_DEVICES=str(devices),
               SOFTNIC_LINK=link)
    return env


def remove_fabric(fabric: str) -> None:
    subprocess.run([str(SOFTNIC_CLI), "fabric", "rm", "--fabric", fabric], capture_output=True, timeout=30)


def run_processes(argvs: Sequence[Sequence[str]], env: dict[str, str], timeout_s: float,
                  kill_after: dict[int, float] | None = None) -> Run:
    """Starts every argv at once; waits up to timeout_s; kills what is left (whole groups).
    kill_after maps a process position to seconds after which it gets SIGKILL (a peer dying)."""
    start = time.monotonic()
    procs = [subprocess.Popen(list(a), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              start_new_session=True) for a in argvs]
    outputs: dict[int, tuple[str, str]] = {}
    try:
        for position, seconds in (kill_after or {}).items():
            try:
                procs[position].wait(max(0.0, start + seconds - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(procs[position].pid, signal.SIGKILL)
        for i, p in enumerate(procs):
            remaining = max(0.1, start + timeout_s - time.monotonic())
            try:
                outputs[i] = p.communicate(timeout=remaining)
            except subprocess.TimeoutExpired:
                pass
    finally:
        for i, p in enumerate(procs):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
            if i not in outputs:
                try:
                    outputs[i] = p.communicate(timeout=_KILL_GRACE_S)
                except subprocess.TimeoutExpired:
                    outputs[i] = ("", "")
    return Run([Role(list(a), p.returncode, *outputs[i]) for i, (a, p) in enumerate(zip(argvs, procs))],
               time.monotonic() - start)


def standalone(mode: str, args: Sequence[str], clients: int = 1, link: str = "ib", timeout_s: float = 60,
               server_args: Sequence[str] = (), client_args: Sequence[str] = (), bench_timeout_s: float = 30,
               kill_after: dict[int, float] | None = None) -> Run:
    """A standalone server on softnic0 and `clients` clients on softnic1.., all --out_json."""
    fabric = f"bench-{uuid.uuid4().hex[:10]}"
    port = free_port()
    common = [mode, *args, "-p", str(port), "--out_json", "--timeout", str(bench_timeout_s)]
    argvs = [[str(BENCH), *common, "-d", "softnic0", "--peers", str(clients), *server_args]]
    for i in range(clients):
        argvs.append([str(BENCH), *common, "-d", f"softnic{i + 1}", "--index", str(i), *client_args, "127.0.0.1"])
    try:
        return run_processes(argvs, softnic_env(fabric, clients + 1, link), timeout_s, kill_after)
    finally:
        remove_fabric(fabric)


def coordinated(mode: str, args: Sequence[str], roles: Sequence[tuple[str, int]], link: str = "ib",
                timeout_s: float = 60, bench_timeout_s: float = 30) -> Run:
    """Roles (name, count) under the harness's rendezvous server; devices in role order."""
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from harness.rendezvous import RendezvousServer  # the coordinator's own server

    fabric = f"bench-{uuid.uuid4().hex[:10]}"
    counts = dict(roles)
    total = sum(counts.values())
    argvs = []
    device = 0
    for name, count in roles:
        peers = total if name == "node" else (counts.get("client", 0) if name == "server" else counts.get("server", 1))
        for index in range(count):
            argvs.append([str(BENCH), mode, *args, "-d", f"softnic{device}", "--role", name, "--index", str(index),
                          "--peers", str(peers), "--out_json", "--timeout", str(bench_timeout_s)])
            device += 1
    with RendezvousServer(host="127.0.0.1") as rendezvous:
        env = softnic_env(fabric, total, link)
        env["RDMALAB_RENDEZVOUS_TOKEN"] = rendezvous.token
        argvs = [[*a[:2], "--rendezvous", rendezvous.address, *a[2:]] for a in argvs]
        try:
            return run_processes(argvs, env, timeout_s)
        finally:
            remove_fabric(fabric)
