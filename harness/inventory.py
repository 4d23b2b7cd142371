"""Cluster inventories: which hosts exist, how to reach them, which RDMA device each uses.

A file (YAML) lists hosts; two built-in inventories need no file:
  local   - N emulated nodes on this machine, node K uses softnic device softnicK
  netns   - N network-namespace hosts the harness creates on this machine (root), same devices
"""
from __future__ import annotations

import dataclasses
import pathlib
from typing import Any, Optional

from . import yamlloc
from .checker import Checker
from .yamlloc import ConfigError

kLaunchers = ("local", "netns", "ssh", "slurm")
kBuiltin = ("local", "netns")
kMaxSoftnicDevices = 256    # softnic's limit on devices per fabric (softnic/fabric/layout.h kMaxDevices)

HOST_KEYS = {
    "name": ("string", True, "host name used in results"),
    "launcher": ("string", False, f"{'|'.join(kLaunchers)} (default: the inventory's)"),
    "address": ("string", False, "address or DNS name (ssh target; netns: assigned if absent)"),
    "device": ("string", False, "RDMA device, passed as -d (default softnic<K> on softnic)"),
    "port": ("integer", False, "device port, passed as -i (default 1)"),
    "gid_index": ("integer", False, "GID index, passed as -x (RoCE; default: not passed)"),
    "numa": ("integer", False, "NUMA node to bind the role to with numactl (default: no binding)"),
    "bin_dir": ("string", False, "directory holding rdmalab-bench and softnic on that host"),
    "workdir": ("string", False, "working directory of the role on that host (default /tmp)"),
    "user": ("string", False, "ssh user"),
    "ssh_port": ("integer", False, "ssh port (default 22)"),
    "identity": ("string", False, "ssh private key file (no passwords are ever stored)"),
    "ssh_options": ("list", False, "extra ssh -o options, e.g. [StrictHostKeyChecking=accept-new]"),
    "slurm_node": ("string", False, "slurm node name for srun -w (default: name)"),
    "env": ("mapping", False, "extra environment for roles on that host"),
}
INVENTORY_KEYS = {
    "name": ("string", True, "inventory name"),
    "launcher": ("string", False, "default launcher of its hosts (default ssh)"),
    "control_address": ("string", True, "this machine's address on the control network; the rendezvous binds here"),
    "defaults": ("mapping", False, "host keys applied to every host"),
    "hosts": ("list", True, "the hosts (see host keys)"),
}


@dataclasses.dataclass
class Host:
    name: str
    launcher: str
    address: str = "127.0.0.1"
    device: Optional[str] = None
    port: int = 1
    gid_index: Optional[int] = None
    numa: Optional[int] = None
    bin_dir: Optional[str] = None
    workdir: str = "/tmp"
    user: Optional[str] = None
    ssh_port: int = 22
    identity: Optional[str] = None
    ssh_options: list[str] = dataclasses.field(default_factory=list)
    slurm_node: Optional[str] = None
    env: dict[str, str] = dataclasses.field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "launcher": self.launcher, "address": self.address, "device": self.device,
                "port": self.port, "gid_index": self.gid_index, "numa": self.numa}


@dataclasses.dataclass
class Inventory:
    name: str
    control_address: str
    hosts: list[Host]
    builtin: bool = False           # local/netns: sized per point, one softnic device per host
    path: Optional[str] = None

    def sized(self, n: int, bin_dir: str) -> "Inventory":
        """For built-in inventories: n hosts, host K on device softnicK."""
        if not self.builtin:
            return self
        if n > kMaxSoftnicDevices:
            raise ConfigError(f"{n} emulated nodes needed but a softnic fabric holds at most {kMaxSoftnicDevices}; "
                              "use placement to put several processes on one node")
        launcher = self.name
        hosts = [Host(name=f"node{k}", launcher=launcher, device=f"softnic{k}", bin_dir=bin_dir) for k in range(n)]
        return Inventory(self.name, self.control_address, hosts, True)


