"""Acceptance 3: the slurm launcher against a real single-node Slurm (munged, slurmctld and
slurmd from Debian, started here with a configuration of their own), not a recorded contract."""
import functools
import json
import os
import shutil
import signal
import socket
import subprocess
import time

import pytest

from conftest import alive_pids, assert_no_orphans, kRoot, pair_experiment, run_all, run_hung_point

kDaemons = ("/usr/sbin/munged", "/usr/sbin/slurmctld", "/usr/sbin/slurmd")
kReadyTimeoutS = 30
pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not all(map(os.path.exists, kDaemons))
                                or shutil.which("srun") is None,
                                reason="needs root and Debian's munge, slurmctld, slurmd, slurm-client")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    d = tmp_path_factory.mktemp("slurm")
    for sub in ("state", "spool", "munge", "log"):
        (d / sub).mkdir()
    (d / "munge").chmod(0o755)
    key = d / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    node = socket.gethostname().split(".")[0]  # slurmd names itself by the short host name
    sock = d / "munge" / "munge.socket"
    conf = d / "slurm.conf"
    conf.write_text(f"""ClusterName=rdmalabtest
SlurmctldHost={node}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={sock}
CredType=cred/munge
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
ProctrackType=proctrack/pgid
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
MpiDefault=none
SlurmctldLogFile={d}/log/slurmctld.log
SlurmdLogFile={d}/log/slurmd.log
NodeName={node} NodeAddr=127.0.0.1 CPUs={os.cpu_count()} State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:8
""")
    env = {**os.environ, "SLURM_CONF": str(conf)}
    procs = []

    def start(*argv):
        log = open(d / "log" / f"{os.path.basename(argv[0])}.out", "wb")
        procs.append(subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                      env=env, start_new_session=True))

    try:
        start(kDaemons[0], "-F", "-f", f"--key-file={key}", f"-S{sock}", f"--pid-file={d}/munged.pid",
              f"--log-file={d}/log/munged.log", f"--seed-file={d}/munged.seed")
        deadline = time.monotonic() + kReadyTimeoutS
        while not sock.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        start(kDaemons[1], "-D", "-f", str(conf))
        start(kDaemons[2], "-D", "-f", str(conf))
        while time.monotonic() < deadline:
            r = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, env=env, timeout=10)
            if r.stdout.strip() == "idle":
                break
            time.sleep(0.2)
        else:
            logs = "\n".join(p.read_text()[-1500:] for p in (d / "log").iterdir())
            raise RuntimeError(f"slurm did not become idle within {kReadyTimeoutS} s:\n{logs}")
        yield d, conf, node
    finally:
        for p in reversed(procs):
            try:
                os.killpg(p.pid, signal.SIGTERM)
                p.wait(10)
            except ProcessLookupError:
                pass
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(5)


def inventory(d, node):
    path = d / "cluster.yaml"
    path.write_text(f"""name: one-node-slurm
control_address: 127.0.0.1
launcher: slurm
defaults: {{slurm_node: {node}, bin_dir: {kRoot / 'build' / 'bin'}}}
hosts:
  - {{name: s0, device: softnic0}}
  - {{name: s1, device: softnic1}}
""")
    return path


def run_slurm(conf, *args, check):
    old = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(conf)
    try:
        return run_all(*args, check=check)
    finally:
        if old is None:
            del os.environ["SLURM_CONF"]
        else:
            os.environ["SLURM_CONF"] = old


def test_two_roles_through_srun(slurm, tmp_path, exp_dir):
    d, conf, node = slurm
    pids = tmp_path / "pids"
    pids.mkdir()
    exp = pair_experiment(exp_dir, pids, "server and client as slurm job steps", 30)
    out = tmp_path / "res"
    run_slurm(conf, exp, "--cluster", inventory(d, node), "--out", out, "--no-report", check=0)
    recs = [json.loads(p.read_text()) for p in (out / "softnic" / "pair" / "points").glob("*.json")]
    assert len(recs) == 2 and all(r["status"] == "ok" for r in recs), [r["error"] for r in recs]
    rec = recs[0]
    assert [h["launcher"] for h in rec["provenance"]["hosts"]] == ["slurm", "slurm"]
    assert rec["roles"][1]["document"]["environment"]["device"]["name"] == "softnic1"
    assert_no_orphans(pids)


def test_hung_job_step_is_cancelled(slurm, tmp_path, exp_dir):
    d, conf, node = slurm
    rec, pids = run_hung_point(exp_dir, tmp_path, inventory(d, node), functools.partial(run_slurm, conf))
    assert "deadline of 2 s passed" in rec["error"]
    # slurmd delivers the SIGKILL asynchronously: allow it a moment, then assert.
    deadline = time.monotonic() + 5
    while alive_pids(pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert_no_orphans(pids)
    env = {**os.environ, "SLURM_CONF": str(conf)}
    while time.monotonic() < deadline + 5:
        queue = subprocess.run(["squeue", "-h"], capture_output=True, text=True, env=env, timeout=10).stdout
        if not queue.strip():
            break
        time.sleep(0.2)
    assert queue.strip() == ""
