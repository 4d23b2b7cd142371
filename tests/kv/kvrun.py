"""Run rdmalab-kv roles on softnic from Python: a standalone server on softnic0 and one
client process per further device, every role --out_json. Process handling and fabrics
come from tests/bench/benchrun.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Sequence

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import benchrun  # noqa: E402  (after the path it lives on)

KV = Path(os.environ.get("RDMALAB_KV", Path(__file__).resolve().parents[2] / "build" / "bin" / "rdmalab-kv"))
ERROR_PREFIX = "rdmalab-kv: error:"
SCHEMA = Path(__file__).resolve().parents[2] / "kv" / "schema" / "rdmalab-kv.schema.json"
_VALIDATOR = None


def error_lines(role: benchrun.Role) -> list[str]:
    return [line for line in role.stderr.splitlines() if line.startswith(ERROR_PREFIX)]


def single_error(role: benchrun.Role) -> str:
    """The role failed with exit 1 and said why in exactly one line."""
    assert role.returncode == 1, role.stderr
    lines = error_lines(role)
    assert len(lines) == 1, role.stderr
    return lines[0]


def standalone_argvs(system: str, args: Sequence[str], client_processes: int = 1, kv_timeout_s: float = 240,
                     server_args: Sequence[str] = (), client_args: Sequence[str] = ()) -> list[list[str]]:
    """`args` go to every role (symmetric options must match); the server gets CPU 0, the
    clients CPU 1, so that the store and the clients do not take turns on one core."""
    port = benchrun.free_port()
    common = ["--system", system, *args, "-p", str(port), "--out_json", "--timeout", str(kv_timeout_s)]
    argvs = [[str(KV), "server", *common, "-d", "softnic0", "--peers", str(client_processes), "--cpus", "0",
              *server_args]]
    for i in range(client_processes):
        argvs.append([str(KV), "client", *common, "-d", f"softnic{i + 1}", "--index", str(i), "--cpus", "1",
                      *client_args, "127.0.0.1"])
    return argvs


def standalone(system: str, args: Sequence[str], client_processes: int = 1, timeout_s: float = 300,
               kv_timeout_s: float = 240, server_args: Sequence[str] = (), client_args: Sequence[str] = (),
               env: dict[str, str] | None = None, fabric: str | None = None, before_run=None) -> benchrun.Run:
    """A standalone server and its client processes, run to the end (see standalone_argvs).
    `fabric`: run in this fabric and keep it (the caller reads its counters, then removes it);
    `before_run(fabric)`: called once the fabric exists, e.g. to inject faults."""
    keep = fabric is not None
    fabric = fabric or f"kv-{uuid.uuid4().hex[:10]}"
    argvs = standalone_argvs(system, args, client_processes, kv_timeout_s, server_args, client_args)
    run_env = benchrun.softnic_env(fabric, client_processes + 1, "ib")
    run_env.update(env or {})
    try:
        if before_run is not None:
            softnic("fabric", "create", "--fabric", fabric, "--devices", str(client_processes + 1))
            before_run(fabric)
        return benchrun.run_processes(argvs, run_env, timeout_s)
    finally:
        if not keep:
            benchrun.remove_fabric(fabric)


def validate(doc: dict) -> None:
    """The document matches kv/schema/rdmalab-kv.schema.json."""
    global _VALIDATOR
    import jsonschema
    if _VALIDATOR is None:
        _VALIDATOR = jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text()))
    errors = sorted(_VALIDATOR.iter_errors(doc), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors)


def documents(run: benchrun.Run) -> list[dict]:
    """Every role exited 0 with one schema-valid rdmalab-kv/1 document; returned in role order."""
    assert run.ok, run.describe()
    docs = [json.loads(role.stdout) for role in run.roles]
    for doc in docs:
        validate(doc)
    return docs


def softnic(*args: str) -> dict:
    """Runs the softnic command; its JSON when asked for with --json."""
    out = subprocess.run([str(benchrun.SOFTNIC_CLI), *args], capture_output=True, text=True, timeout=30, check=True)
    return json.loads(out.stdout) if "--json" in args else {}


def server_alone(system: str, args: Sequence[str], timeout_s: float = 30,
                 env: dict[str, str] | None = None) -> benchrun.Role:
    """A standalone server with no client: for failures before any client could join."""
    fabric = f"kv-alone-{uuid.uuid4().hex[:10]}"
    argv = [str(KV), "server", "--system", system, *args, "-p", str(benchrun.free_port()), "-d", "softnic0",
            "--timeout", "10"]
    run_env = benchrun.softnic_env(fabric, 2, "ib")
    run_env.update(env or {})
    try:
        return benchrun.run_processes([argv], run_env, timeout_s).server
    finally:
        benchrun.remove_fabric(fabric)
