#!/usr/bin/python3
"""A stand-in for rdmalab-bench that speaks contract 1's command line and contract 2's
rendezvous protocol and prints a bench-shaped document, so the harness is tested end to end
(real processes, real sockets, real process groups) without RDMA.

Extra flags for failure tests (harness passes them through like any parameter):
  --fake_behavior=ok|crash|hang|fail|garbage|unsupported   what the process of --fake_target (ROLE/INDEX) does
                                                 (unsupported: tells the rendezvous, then exits 3 a little
                                                 after its peers have failed, as a slow real one may)
  --fake_target=client/0                         which process misbehaves (default client/0)
  --fake_pid_dir=DIR                             every process (and its helper child) writes its pid there

--describe prints rdmalab-bench's description (the fixture data/describe/rdmalab-bench.json, checked
against the real binary by test_describe.py) plus these three parameters, so the harness validates
and passes them like any other.
"""
import argparse
import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import time


kFixture = pathlib.Path(__file__).resolve().parent / "data" / "describe" / "rdmalab-bench.json"
kFakeParams = [
    {"name": "fake_behavior", "flag": "--fake_behavior", "type": "string", "list": False, "unit": None,
     "choices": ["ok", "crash", "hang", "fail", "garbage", "unsupported"], "default": "ok", "symmetric": False,
     "roles": ["server", "client", "node"], "scope": "experiment", "help": "what the target process does"},
    {"name": "fake_target", "flag": "--fake_target", "type": "string", "list": False, "unit": None, "default": "client/0",
     "symmetric": False, "roles": ["server", "client", "node"], "scope": "experiment", "help": "ROLE/INDEX that misbehaves"},
    {"name": "fake_pid_dir", "flag": "--fake_pid_dir", "type": "string", "list": False, "unit": None, "default": None,
     "symmetric": False, "roles": ["server", "client", "node"], "scope": "experiment", "help": "pid files go here"},
]


def describe():
    doc = json.loads(kFixture.read_text())
    doc["params"] += kFakeParams
    for mode in doc["modes"]:
        mode["params"] += [p["name"] for p in kFakeParams]
    print(json.dumps(doc))


def parse():
    p = argparse.ArgumentParser()
    p.add_argument("mode")
    p.add_argument("--rendezvous", required=True)
    p.add_argument("--role", required=True)
    p.add_argument("--index", type=int, required=True)
    p.add_argument("--peers", type=int, required=True)
    p.add_argument("-d", "--ib-dev", "--ib_dev", dest="dev")
    p.add_argument("-i", "--ib-port", "--ib_port", dest="port", type=int, default=1)
    p.add_argument("-x", "--gid-index", "--gid_index", dest="gid", type=int)
    p.add_argument("--out_json", action="store_true")
    p.add_argument("--fake_behavior", default="ok")
    p.add_argument("--fake_target", default="client/0")
    p.add_argument("--fake_pid_dir")
    args, rest = p.parse_known_args()
    params = {}
    for item in rest:
        if not item.startswith("--"):
            sys.exit(f"rdmalab-bench: error: unexpected argument {item!r}")
        key, _, value = item[2:].partition("=")
        try:
            parsed = json.loads(value) if value else True
        except json.JSONDecodeError:
            parsed = value
        params[key.replace("-", "_")] = parsed
    return args, params


class Rv:
    def __init__(self, address, token, role, index):
        host, _, port = address.rpartition(":")
        self.f = socket.create_connection((host, int(port)), timeout=60).makefile("rwb")
        self.call({"op": "hello", "token": token, "role": role, "index": index})

    def call(self, msg):
        self.f.write(json.dumps(msg).encode() + b"\n")
        self.f.flush()
        reply = json.loads(self.f.readline() or b'{"ok": false, "error": "rendezvous closed"}')
        if not reply.get("ok"):
            sys.stderr.write(f"rdmalab-bench: error: rendezvous {msg['op']}: {reply.get('error')}\n")
            sys.exit(1)
        return reply


def write_pid_file(directory, name, pid):
    """Whole or absent: the harness may stop this process at any instruction (a Ctrl-C test
    interrupts it mid-start), and a reader must never find an empty pid file."""
    path = os.path.join(directory, name)
    with open(path + ".tmp", "w") as f:
        f.write(str(pid))
    os.replace(path + ".tmp", path)


