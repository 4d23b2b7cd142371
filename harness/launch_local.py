"""Launchers that start processes on this machine: `local` and `netns`.

Every role process is the leader of its own session and process group, so stopping a role
kills everything it started (killpg), and it gets SIGKILL if the harness itself dies
(PR_SET_PDEATHSIG), so no orphan survives even a `kill -9` of the coordinator.
"""
from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import time
from typing import IO, Optional, Sequence

from .inventory import Host

kTermGraceS = 1.0          # SIGTERM, then SIGKILL after this long
kPollIntervalS = 0.02
kPrSetPdeathsig = 1        # from <linux/prctl.h>

_libc = ctypes.CDLL(None, use_errno=True)


def _die_with_parent() -> None:
    _libc.prctl(kPrSetPdeathsig, signal.SIGKILL, 0, 0, 0)


class LaunchError(RuntimeError):
    pass


class Proc:
    """One started role process (on any launcher)."""

    def __init__(self, popen: subprocess.Popen, host: Host, what: str):
        self.popen = popen
        self.host = host
        self.what = what
        self.pgid = popen.pid

    def poll(self) -> Optional[int]:
        return self.popen.poll()

    def stop(self) -> None:
        """Stops the whole process group: SIGTERM, then SIGKILL; idempotent."""
        _kill_group(self.pgid, self.popen)

    def wait(self, timeout_s: float) -> Optional[int]:
        try:
            return self.popen.wait(timeout_s)
        except subprocess.TimeoutExpired:
            return None


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def _kill_group(pgid: int, popen: subprocess.Popen) -> None:
    if _group_alive(pgid):
        try:
            os.killpg(pgid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + kTermGraceS
        while time.monotonic() < deadline:
            popen.poll()  # reap the leader so the group can empty
            if not _group_alive(pgid):
                break
            time.sleep(kPollIntervalS)
        if _group_alive(pgid):
            try:
                os.killpg(pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    try:
        popen.wait(kTermGraceS * 5)
    except subprocess.TimeoutExpired:
        pass


def spawn(argv: Sequence[str], env: dict[str, str], cwd: str, stdout: IO[bytes], stderr: IO[bytes]) -> subprocess.Popen:
    try:
        return subprocess.Popen(list(argv), env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=stdout,
                                stderr=stderr, start_new_session=True, preexec_fn=_die_with_parent)
    except OSError as exc:
        raise LaunchError(f"cannot start {argv[0]}: {exc.strerror}") from None


class LocalLauncher:
    name = "local"

    def control_address(self) -> str:
        return "127.0.0.1"

    def setup(self, hosts: list[Host]) -> None:
        pass

    def teardown(self) -> None:
        pass

    def start(self, host: Host, argv: list[str], env: dict[str, str], stdout: IO[bytes], stderr: IO[bytes]) -> Proc:
        full_env = {**os.environ, **host.env, **env}
        return Proc(spawn(argv, full_env, host.workdir, stdout, stderr), host, " ".join(argv))


class NetnsLauncher(LocalLauncher):
    """Hosts are network namespaces on this machine, each with a veth into a bridge that holds
    the control address, so the rendezvous traffic really crosses a (virtual) network. Needs
    root. The namespaces and the bridge live for one run and are removed by teardown."""
    name = "netns"
    kDefaultSubnet = "10.231"

    def __init__(self, run_tag: str, subnet: str = kDefaultSubnet):
        # Interface names are at most 15 characters.
        self.tag = run_tag[-6:]
        self.subnet = subnet
        self.bridge = f"rdlbr{self.tag}"
        self.namespaces: list[str] = []
        self.links: list[str] = []
        self.ready = False

    def control_address(self) -> str:
        return f"{self.subnet}.0.1"

    def _ip(self, *args: str) -> None:
        r = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=10)
        if r.returncode != 0:
            raise LaunchError(f"ip {' '.join(args)} failed: {r.stderr.strip()}")

    def setup(self, hosts: list[Host]) -> None:
        if os.geteuid() != 0:
            raise LaunchError("the netns launcher creates network namespaces and needs root")
        if not self.ready:
            self._ip("link", "add", self.bridge, "type", "bridge")
            self.links.append(self.bridge)
            self._ip("addr", "add", f"{self.control_address()}/16", "dev", self.bridge)
            self._ip("link", "set", self.bridge, "up")
            self.ready = True
        for k in range(len(self.namespaces), len(hosts)):
            ns = f"rdl-{self.tag}-{k}"
            outside, inside = f"rdl{self.tag}h{k}", f"rdl{self.tag}n{k}"
            self._ip("netns", "add", ns)
            self.namespaces.append(ns)
            self._ip("link", "add", outside, "type", "veth", "peer", "name", inside)
            self.links.append(outside)
            self._ip("link", "set", inside, "netns", ns)
            self._ip("link", "set", outside, "master", self.bridge, "up")
            address = f"{self.subnet}.1.{k + 1}"
            self._ip("-n", ns, "addr", "add", f"{address}/16", "dev", inside)
            self._ip("-n", ns, "link", "set", inside, "up")
            self._ip("-n", ns, "link", "set", "lo", "up")
        for k, host in enumerate(hosts):
            host.address = f"{self.subnet}.1.{k + 1}"

    def teardown(self) -> None:
        for ns in self.namespaces:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=10)
        for link in reversed(self.links):
            subprocess.run(["ip", "link", "del", link], capture_output=True, timeout=10)
        self.namespaces, self.links, self.ready = [], [], False

    def start(self, host: Host, argv: list[str], env: dict[str, str], stdout: IO[bytes], stderr: IO[bytes]) -> Proc:
        k = int(host.name.removeprefix("node"))
        # `ip netns exec` execs the program, so the group leader is the role itself.
        return super().start(host, ["ip", "netns", "exec", self.namespaces[k], *argv], env, stdout, stderr)
