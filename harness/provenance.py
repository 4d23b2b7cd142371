"""Provenance of a point: where the code, the binaries and the devices came from."""
from __future__ import annotations

import functools
import hashlib
import os
import pathlib
import platform
import socket
import subprocess
import sys
from typing import Any

kHarnessVersion = "1.0"


def _git(root: pathlib.Path, *args: str) -> str:
    try:
        r = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10)
        return r.stdout.strip() if r.returncode == 0 else ""
    except (OSError, subprocess.TimeoutExpired):
        return ""


@functools.lru_cache(maxsize=4)
def static(root: pathlib.Path) -> dict[str, Any]:
    """Facts that do not change during a run (computed once)."""
    status = _git(root, "status", "--porcelain", "--untracked-files=no")
    return {"git": {"revision": _git(root, "rev-parse", "HEAD") or None, "dirty": bool(status)},
            "harness": {"version": kHarnessVersion, "python": sys.version.split()[0]},
            "coordinator": {"host": socket.gethostname(), "kernel": platform.release(), "cores": os.cpu_count()}}


@functools.lru_cache(maxsize=32)
def file_sha256(path: str) -> str | None:
    try:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        return h.hexdigest()
    except OSError:
        return None


def from_documents(roles: list[dict[str, Any]], binary: str, bin_dir: pathlib.Path) -> dict[str, Any]:
    """Device attributes, provider library and binary version, as the role documents report them."""
    devices, providers, versions = {}, set(), set()
    for r in roles:
        doc = r.get("document") or {}
        env = doc.get("environment") or {}
        if env.get("device") is not None:
            devices[f"{r['role']}/{r['index']}"] = env["device"]
        if env.get("provider_library"):
            providers.add(env["provider_library"])
        tool = doc.get("tool") or {}
        if tool.get("version"):
            versions.add(f"{tool.get('name', '?')} {tool['version']}")
    path = binary if pathlib.Path(binary).is_absolute() else str(bin_dir / binary)
    return {"devices": devices, "provider_library": sorted(providers),
            "binary": {"path": path, "sha256": file_sha256(path), "versions": sorted(versions)}}
