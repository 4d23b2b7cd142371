#!/usr/bin/python3
"""What a request costs the CPU in rdmalab-kv's HERD, in the original HERD code and in
rdmalab-bench's outbound UD SEND (the verb HERD's responses are), under callgrind's cache
simulation: instructions, D1 misses and LL misses per request, for the server side (HERD's
worker thread, the UD sender) and the client side (HERD's client thread, the UD receiver).
A measurement, not a test: it prints a table, asserts nothing.

  /usr/bin/python3 kv/peers/callgrind_herd.py [--herd DIR] [--config original|compare_kv]
        [--seconds 10] [--rounds 1] [--workers N] [--clients N] [--only ours-worker,...] [--json FILE]

Each role runs one process under `valgrind --tool=callgrind --cache-sim=yes` (pinned to
--profiled-cpu) while its peers run natively (on --peer-cpu): instrumentation is switched
on once thousands of requests were answered (so setup and preloading run uninstrumented), counters are zeroed
after --warmup seconds and dumped --seconds later (callgrind_control); every thread of the
process is counted (HERD's workers, or its client threads, and what else runs). Requests in
that window are counted by softnic's own device counters, read beside the zero and the dump:
tx_packets of softnic0, where every response is one packet (the original also posts its
request WRITEs there: two per request); the UD receiver's messages by softnic0's tx_packets less
its dropped_no_recv (SENDs that found no RECV posted).

--config original: the original HERD's configuration (1 worker, 1 client at W=4, 32-byte
values, 6% PUTs, 1024 keys, 2^22 index buckets and a 128 MB log); --herd names a checkout
of efficient/HERD built for valgrind: as kv/peers/compare_herd_original.py's help says, and
in common.h also USE_HUGEPAGE 0, NUM_KEYS 1024 and NUM_KEYS_ 1023, and SHM_HUGETLB dropped
from common.c's shmget flags (valgrind's shmat cannot place a hugetlb segment).
A total counts the polls that found nothing, as many as the native peer was slow to answer
(on a machine with other load, many): --rounds N runs every role N times, round by round,
and sums up each role by its least total (the round in which its peer kept it busiest, the
nearest to its work per request) and by the median.
--config compare_kv: kv/peers/compare_kv.py's HERD row (4 clients x W=4, 1 Mi keys, 5% PUTs)
beside its UD SEND row (40-byte inline SENDs, 64 in flight): the original is not run.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare_kv import ROOT, only_these, re_exec_under_debian_python  # noqa: E402

ORIGINAL_PORTS = (5500, 5501)  # the original's `servers` file: master, worker
ORIGINAL_SHM_KEYS = (1, 2, 32, 33, 3185, 3186)
START_TIMEOUT_S = 120.0
# Packets before instrumentation starts: thousands of requests answered, so every process's
# setup is over (the original's worker zeroes its 128 MB log and 256 MB index after its
# client may already WRITE requests; instrumenting that would warm the simulated LL).
START_PACKETS = 4096
EVENTS = ("Ir", "D1mr", "D1mw", "ILmr", "DLmr", "DLmw")
CONFIGS = {
    "original": ["--workers", "1", "--clients", "1", "--window", "4", "--keys", "1024", "--index-log2", "22",
                 "--log-mb", "128", "--value-size", "32", "--put-fraction", "0.06"],
    "compare_kv": ["--workers", "1", "--clients", "4", "--window", "4", "--keys", str(1 << 20), "--value-size", "32",
                   "--put-fraction", "0.05"],
}
UD_SEND_BYTES = 40  # kv/herd/protocol.h: a response's 8-byte header and its 32-byte value


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_listening(port: int, proc: subprocess.Popen, deadline: float) -> None:
    suffix = f":{port:04X}"
    while time.monotonic() < deadline and proc.poll() is None:
        rows = Path("/proc/net/tcp").read_text().splitlines()[1:]
        if any(r.split()[1].endswith(suffix) and r.split()[3] == "0A" for r in rows):
            return
        time.sleep(0.1)
    raise RuntimeError(f"{' '.join(map(str, proc.args))}: never listened on port {port}")


class Run:
    """The processes of one role, in a fabric of their own; one of them under callgrind."""

    def __init__(self, args: argparse.Namespace, out_dir: Path, role: str):
        self.args, self.role = args, role
        self.fabric = f"cg-{role}-{uuid.uuid4().hex[:6]}"
        self.out = out_dir / role
        self.env = dict(os.environ, LD_LIBRARY_PATH=str(args.build / "lib" / "softnic"), SOFTNIC_FABRIC=self.fabric,
                        SOFTNIC_DEVICES="2", SOFTNIC_LINK="ib", ROCE="0", APT="1")
        self.procs: list[subprocess.Popen] = []
        self.profiled: subprocess.Popen | None = None
        self.log = tempfile.TemporaryFile("w+")

    def start(self, argv: list[str], profiled: bool, cwd: Path | None = None, stdin: str | None = None) -> subprocess.Popen:
        cpu = self.args.profiled_cpu if profiled else self.args.peer_cpu
        if profiled:
            argv = ["valgrind", "--tool=callgrind", "--cache-sim=yes", "--separate-threads=yes", "--instr-atstart=no",
                    f"--callgrind-out-file={self.out}", *argv]
        # A native peer at a higher priority keeps the profiled process fed on a shared
        # machine: instructions per request count the polls that found nothing, as many as
        # the peer was slow to answer.
        if not profiled and self.args.peer_nice != 0:
            argv = ["nice", "-n", str(self.args.peer_nice), *argv]
        proc = subprocess.Popen(["taskset", "-c", str(cpu), *argv], env=self.env, cwd=cwd, text=True,
                                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                                stdout=self.log, stderr=self.log, start_new_session=True)
        if stdin is not None:
            proc.stdin.write(stdin)
            proc.stdin.close()
        self.procs.append(proc)
        if profiled:
            self.profiled = proc
        return proc

    def packets(self, device: str = "softnic0", counter: str = "tx_packets") -> int:
        """A device counter; "delivered" is tx_packets less the SENDs dropped for want of a
        RECV at their destination (softnic counts both at the sender's device)."""
        out = subprocess.run([str(self.args.build / "bin" / "softnic"), "counters", "--fabric", self.fabric, "--device",
                              device, "--json"], capture_output=True, text=True, timeout=30, check=True).stdout
        counters = json.loads(out)["devices"][0]["counters"]
        if counter == "delivered":
            return counters["tx_packets"] - counters["dropped_no_recv"]
        return counters[counter]

    def control(self, *flags: str) -> None:
        subprocess.run(["callgrind_control", *flags, str(self.profiled.pid)], capture_output=True, timeout=60, check=True)

    def measure(self, packets_per_request: int, meter: tuple[str, str] = ("softnic0", "tx_packets")) -> dict:
        """Waits for traffic, then one window: the events of every thread per request, the
        requests counted by `meter` (device, counter)."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while self.packets() < START_PACKETS:
            ended = [p.args for p in self.procs if p.poll() is not None]
            if ended or time.monotonic() > deadline:
                self.log.seek(0)
                raise RuntimeError(f"{self.role}: no traffic ({ended or 'timeout'}): {self.log.read()[-2000:]}")
            time.sleep(0.2)
        self.control("-i", "on")
        time.sleep(self.args.warmup)
        self.control("-z")
        first = self.packets(*meter)
        time.sleep(self.args.seconds)
        self.control("-d")
        last = self.packets(*meter)
        if any(p.poll() is not None for p in self.procs):
            raise RuntimeError(f"{self.role}: a process ended during the window")
        threads = [parse_totals(Path(f)) for f in glob.glob(f"{self.out}.1-*")]
        if not threads:
            raise RuntimeError(f"{self.role}: callgrind wrote no dump at {self.out}.1-*")
        requests = (last - first) / packets_per_request
        return {"requests": requests, **{e: sum(t.get(e, 0) for t in threads) / requests for e in EVENTS}}

    def close(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        subprocess.run([str(self.args.build / "bin" / "softnic"), "fabric", "rm", "--fabric", self.fabric],
                       capture_output=True)
        self.log.close()


def parse_totals(path: Path) -> dict:
    events, totals = [], []
    for line in path.read_text().splitlines():
        if line.startswith("events:"):
            events = line.split()[1:]
        elif line.startswith("totals:"):
            totals = [int(v) for v in line.split()[1:]]
    totals += [0] * (len(events) - len(totals))
    return dict(zip(events, totals))


def ours(args: argparse.Namespace, out_dir: Path, profile_server: bool) -> dict:
    run = Run(args, out_dir, "ours-worker" if profile_server else "ours-client")
    kv = str(args.build / "bin" / "rdmalab-kv")
    port = free_port()
    window_s = START_TIMEOUT_S + args.warmup + args.seconds + 30
    overrides = [*(["--workers", str(args.workers)] if args.workers else []),
                 *(["--clients", str(args.clients)] if args.clients else [])]
    common = ["--system", "herd", *CONFIGS[args.config], *overrides, "--warmup", "0", "-D", str(window_s),
              "--timeout", str(window_s + 60), "--dead-after-ms", "0", "-p", str(port)]
    try:
        server = run.start([kv, "server", *common, "-d", "softnic0"], profile_server)
        wait_listening(port, server, time.monotonic() + START_TIMEOUT_S)
        run.start([kv, "client", *common, "-d", "softnic1", "127.0.0.1"], not profile_server)
        return run.measure(1)
    finally:
        run.close()


def original(args: argparse.Namespace, out_dir: Path, profile_worker: bool) -> dict:
    run = Run(args, out_dir, "original-worker" if profile_worker else "original-client")
    main = str(args.herd / "main")
    for key in ORIGINAL_SHM_KEYS:
        subprocess.run(["ipcrm", "-M", str(key)], capture_output=True)
    try:
        for server_id, port in enumerate(ORIGINAL_PORTS):
            proc = run.start([main, str(server_id), str(port)], profile_worker and server_id == 1, cwd=args.herd)
            wait_listening(port, proc, time.monotonic() + START_TIMEOUT_S)
        servers = "".join(f"127.0.0.1\n{port}\n" for port in ORIGINAL_PORTS)
        run.start([main, "0"], not profile_worker, cwd=args.herd, stdin=servers)
        return run.measure(2)  # its request WRITE and its response SEND, both on softnic0
    finally:
        run.close()
        for key in ORIGINAL_SHM_KEYS:
            subprocess.run(["ipcrm", "-M", str(key)], capture_output=True)


def ud_send(args: argparse.Namespace, out_dir: Path, profile_sender: bool) -> dict:
    run = Run(args, out_dir, "ud-sender" if profile_sender else "ud-receiver")
    bench = str(args.build / "bin" / "rdmalab-bench")
    port = free_port()
    window_s = START_TIMEOUT_S + args.warmup + args.seconds + 30
    common = ["tput", "--verb", "send", "-c", "UD", "-s", str(UD_SEND_BYTES), "-I", str(UD_SEND_BYTES), "-Q", "64",
              "--direction", "outbound", "-D", str(window_s), "--timeout", str(window_s + 60), "-p", str(port)]
    try:
        server = run.start([bench, *common, "-d", "softnic0"], profile_sender)  # outbound: the server sends
        wait_listening(port, server, time.monotonic() + START_TIMEOUT_S)
        run.start([bench, *common, "-d", "softnic1", "127.0.0.1"], not profile_sender)
        # The receiver is counted by what it received: the native sender outruns it, and
        # UD SENDs that find no RECV posted are dropped.
        return run.measure(1) if profile_sender else run.measure(1, ("softnic0", "delivered"))
    finally:
        run.close()


def main() -> int:
    re_exec_under_debian_python()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", type=Path, default=ROOT / "build")
    parser.add_argument("--herd", type=Path, help="the original HERD built for valgrind (see above); without it, "
                        "the original's rows are left out")
    parser.add_argument("--config", choices=sorted(CONFIGS), default="original")
    parser.add_argument("--workers", type=int, help="HERD's workers instead of the config's (ours only)")
    parser.add_argument("--clients", type=int, help="HERD's clients (one client process) instead of the config's")
    parser.add_argument("--seconds", type=float, default=10.0, help="the measured window under callgrind")
    parser.add_argument("--warmup", type=float, default=2.0, help="instrumented seconds before the window")
    parser.add_argument("--rounds", type=int, default=1, help="runs of every role, round by round")
    parser.add_argument("--profiled-cpu", type=int, default=0)
    parser.add_argument("--peer-cpu", type=int, default=1)
    parser.add_argument("--peer-nice", type=int, default=-5, help="the native peers' nice value (0: unchanged; "
                        "below 0 needs root)")
    parser.add_argument("--only", help="comma-separated roles (default: every role the config has)")
    parser.add_argument("--json", type=Path, help="write the table here too")
    parser.add_argument("--keep", type=Path, help="keep callgrind's dumps in this directory (for callgrind_annotate)")
    args = parser.parse_args()
    if args.seconds <= 0 or args.warmup < 0:
        parser.error(f"--seconds {args.seconds} must be positive and --warmup {args.warmup} not negative")
    if args.rounds < 1:
        parser.error(f"--rounds {args.rounds} must be at least 1")
    if args.herd is not None and not (args.herd / "main").is_file():
        parser.error(f"--herd {args.herd}: no built `main` there (build it as this help says)")
    roles = {
        "ours-worker": lambda d: ours(args, d, True),
        "ours-client": lambda d: ours(args, d, False),
        "original-worker": lambda d: original(args, d, True),
        "original-client": lambda d: original(args, d, False),
        "ud-sender": lambda d: ud_send(args, d, True),
        "ud-receiver": lambda d: ud_send(args, d, False),
    }
    names = [n for n in roles if not (n.startswith("original") and (args.herd is None or args.config != "original"))]
    names = only_these(parser, names, args.only, "roles")
    runs: dict[str, list[dict]] = {name: [] for name in names}
    with tempfile.TemporaryDirectory(prefix="callgrind-herd-") as scratch:
        print(f"# per request under callgrind --cache-sim=yes: config {args.config}, {args.seconds:g} s windows")
        print(f"{'role':16} {'requests':>9} {'Ir':>8} {'D1 miss':>8} {'LL miss':>8}")
        for round_index in range(args.rounds):
            out_dir = (args.keep or Path(scratch)) / (f"round{round_index + 1}" if args.rounds > 1 else "")
            out_dir.mkdir(parents=True, exist_ok=True)
            for name in names:
                try:
                    runs[name].append(roles[name](out_dir))
                except (RuntimeError, subprocess.SubprocessError, OSError) as exc:
                    print(f"{name:16} failed: {exc}")
                    continue
                print_row(name, runs[name][-1])
    summaries = {"": {n: r[0] for n, r in runs.items() if r}} if args.rounds == 1 else {
        " least": {n: min(r, key=lambda row: row["Ir"]) for n, r in runs.items() if r},
        " median": {n: sorted(r, key=lambda row: row["Ir"])[len(r) // 2] for n, r in runs.items() if r}}
    for label, rows in summaries.items():
        if args.rounds > 1:
            print(f"#{label} of {args.rounds} rounds")
            for name, row in rows.items():
                print_row(name, row)
        for a, b in [("ours-worker", "original-worker"), ("ours-client", "original-client"),
                     ("ours-worker", "ud-sender"), ("ours-client", "ud-receiver")]:
            if a in rows and b in rows:
                ra, rb = rows[a], rows[b]
                print(f"#{label} {a} / {b}: instructions {ra['Ir'] / rb['Ir']:.2f}x, D1 misses "
                      f"{(ra['D1mr'] + ra['D1mw']) / max(rb['D1mr'] + rb['D1mw'], 1e-9):.2f}x")
    if args.json:
        args.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "runs": runs}, indent=2))
    return 0 if any(runs.values()) else 1


def print_row(name: str, r: dict) -> None:
    print(f"{name:16} {r['requests']:9.0f} {r['Ir']:8.0f} {r['D1mr'] + r['D1mw']:8.2f} "
          f"{r['ILmr'] + r['DLmr'] + r['DLmw']:8.3f}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
