#!/usr/bin/python3
"""rdmalab-kv's HERD beside the original HERD code (efficient/HERD, the SIGCOMM'14 release)
on the same softnic, in interleaved rounds, both metered by softnic's own device counters.
A benchmark, not a test: it prints rates and the ratio ours / original, asserts nothing.

  /usr/bin/python3 kv/peers/compare_herd_original.py --herd ~/HERD [--rounds 6] [--seconds 4]

The original is not fetched: --herd names a checkout the user built. Build it so:

  git clone https://github.com/efficient/HERD ~/HERD && cd ~/HERD
  # common.h: NUM_CLIENTS 36 -> 1, NUM_SERVERS 7 -> 2 (a master and one worker), as its README says
  sed -i 's/^#define NUM_CLIENTS 36/#define NUM_CLIENTS 1/; s/^#define NUM_SERVERS 7/#define NUM_SERVERS 2/' common.h
  make CFLAGS="-O3 -Wall -Wno-unused-result -fcommon"   # GCC 10+ needs -fcommon for common.h's globals
  echo 1024 | sudo tee /proc/sys/vm/nr_hugepages          # its request areas and log are SHM_HUGETLB

It runs unmodified on softnic (its worker sees the client's WRITEs into the master's
registered SysV segment through its own shmat). Its three processes take the first device
(softnic0): the master (`./main 0 5500`, which only sleeps) and the worker (`./main 1 5501`)
on --server-core, the client (`./main 0`, the servers' host/port pairs on stdin) on
--client-core. Its client first PUTs every one of its 1 Mi keys, then runs 95% GETs (its
`rand() % 100 <= 5`: 6% PUTs); the meter starts --warmup after it says it completed its
first 1 Mi operations (the PUTs).
Ours runs the same configuration: 1 worker, 1 client at W=4, 16-byte keys, 32-byte values,
1 Mi keys, 6% PUTs, a 128 MB log (as the original's), server on --server-core (softnic0),
client on --client-core (softnic1).

Rates: requests per second over --seconds from softnic's device counters of softnic0:
the original posts both a request's WRITE and its response's SEND there (two packets a
request), ours only the response's SEND (one). Each round runs both, in an order that
alternates; a cache-line ping-pong on the two cores before and after each run
(build/bin/rdmalab-cacheline-pingpong, as benchmarks/peers/compare_ucx.py) classes the
round "sibling", "near" or "far"; a round whose probes disagree is "mixed" and counts only
in the overall median. Prints every round and the median ratio per placement.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PLACEMENTS = ("sibling", "near", "far")  # by one-way cache-line latency, as benchmarks/peers/compare_ucx.py

ORIGINAL_PORTS = (5500, 5501)  # the original's `servers` file: master, worker
ORIGINAL_SHM_KEYS = (1, 2, 32, 33, 3185, 3186)  # its SysV segments (common.h), removed between runs
ORIGINAL_PACKETS_PER_REQUEST = 2  # its WRITE and its SEND, both on softnic0
START_TIMEOUT_S = 60.0


def placement_of(floors_ns: list[float | None], bounds_ns: tuple[float, float]) -> str | None:
    """The class every probe around a round fell in; "mixed" if they differ or one failed."""
    if not floors_ns:
        return None
    classes = {None if f is None else PLACEMENTS[sum(f >= b for b in bounds_ns)] for f in floors_ns}
    return classes.pop() if len(classes) == 1 and None not in classes else "mixed"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_listening(port: int, proc: subprocess.Popen, deadline: float) -> bool:
    """True once a socket listens on `port` (/proc/net/tcp, state 0A); a connection would be
    the original's one accepted client."""
    suffix = f":{port:04X}"
    while time.monotonic() < deadline and proc.poll() is None:
        rows = Path("/proc/net/tcp").read_text().splitlines()[1:]
        if any(r.split()[1].endswith(suffix) and r.split()[3] == "0A" for r in rows):
            return True
        time.sleep(0.05)
    return False


def re_exec_under_debian_python() -> None:
    if sys.executable != "/usr/bin/python3" and os.path.exists("/usr/bin/python3"):
        os.execv("/usr/bin/python3", ["/usr/bin/python3", *sys.argv])


def softnic_env(build: Path, fabric: str, devices: int) -> dict[str, str]:
    env = dict(os.environ)
    env.update(LD_LIBRARY_PATH=str(build / "lib" / "softnic"), SOFTNIC_FABRIC=fabric, SOFTNIC_DEVICES=str(devices),
               SOFTNIC_LINK="ib", ROCE="0", APT="1")
    return env