def builtin(name: str) -> Inventory:
    if name not in kBuiltin:
        raise ConfigError(f"unknown built-in inventory {name!r}; valid: {', '.join(kBuiltin)} or a YAML file")
    return Inventory(name, "127.0.0.1", [], builtin=True)


def load(path: str | pathlib.Path) -> Inventory:
    if str(path) in kBuiltin:
        return builtin(str(path))
    path = pathlib.Path(path)
    data = yamlloc.load(path)
    ck = Checker(str(path))
    if not isinstance(data, dict):
        raise ConfigError(f"{path}:1: an inventory must be a mapping with name, control_address and hosts")
    ck.keys(data, "inventory", INVENTORY_KEYS, [k for k, v in INVENTORY_KEYS.items() if v[1]])
    for key in ("name", "control_address", "launcher"):
        if key in data:
            ck.typed(data, key, "inventory", (str,), "a string")
    default_launcher = data.get("launcher", "ssh")
    if "launcher" in data:
        ck.choice(data, "launcher", "inventory", kLaunchers)
    defaults = ck.mapping(data, "defaults", "inventory") or {}
    if defaults:
        _check_host(ck, defaults, "defaults", partial=True)
    hosts: list[Host] = []
    raw_hosts = data.get("hosts")
    if raw_hosts is not None and (not isinstance(raw_hosts, list) or not raw_hosts):
        ck.error(data.line_of("hosts"), "inventory", "hosts must be a non-empty list of host mappings")
        raw_hosts = []
    names = set()
    for i, h in enumerate(raw_hosts or []):
        where = f"hosts[{i}]"
        if not isinstance(h, dict):
            ck.error(raw_hosts.line_of(i), where, "a host must be a mapping with at least name")
            continue
        if not _check_host(ck, h, where, partial=False):
            continue
        merged = {**yamlloc.plain(defaults), **yamlloc.plain(h)}
        merged.setdefault("launcher", default_launcher)
        if merged["name"] in names:
            ck.error(h.line_of("name"), where, f"host name {merged['name']!r} appears twice")
        names.add(merged["name"])
        if merged["launcher"] == "ssh" and "address" not in merged:
            merged["address"] = merged["name"]
        if merged["launcher"] == "slurm":
            merged.setdefault("slurm_node", merged["name"])
        merged["env"] = {str(k): str(v) for k, v in merged.get("env", {}).items()}
        hosts.append(Host(**merged))
    ck.raise_if_any()
    return Inventory(data["name"], data["control_address"], hosts, False, str(path))


def _check_host(ck: Checker, h: yamlloc.LocDict, where: str, partial: bool) -> bool:
    before = len(ck.errors)
    ck.keys(h, where, HOST_KEYS, () if partial else ("name",))
    for key, (kind, _, _) in HOST_KEYS.items():
        if key not in h:
            continue
        if kind == "string":
            ck.typed(h, key, where, (str,), "a string")
        elif kind == "integer":
            if ck.typed(h, key, where, (int,), "an integer") and h[key] < 0:
                ck.error(h.line_of(key), where, f"{key} must be >= 0, got {h[key]}")
        elif kind == "list":
            if ck.typed(h, key, where, (list,), "a list of strings"):
                for j, v in enumerate(h[key]):
                    ck.typed(h[key], j, f"{where}.{key}", (str,), "a string")
        elif kind == "mapping":
            ck.typed(h, key, where, (dict,), "a mapping")
    if "launcher" in h and isinstance(h["launcher"], str):
        ck.choice(h, "launcher", where, kLaunchers)
    if "identity" in h and isinstance(h["identity"], str):
        key_path = pathlib.Path(h["identity"]).expanduser()
        if not key_path.is_file():
            ck.error(h.line_of("identity"), where, f"identity file {h['identity']!r} does not exist")
    return len(ck.errors) == before
