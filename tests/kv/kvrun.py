"""Run rdmalab-kv roles on softnic from Python: a standalone server on softnic0 and client
processes on softnic1.., each --out_json, in a fabric of their own (removed afterwards unless
the caller keeps it to read its counters). Process handling is tests/bench/benchrun.py's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Sequence

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from benchrun import SOFTNIC_CLI, Run, free_port, remove_fabric, run_processes, softnic_env  # noqa: E402

_BUILD = Path(os.environ.get("RDMALAB_BUILD_DIR", Path(__file__).resolve().parents[2] / "build"))
KV = Path(os.environ.get("RDMALAB_KV", _BUILD / "bin" / "rdmalab-kv"))
SCHEMA = Path(__file__).resolve().parents[2] / "kv" / "schema" / "rdmalab-kv.schema.json"
_VALIDATOR = None


def documents(run: Run) -> list[dict]:
    """Every role exited 0 with one schema-valid rdmalab-kv/1 document; returned in role order."""
    global _VALIDATOR
    import jsonschema
    if _VALIDATOR is None:
        _VALIDATOR = jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text()))
    assert run.ok, run.describe()
    docs = [json.loads(role.stdout) for role in run.roles]
    for doc in docs:
        errors = sorted(_VALIDATOR.iter_errors(doc), key=lambda e: list(e.path))
        assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors)
    return docs


def softnic(*args: str) -> dict:
    out = subprocess.run([str(SOFTNIC_CLI), *args], capture_output=True, text=True, timeout=30, check=True)
    return json.loads(out.stdout) if "--json" in args else {}


def standalone(system: str, args: Sequence[str], client_processes: int = 1, timeout_s: float = 120,
               server_args: Sequence[str] = (), client_args: Sequence[str] = (), kv_timeout_s: float = 90,
               fabric: str | None = None, before_run=None) -> Run:
    """The server pinned to CPU 0, clients to CPU 1 (the acceptance layout on a 2-core host).
    `fabric`: keep this fabric (the caller removes it); `before_run(fabric)`: e.g. set faults."""
    keep = fabric is not None
    fabric = fabric or f"kv-{uuid.uuid4().hex[:10]}"
    port = free_port()
    common = ["--system", system, *args, "-p", str(port), "--out_json", "--timeout", str(kv_timeout_s)]
    argvs = [[str(KV), "server", *common, "-d", "softnic0", "--peers", str(client_processes), "--cpus", "0",
              *server_args]]
    for i in range(client_processes):
        argvs.append([str(KV), "client", *common, "-d", f"softnic{i + 1}", "--index", str(i), "--cpus", "1",
                      *client_args, "127.0.0.1"])
    env = softnic_env(fabric, client_processes + 1, "ib")
    try:
        if before_run is not None:
            softnic("fabric", "create", "--fabric", fabric, "--devices", str(client_processes + 1))
            before_run(fabric)
        return run_processes(argvs, env, timeout_s)
    finally:
        if not keep:
            remove_fabric(fabric)