def tx_packets(build: Path, fabric: str) -> int:
    out = subprocess.run([str(build / "bin" / "softnic"), "counters", "--fabric", fabric, "--device", "softnic0",
                          "--json"], capture_output=True, text=True, timeout=30, check=True).stdout
    return json.loads(out)["devices"][0]["counters"]["tx_packets"]


def metered_rate(build: Path, fabric: str, procs: list[subprocess.Popen], args: argparse.Namespace,
                 packets_per_request: int) -> float:
    """Requests per second over args.seconds, after args.warmup; fails if a process ended early."""
    time.sleep(args.warmup)
    first, t0 = tx_packets(build, fabric), time.monotonic()
    time.sleep(args.seconds)
    last, t1 = tx_packets(build, fabric), time.monotonic()
    ended = [p.args for p in procs if p.poll() is not None]
    if ended:
        raise RuntimeError(f"ended during the measurement: {ended}")
    return (last - first) / packets_per_request / (t1 - t0)


def start(argv: list[str], env: dict[str, str], cwd: Path | None = None, stdin: str | None = None,
          log=subprocess.DEVNULL) -> subprocess.Popen:
    proc = subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                            stdout=log, stderr=log, text=True, start_new_session=True)
    if stdin is not None:
        proc.stdin.write(stdin)
        proc.stdin.close()
    return proc


def stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
        p.wait()


def remove_original_segments() -> None:
    for key in ORIGINAL_SHM_KEYS:
        subprocess.run(["ipcrm", "-M", str(key)], capture_output=True)


def run_original(args: argparse.Namespace) -> float:
    fabric = f"herd-orig-{uuid.uuid4().hex[:8]}"
    env = softnic_env(args.build, fabric, 1)
    main = str(args.herd / "main")
    remove_original_segments()
    procs: list[subprocess.Popen] = []
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        for server_id, port in enumerate(ORIGINAL_PORTS):
            procs.append(start(["taskset", "-c", str(args.server_core), main, str(server_id), str(port)], env, args.herd))
            if not wait_listening(port, procs[-1], deadline):
                raise RuntimeError(f"the original's server {server_id} never listened on port {port}")
        servers = "".join(f"127.0.0.1\n{port}\n" for port in ORIGINAL_PORTS)
        with tempfile.TemporaryFile("w+") as log:
            procs.append(start(["taskset", "-c", str(args.client_core), main, "0"], env, args.herd, stdin=servers,
                               log=log))
            while "completed" not in (log.seek(0) or log.read()):  # its first 1 Mi operations, the PUTs
                if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                    raise RuntimeError("the original's client never said it completed its PUT phase")
                time.sleep(0.2)
            return metered_rate(args.build, fabric, procs, args, ORIGINAL_PACKETS_PER_REQUEST)
    finally:
        stop(procs)
        remove_original_segments()
        subprocess.run([str(args.build / "bin" / "softnic"), "fabric", "rm", "--fabric", fabric], capture_output=True)


def run_ours(args: argparse.Namespace) -> float:
    fabric = f"herd-ours-{uuid.uuid4().hex[:8]}"
    env = softnic_env(args.build, fabric, 2)
    kv = str(args.build / "bin" / "rdmalab-kv")
    port = str(free_port())
    common = ["--system", "herd", "--workers", "1", "--clients", "1", "--window", "4", "--keys", str(1 << 20),
              "--value-size", "32", "--put-fraction", "0.06", "--log-mb", "128", "--warmup", "0",
              "-D", str(args.warmup + args.seconds + 1), "--timeout", str(START_TIMEOUT_S + args.warmup + args.seconds),
              "-p", port]
    procs = [start([kv, "server", *common, "-d", "softnic0", "--cpus", str(args.server_core)], env)]
    try:
        if not wait_listening(int(port), procs[0], time.monotonic() + START_TIMEOUT_S):
            raise RuntimeError("rdmalab-kv's HERD server never listened")
        procs.append(start([kv, "client", *common, "-d", "softnic1", "--cpus", str(args.client_core), "127.0.0.1"], env))
        # The server preloads its keys before the run starts: wait for its first responses.
        deadline = time.monotonic() + START_TIMEOUT_S
        while tx_packets(args.build, fabric) == 0:
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                raise RuntimeError("rdmalab-kv's HERD never answered")
            time.sleep(0.1)
        return metered_rate(args.build, fabric, procs, args, 1)
    finally:
        stop(procs)
        subprocess.run([str(args.build / "bin" / "softnic"), "fabric", "rm", "--fabric", fabric], capture_output=True)