def main():
    if sys.argv[1:] == ["--describe"]:
        describe()
        return
    args, params = parse()
    me = f"{args.role}/{args.index}"
    misbehave = args.fake_behavior if args.fake_target == me else "ok"
    if args.fake_pid_dir:
        write_pid_file(args.fake_pid_dir, f"{args.role}-{args.index}.pid", os.getpid())
    rv = Rv(args.rendezvous, os.environ["RDMALAB_RENDEZVOUS_TOKEN"], args.role, args.index)
    rv.call({"op": "put", "key": f"{me}/qp", "value": {"qpn": 100 + args.index, "dev": args.dev, "pid": os.getpid()}})
    if args.role == "server":
        rv.call({"op": "put", "key": "participants", "value": 1 + args.peers})
        total = 1 + args.peers
    elif args.role == "node":
        total = args.peers
    else:
        total = rv.call({"op": "get", "key": "participants", "timeout_ms": 20000})["value"]
    rv.call({"op": "barrier", "name": "connected", "count": total, "timeout_ms": 20000})
    if misbehave == "crash":
        os.kill(os.getpid(), signal.SIGKILL)
    if misbehave == "fail":
        rv.call({"op": "fail", "reason": "ibv_create_qp: Cannot allocate memory (fake)"})
        sys.stderr.write("rdmalab-bench: error: ibv_create_qp: Cannot allocate memory (fake)\n")
        sys.exit(1)
    if misbehave == "unsupported":
        reason = "--numa far: this host has 1 NUMA node (fake)"
        rv.call({"op": "fail", "reason": f"unsupported: {reason}"})
        time.sleep(0.1)
        sys.stderr.write(f"rdmalab-bench: unsupported: {reason}\n")
        sys.exit(3)
    if misbehave == "hang":
        # Ignores SIGTERM and leaves a helper child, so only a group SIGKILL ends both.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        child = subprocess.Popen(["sleep", "300"])
        if args.fake_pid_dir:
            write_pid_file(args.fake_pid_dir, f"{args.role}-{args.index}-child.pid", child.pid)
        while True:
            time.sleep(1)
    size = int(params.get("size", 64))
    duration = float(params.get("duration", 0.05))
    time.sleep(duration)
    rv.call({"op": "barrier", "name": "done", "count": total, "timeout_ms": 20000})
    rv.call({"op": "bye"})
    if misbehave == "garbage":
        print("this is not json")
        return
    mops = round(20.0 / (1 + size / 256) * (1 + 0.01 * args.index), 4)
    is_client = args.role != "server"
    row = {"size_bytes": size, "ops": int(mops * 1e6 * duration), "duration_s": duration, "mops": mops,
           "gbps": round(mops * size * 8 / 1e3, 4),
           "lat_us_mean": round(1.5 + size / 1000, 4) if is_client else None, "lat_us_p50": None,
           "lat_us_p99": None, "per_thread": [], "per_peer": [], "uniformity_ratio": None}
    config = {"mode": args.mode, "ib_dev": args.dev, "ib_port": args.port, "gid_index": args.gid, **params,
              "size": [size]}
    device = {"name": args.dev, "firmware": "fake", "link_layer": "InfiniBand", "active_mtu_bytes": 2048,
              "fabric": os.environ.get("SOFTNIC_FABRIC")}
    doc = {"schema_version": "rdmalab-bench/1", "tool": {"name": "fake_bench", "version": "0.1"},
           "backend": "measured", "mode": args.mode, "role": args.role, "index": args.index, "config": config,
           "environment": {"host": socket.gethostname(), "cpu_model": "fake", "kernel": os.uname().release,
                           "device": device, "provider_library": "fake"},
           "results": [row], "cpu": {"user_s": 0.0, "system_s": 0.0, "wall_s": duration, "utilization": 0.0},
           "pcie": {"modeled": None, "measured": None}, "validation": {"enabled": False}}
    sys.stderr.write(f"{me} size {size} mops {mops}\n")
    print(json.dumps(doc))


if __name__ == "__main__":
    main()
