"""Runs mpi_pingpong.c under MPICH or Open MPI (Debian's packages, both over UCX), on softnic's
rc_verbs or on UCX's shared memory: shared by compare_mpi.py and tests/integration/test_mpi.py.

On softnic the whole job runs under `softnic run --device-nodes` (UCX takes a verbs device only
if its /dev/infiniband node exists), both ranks on softnic0, with UCX_TLS=rc_verbs,ud_verbs,self:
two processes sharing one NIC, as two ranks on one host do. Open MPI's pml ucx takes a device
only if it is named in opal_common_ucx_devices (mlx* by default), so that is set to any; its
btls other than self are excluded, so every message goes through UCX.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Sequence

SOURCE = Path(__file__).resolve().parent / "mpi_pingpong.c"
MPIS = {
    "mpich": {"cc": "mpicc.mpich", "run": ["mpiexec.mpich", "-n", "2"]},
    "openmpi": {"cc": "mpicc.openmpi", "run": ["mpirun.openmpi", "-n", "2", "--oversubscribe", "--mca", "pml", "ucx",
                                               "--mca", "btl", "self", "--mca", "opal_common_ucx_devices", "any"]},
}
TRANSPORTS = {
    "rc_verbs": {"UCX_TLS": "rc_verbs,ud_verbs,self", "UCX_NET_DEVICES": "softnic0:1"},
    "posix": {"UCX_TLS": "posix,self"},
}
# Open MPI refuses root unless told twice; harmless for any other user.
_OPENMPI_ROOT = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


class MpiError(Exception):
    pass


def missing(mpi: str) -> str | None:
    """Which program of `mpi` is not installed, or None."""
    for program in (MPIS[mpi]["cc"], MPIS[mpi]["run"][0]):
        if shutil.which(program) is None:
            return program
    return None


def build(mpi: str, directory: Path) -> Path:
    """mpi_pingpong compiled with `mpi`'s compiler wrapper into `directory`."""
    binary = directory / f"mpi_pingpong.{mpi}"
    argv = [MPIS[mpi]["cc"], "-O2", "-Wall", "-Wextra", "-Werror", "-o", str(binary), str(SOURCE)]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        raise MpiError(f"{' '.join(argv)} failed ({result.returncode}): {result.stderr.strip()}")
    return binary


@dataclasses.dataclass
class Job:
    argv: list[str]
    env: dict[str, str]


def job(mpi: str, transport: str, binary: Path, args: Sequence[str], softnic_cli: Path | None = None,
        fabric: str | None = None, prefix: Sequence[str] = ()) -> Job:
    """The command and environment of one 2-rank run. rc_verbs needs softnic's CLI and a fabric
    name; `prefix` goes in front of everything (run_as.argv's setpriv)."""
    env = dict(os.environ, **TRANSPORTS[transport], **(_OPENMPI_ROOT if mpi == "openmpi" else {}))
    run = list(MPIS[mpi]["run"])
    if mpi == "openmpi":
        for name in TRANSPORTS[transport]:
            run += ["-x", name]
    argv = list(prefix)
    if transport == "rc_verbs":
        if softnic_cli is None or fabric is None:
            raise ValueError("rc_verbs runs on softnic: give softnic_cli and fabric")
        argv += [str(softnic_cli), "run", "--fabric", fabric, "--devices", "2", "--device-nodes", "--"]
    argv += run + [str(binary)] + list(args)
    return Job(argv, env)


def run(j: Job, timeout_s: float) -> dict:
    """Runs `j` and returns rank 0's JSON document; MpiError names the command and its output."""
    try:
        result = subprocess.run(j.argv, env=j.env, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as e:
        raise MpiError(f"{' '.join(j.argv)}: no end within {timeout_s:.0f} s; output: {e.stdout!r} {e.stderr!r}")
    if result.returncode != 0:
        raise MpiError(f"{' '.join(j.argv)} exited {result.returncode}: {result.stdout.strip()} {result.stderr.strip()}")
    line = next((l for l in result.stdout.splitlines() if l.startswith("{")), None)
    try:
        return json.loads(line) if line else {}
    except json.JSONDecodeError as e:
        raise MpiError(f"{' '.join(j.argv)}: unparsable output ({e}): {result.stdout!r}")


def expected_messages(min_bytes: int, max_bytes: int, check: int) -> int:
    """Checked messages of a run: 2 rounds of `check` round trips (2 messages each) per size."""
    sizes = 0
    size = min_bytes
    while size <= max_bytes:
        sizes += 1
        size *= 2
    return sizes * 2 * check * 2