def probe_ns(args: argparse.Namespace) -> float | None:
    """One-way cache-line latency between the two cores right now (None if the probe failed)."""
    r = subprocess.run([args.cacheline, "--cores", f"{args.server_core},{args.client_core}", "--rounds", "101",
                        "--batch", "200", "--json"], capture_output=True, text=True, timeout=60)
    try:
        return json.loads(r.stdout)["one_way_ns_median"] if r.returncode == 0 else None
    except (ValueError, KeyError):
        return None


def main() -> int:
    re_exec_under_debian_python()
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--herd", type=Path, required=True, help="a built checkout of efficient/HERD (see above)")
    p.add_argument("--build", type=Path, default=ROOT / "build")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--seconds", type=float, default=4.0, help="seconds metered per run")
    p.add_argument("--warmup", type=float, default=1.0, help="seconds before the meter starts")
    p.add_argument("--server-core", type=int, default=0)
    p.add_argument("--client-core", type=int, default=1)
    p.add_argument("--cacheline", default=str(ROOT / "build" / "bin" / "rdmalab-cacheline-pingpong"))
    p.add_argument("--placement-bounds-ns", default="25,100", help="sibling below the first, near below the second")
    p.add_argument("--json", type=Path, help="write every round here")
    args = p.parse_args()
    if not (args.herd / "main").is_file():
        p.error(f"--herd {args.herd}: no built `main` there; build the original as this script's help says")
    common_h = (args.herd / "common.h").read_text() if (args.herd / "common.h").is_file() else ""
    for name, want in (("NUM_CLIENTS", "1"), ("NUM_SERVERS", "2")):
        if f"#define {name} {want}" not in common_h.replace("\t", " "):
            p.error(f"--herd {args.herd}: common.h must define {name} {want} (its README's single-client setting)")
    if args.rounds < 1 or args.seconds <= 0 or args.warmup < 0:
        p.error(f"--rounds {args.rounds}, --seconds {args.seconds} and --warmup {args.warmup}: "
                "want at least one round, a positive time and a non-negative warm-up")
    bounds = tuple(float(x) for x in args.placement_bounds_ns.split(","))
    if len(bounds) != 2 or not 0 < bounds[0] < bounds[1]:
        p.error(f"--placement-bounds-ns {args.placement_bounds_ns}: want two increasing latencies, e.g. 25,100")

    sides = {"original": run_original, "ours": run_ours}
    rounds = []
    for r in range(args.rounds):
        order = list(sides) if r % 2 == 0 else list(reversed(sides))
        probing = Path(args.cacheline).exists()
        mops, floors = {}, [probe_ns(args)] if probing else []
        for side in order:
            mops[side] = sides[side](args) / 1e6
            if probing:
                floors.append(probe_ns(args))
        placement = placement_of(floors, bounds) or "unprobed"
        rounds.append({"mops": mops, "ratio": mops["ours"] / mops["original"], "floors_ns": floors,
                       "placement": placement})
        print(f"round {r + 1}: original {mops['original']:.3f} Mops, ours {mops['ours']:.3f} Mops, "
              f"ours/original {rounds[-1]['ratio']:.2f}, {placement}", flush=True)

    print(f"# HERD: rdmalab-kv / original, 1 worker + 1 client at W=4, 32 B values, 6% PUT, "
          f"{args.rounds} interleaved rounds x {args.seconds:g} s")
    summary = {}
    for group in ("all", *PLACEMENTS):
        chosen = [x for x in rounds if group == "all" or x["placement"] == group]
        if chosen:
            summary[group] = {"rounds": len(chosen), "ratio_median": statistics.median(x["ratio"] for x in chosen),
                              "original_mops_median": statistics.median(x["mops"]["original"] for x in chosen),
                              "ours_mops_median": statistics.median(x["mops"]["ours"] for x in chosen)}
            s = summary[group]
            print(f"{group:8} {s['rounds']:3} rounds  original {s['original_mops_median']:.3f} Mops  "
                  f"ours {s['ours_mops_median']:.3f} Mops  ours/original {s['ratio_median']:.2f}")
    if args.json:
        args.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "rounds": rounds,
                                         "summary": summary}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
