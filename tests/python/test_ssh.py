"""Acceptance 2: the ssh launcher against real OpenSSH servers, one in each of two
network-namespace hosts (key-based, veth only). The result has the schema of a local run,
and a hung remote role is stopped with its whole remote process group."""
import json
import os
import shutil
import socket
import subprocess
import time

import pytest

from conftest import assert_no_orphans, kRoot, pair_experiment, run_all, run_hung_point
from harness.inventory import Host
from harness.launch_local import NetnsLauncher

kSshd = "/usr/sbin/sshd"
kReadyTimeoutS = 20
pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not os.path.exists(kSshd) or shutil.which("ssh") is None,
                                reason="needs root, openssh-server and openssh-client")


def wait_port(address, port, proc):
    deadline = time.monotonic() + kReadyTimeoutS
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"sshd exited with {proc.poll()} before listening on {address}")
        try:
            socket.create_connection((address, port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"sshd does not listen on {address}:{port} after {kReadyTimeoutS} s")


@pytest.fixture(scope="module")
def ssh_hosts(tmp_path_factory):
    d = tmp_path_factory.mktemp("ssh")
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / "id")], check=True, timeout=30)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / "hostkey")], check=True, timeout=30)
    shutil.copy(d / "id.pub", d / "authorized_keys")
    os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # sshd's privilege-separation directory
    net = NetnsLauncher(f"s{os.getpid() % 100000}", subnet="10.232")
    hosts = [Host(name=f"node{k}", launcher="netns") for k in range(2)]
    procs = []
    try:
        net.setup(hosts)
        for host in hosts:
            cfg = d / f"sshd-{host.name}.conf"
            cfg.write_text(f"ListenAddress {host.address}\nPort 22\nHostKey {d / 'hostkey'}\n"
                           f"AuthorizedKeysFile {d / 'authorized_keys'}\nPermitRootLogin prohibit-password\n"
                           "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n"
                           f"StrictModes no\nPidFile {d / host.name}.pid\nLogLevel ERROR\n")
            log = open(d / f"sshd-{host.name}.log", "wb")
            proc = net.start(host, [kSshd, "-D", "-e", "-f", str(cfg)], {}, log, log)
            procs.append(proc)
            wait_port(host.address, 22, proc.popen)
        yield d, net, hosts
    finally:
        for proc in procs:
            proc.stop()
        net.teardown()


def inventory(d, net, hosts, extra=""):
    path = d / "cluster.yaml"
    lines = [f"name: netns-sshd\ncontrol_address: {net.control_address()}\nlauncher: ssh",
             f"defaults: {{user: root, identity: {d / 'id'}, bin_dir: {kRoot / 'build' / 'bin'},",
             "           ssh_options: [StrictHostKeyChecking=no, UserKnownHostsFile=/dev/null, LogLevel=ERROR]}",
             "hosts:"]
    lines += [f"  - {{name: {h.name}, address: {h.address}, device: softnic{k}}}" for k, h in enumerate(hosts)]
    path.write_text("\n".join(lines) + "\n" + extra)
    return path


def keys(obj, prefix=""):
    """Every key path of a JSON value (lists by their first element)."""
    out = set()
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.add(prefix + k)
            out |= keys(v, prefix + k + ".")
    elif isinstance(obj, list) and obj:
        out |= keys(obj[0], prefix + "[]")
    return out


def test_two_node_experiment_over_ssh_matches_local_schema(ssh_hosts, tmp_path, exp_dir):
    d, net, hosts = ssh_hosts
    pids = tmp_path / "pids"
    pids.mkdir()
    exp = pair_experiment(exp_dir, pids, "one server, one client, over ssh", 20)
    remote, local = tmp_path / "remote", tmp_path / "local"
    run_all(exp, "--cluster", inventory(d, net, hosts), "--out", remote, "--no-report", check=0)
    run_all(exp, "--out", local, "--no-report", check=0)
    [r_rec, *_] = [json.loads(p.read_text()) for p in sorted((remote / "softnic" / "pair" / "points").glob("*.json"))]
    [l_rec, *_] = [json.loads(p.read_text()) for p in sorted((local / "softnic" / "pair" / "points").glob("*.json"))]
    assert r_rec["status"] == "ok", r_rec["error"]
    assert keys(r_rec) == keys(l_rec)
    assert [h["launcher"] for h in r_rec["provenance"]["hosts"]] == ["ssh", "ssh"]
    assert [h["address"] for h in r_rec["provenance"]["hosts"]] == [h.address for h in hosts]
    assert r_rec["provenance"]["rendezvous"]["address"] == f"{net.control_address()}:" + \
        r_rec["provenance"]["rendezvous"]["address"].rsplit(":", 1)[1]
    # The role really ran through sshd: its parent chain is sshd's session, with sshd's environment.
    assert r_rec["roles"][0]["argv"][0].endswith("softnic")
    assert_no_orphans(pids)
    # No ssh master connection outlives the run.
    masters = subprocess.run(["pgrep", "-f", "ssh.*ControlPersist"], capture_output=True, text=True).stdout.split()
    assert masters == []


def test_hung_remote_role_is_killed_with_its_remote_group(ssh_hosts, tmp_path, exp_dir):
    d, net, hosts = ssh_hosts
    rec, pids = run_hung_point(exp_dir, tmp_path, inventory(d, net, hosts))
    assert "deadline of 2 s passed" in rec["error"]
    assert (pids / "client-0-child.pid").exists()
    assert_no_orphans(pids)
