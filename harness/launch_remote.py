"""Launchers that start role processes on other machines: `ssh` and `slurm`.

ssh: the OpenSSH client in batch mode (keys or an agent only: a password prompt is a
failure, never a hang), one master connection per host reused by every role and point
(ControlMaster). sshd makes the remote shell a session leader, so the remote command first
prints its pid, which is its process-group id, then execs the role; stopping a role kills
that remote group over the master connection, then the local client.

slurm: `srun` onto the inventory's node (-w), one task per role process, inside the
caller's allocation if there is one. The role's environment reaches it with --export=ALL.
"""
from __future__ import annotations

import os
import pathlib
import re
import shlex
import subprocess
import time
from typing import IO, Optional

from .inventory import Host
from .launch_local import LocalLauncher, Proc, spawn

kSshConnectTimeoutS = 5
kControlPersistS = 60
kRemoteKillTimeoutS = 10
kPgidLine = re.compile(rb"^RDMALAB_PGID=(\d+)$", re.M)
kPgidWaitS = 2.0


class SshProc(Proc):
    def __init__(self, popen: subprocess.Popen, host: Host, what: str, launcher: "SshLauncher", stderr_path: str):
        super().__init__(popen, host, what)
        self.launcher = launcher
        self.stderr_path = stderr_path

    def remote_pgid(self) -> Optional[int]:
        try:
            head = pathlib.Path(self.stderr_path).read_bytes()[:4096]
        except OSError:
            return None
        m = kPgidLine.search(head)
        return int(m.group(1)) if m else None

    def stop(self) -> None:
        pgid = self.remote_pgid()
        if pgid is None and self.poll() is None:
            deadline = time.monotonic() + kPgidWaitS   # the line may be in flight
            while pgid is None and time.monotonic() < deadline and self.poll() is None:
                time.sleep(0.05)
                pgid = self.remote_pgid()
        if pgid is not None:
            # TERM, a grace second, then KILL: the remote group, whatever the local client does.
            script = (f"kill -TERM -- -{pgid} 2>/dev/null; for i in 1 2 3 4 5 6 7 8 9 10; do "
                      f"kill -0 -- -{pgid} 2>/dev/null || exit 0; sleep 0.1; done; kill -KILL -- -{pgid} 2>/dev/null; exit 0")
            try:
                subprocess.run(self.launcher.ssh_argv(self.host) + [script], stdin=subprocess.DEVNULL,
                               capture_output=True, timeout=kRemoteKillTimeoutS)
            except subprocess.TimeoutExpired:
                pass
        super().stop()


class SshLauncher(LocalLauncher):
    name = "ssh"

    def __init__(self, control_address: str, control_dir: str):
        self._control_address = control_address
        self.control_dir = control_dir
        self.used: dict[str, Host] = {}

    def control_address(self) -> str:
        return self._control_address

    def ssh_argv(self, host: Host) -> list[str]:
        argv = ["ssh", "-T", "-o", "BatchMode=yes", "-o", f"ConnectTimeout={kSshConnectTimeoutS}",
                "-o", "ControlMaster=auto", "-o", f"ControlPath={self.control_dir}/%C",
                "-o", f"ControlPersist={kControlPersistS}", "-p", str(host.ssh_port)]
        if host.identity:
            argv += ["-i", os.path.expanduser(host.identity), "-o", "IdentitiesOnly=yes"]
        for opt in host.ssh_options:
            argv += ["-o", opt]
        target = f"{host.user}@{host.address}" if host.user else host.address
        return argv + [target, "--"]

    def remote_command(self, host: Host, argv: list[str], env: dict[str, str]) -> str:
        assigns = " ".join(shlex.quote(f"{k}={v}") for k, v in {**host.env, **env}.items())
        return (f"echo RDMALAB_PGID=$$ >&2; cd {shlex.quote(host.workdir)} && "
                f"exec env {assigns} {' '.join(shlex.quote(a) for a in argv)}")

    def start(self, host: Host, argv: list[str], env: dict[str, str], stdout: IO[bytes], stderr: IO[bytes]) -> Proc:
        self.used[host.name] = host
        ssh = self.ssh_argv(host) + [self.remote_command(host, argv, env)]
        popen = spawn(ssh, dict(os.environ), "/", stdout, stderr)
        return SshProc(popen, host, " ".join(argv), self, stderr.name)

    def teardown(self) -> None:
        for host in self.used.values():
            argv = self.ssh_argv(host)
            argv.insert(1, "-O")
            argv.insert(2, "exit")
            subprocess.run(argv[:-1], stdin=subprocess.DEVNULL, capture_output=True, timeout=kRemoteKillTimeoutS)
        self.used.clear()


class SlurmProc(Proc):
    def __init__(self, popen: subprocess.Popen, host: Host, what: str, job_name: str):
        super().__init__(popen, host, what)
        self.job_name = job_name

    def stop(self) -> None:
        # srun forwards SIGTERM to the task and ends the step. A task that ignores it would live
        # until slurmd's KillWait, so the job's steps also get SIGKILL, then the job is cancelled.
        super().stop()
        for extra in (["--signal=KILL"], []):
            subprocess.run(["scancel", *extra, f"--name={self.job_name}"], capture_output=True,
                           timeout=kRemoteKillTimeoutS)


class SlurmLauncher(LocalLauncher):
    name = "slurm"

    def __init__(self, control_address: str, run_tag: str, srun: str = "srun"):
        self._control_address = control_address
        self.run_tag = run_tag
        self.srun = srun
        self.counter = 0

    def control_address(self) -> str:
        return self._control_address

    def srun_argv(self, host: Host, job_name: str) -> list[str]:
        return [self.srun, "--nodes=1", "--ntasks=1", f"--nodelist={host.slurm_node or host.name}",
                f"--job-name={job_name}", "--kill-on-bad-exit=1", "--export=ALL", "--quiet",
                f"--chdir={host.workdir}"]

    def start(self, host: Host, argv: list[str], env: dict[str, str], stdout: IO[bytes], stderr: IO[bytes]) -> Proc:
        self.counter += 1
        job_name = f"rdmalab-{self.run_tag}-{self.counter}"
        full_env = {**os.environ, **host.env, **env}
        popen = spawn(self.srun_argv(host, job_name) + argv, full_env, "/", stdout, stderr)
        return SlurmProc(popen, host, " ".join(argv), job_name)


def unreachable_reason(proc: Proc, exit_code: int, stderr_tail: str) -> Optional[str]:
    """ssh exits 255 for its own failures (connection refused, no route, auth)."""
    if isinstance(proc, SshProc) and exit_code == 255 and proc.remote_pgid() is None:
        last = [ln for ln in stderr_tail.splitlines() if ln.strip()]
        return f"host {proc.host.name} ({proc.host.address}) unreachable over ssh: {last[-1] if last else 'ssh exit 255'}"
    return None

