#!/usr/bin/python3
"""HERD on softnic beside memcached and Redis under the same client, and beside the verb
HERD's server is bound by on softnic (rdmalab-bench's outbound UD SEND of HERD's response
size), measured side by side in one run on one host: server side on one CPU, clients on
another. A benchmark, not a test: it reports rates, latencies and ratios, asserts nothing.

  /usr/bin/python3 kv/peers/compare_kv.py [--rounds 3] [--duration 2] [--json FILE]

Rows (16 B keys, 32 B values, 95% GET, uniform keys unless flags say otherwise):
  herd               HERD, --clients x --window, 1 worker
  memcached, redis   the same clients and window, pipelined over one connection per client
  memcached-best,    each TCP server at its best over a small grid of clients, window and
  redis-best         pipelining (1 server thread: memcached -t 1)
  herd-batching,     HERD with guide16's response batching (one doorbell per sweep), with
  herd-queues3,      3 response QPs per worker (multi-queue), and with both: the per-core
  herd-batch-mq      difference, 1 worker
  herd-1x4           HERD with 1 worker and 1 client at W=4 (the original HERD code's
                     configuration, about 1.8 Mops on this machine, for scale)
  bench-ud-send      rdmalab-bench tput --verb send -c UD outbound, HERD's response size, inline
Each round runs every row once, in an order that rotates between rounds; medians are reported.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESPONSE_HEADER_BYTES = 8  # kv/herd/protocol.h: a response is the header, then the value
# HERD's log per worker: 1 Mi preloaded keys take 64 MB (a 32-byte value's entry is one
# 64-byte line), the default log's all; with 128 MB (the original HERD's) PUTs wrap nothing
# within a run and every GET hits, as the other stores' GETs do.
HERD_LOG_MB = 128
TCP_GRID = [(4, 4, True), (8, 16, True), (16, 16, True), (16, 1, False), (32, 1, False)]  # clients, window, pipeline


def re_exec_under_debian_python() -> None:
    if sys.executable != "/usr/bin/python3" and os.path.exists("/usr/bin/python3"):
        os.execv("/usr/bin/python3", ["/usr/bin/python3", *sys.argv])


def only_these(parser: argparse.ArgumentParser, names: list[str], only: str | None, what: str) -> list[str]:
    """`names` kept to those of the comma list `only` (all without it); an unknown one is a usage error."""
    if not only:
        return names
    wanted = only.split(",")
    unknown = sorted(set(wanted) - set(names))
    if unknown:
        parser.error(f"--only names {what} {', '.join(unknown)} not available here; available: {', '.join(names)}")
    return [n for n in names if n in wanted]


def run_pair(build: Path, server: list[str], client: list[str], timeout_s: float, server_cpus: str = "0",
             client_cpus: str = "1") -> tuple[dict, dict]:
    """One standalone server (softnic0, its threads on server_cpus) and one client process
    (softnic1, on client_cpus) in a fabric of their own; both print one JSON document."""
    fabric = f"cmpkv-{uuid.uuid4().hex[:8]}"
    sn = [str(build / "bin" / "softnic"), "run", "--fabric", fabric, "--devices", "2", "--"]
    port = str(18600 + os.getpid() % 1000)
    try:
        s = subprocess.Popen([*sn, *server, "-p", port, "-d", "softnic0", "--cpus", server_cpus, "--out_json"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        c = subprocess.run([*sn, *client, "-p", port, "-d", "softnic1", "--cpus", client_cpus, "--out_json",
                            "127.0.0.1"],
                           capture_output=True, text=True, timeout=timeout_s)
        s_out, s_err = s.communicate(timeout=timeout_s)
    finally:
        subprocess.run([str(build / "bin" / "softnic"), "fabric", "rm", "--fabric", fabric], capture_output=True)
    if c.returncode != 0 or s.returncode != 0:
        raise RuntimeError(f"{' '.join(client)}: {(c.stderr or s_err).strip().splitlines()[-1:]}")
    return json.loads(s_out), json.loads(c.stdout)


def kv_row(build: Path, system: str, args: argparse.Namespace, clients: int, window: int, pipeline: bool,
           extra: list[str] = ()) -> dict:
    common = ["--system", system, "--clients", str(clients), "--window", str(window), "-D", str(args.duration),
              "--keys", str(args.keys), "--value-size", str(args.value_size), "--put-fraction", str(args.put_fraction),
              "--timeout", str(args.duration * 10 + 30), *(["--pipeline"] if pipeline else []),
              *(["--log-mb", str(HERD_LOG_MB)] if system == "herd" else []), *extra]
    kv = str(build / "bin" / "rdmalab-kv")
    _, doc = run_pair(build, [kv, "server", *common], [kv, "client", *common], args.duration * 10 + 60)
    row = doc["results"][0]
    return {"mops": row["mops"], "lat_us_p50": row["lat_us_p50"], "lat_us_p99": row["lat_us_p99"],
            "clients": clients, "window": window, "pipeline": pipeline}


def bench_ud_row(build: Path, args: argparse.Namespace) -> dict:
    size = RESPONSE_HEADER_BYTES + args.value_size
    common = ["tput", "--verb", "send", "-c", "UD", "-s", str(size), "-I", str(size), "-Q", "64",
              "--direction", "outbound", "-D", str(args.duration), "--timeout", str(args.duration * 10 + 30)]
    bench = str(build / "bin" / "rdmalab-bench")
    server, _ = run_pair(build, [bench, *common], [bench, *common], args.duration * 10 + 60)
    return {"mops": server["results"][0]["mops"], "size_bytes": size}


def main() -> int:
    re_exec_under_debian_python()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", type=Path, default=ROOT / "build")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=2.0, help="seconds measured per row")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--window", type=int, default=4)
    parser.add_argument("--keys", type=int, default=1 << 20)
    parser.add_argument("--value-size", type=int, default=32)
    parser.add_argument("--put-fraction", type=float, default=0.05)
    parser.add_argument("--only", help="comma-separated rows to run (default: every row)")
    parser.add_argument("--json", type=Path, help="write every measurement and the summary here")
    args = parser.parse_args()
    if args.rounds < 1 or args.duration <= 0:
        parser.error(f"--rounds {args.rounds} and --duration {args.duration} must be positive")

    c, w = args.clients, args.window
    rows = {
        "herd": lambda: kv_row(args.build, "herd", args, c, w, False),
        "memcached": lambda: kv_row(args.build, "memcached", args, c, w, True),
        "redis": lambda: kv_row(args.build, "redis", args, c, w, True),
        "memcached-best": lambda: max((kv_row(args.build, "memcached", args, *g) for g in TCP_GRID),
                                      key=lambda r: r["mops"]),
        "redis-best": lambda: max((kv_row(args.build, "redis", args, *g) for g in TCP_GRID), key=lambda r: r["mops"]),
        "herd-batching": lambda: kv_row(args.build, "herd", args, c, w, False, ["--batching"]),
        "herd-queues3": lambda: kv_row(args.build, "herd", args, c, w, False, ["--queues", "3"]),
        "herd-batch-mq": lambda: kv_row(args.build, "herd", args, c, w, False, ["--batching", "--queues", "3"]),
        "herd-1x4": lambda: kv_row(args.build, "herd", args, 1, 4, False),
        "bench-ud-send": lambda: bench_ud_row(args.build, args),
    }
    names = only_these(parser, list(rows), args.only, "rows")
    runs: dict[str, list[dict]] = {n: [] for n in names}
    errors: dict[str, str] = {}
    for r in range(args.rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        for name in order:
            if name in errors:
                continue
            try:
                runs[name].append(rows[name]())
            except (RuntimeError, subprocess.TimeoutExpired, json.JSONDecodeError, KeyError) as exc:
                errors[name] = str(exc)
    median = {n: statistics.median(m["mops"] for m in runs[n]) for n in names if runs[n]}

    print(f"# rdmalab kv comparison: {args.rounds} rounds x {args.duration:g} s, {args.value_size} B values, "
          f"PUT {args.put_fraction:g}, {c} clients x W={w}; server CPU 0, clients CPU 1; medians")
    print(f"{'row':16} {'Mops':>8} {'p50[us]':>9} {'p99[us]':>9}  configuration")
    for n in names:
        if n in errors:
            print(f"{n:16} {'-':>8} {'-':>9} {'-':>9}  failed: {errors[n]}")
            continue
        best = max(runs[n], key=lambda m: m["mops"]) if n.endswith("-best") else runs[n][len(runs[n]) // 2]
        conf = ", ".join(f"{k} {v}" for k, v in best.items() if k not in ("mops", "lat_us_p50", "lat_us_p99"))
        print(f"{n:16} {median[n]:8.3f} {best.get('lat_us_p50', float('nan')):9.2f} "
              f"{best.get('lat_us_p99', float('nan')):9.2f}  {conf}")
    ratios = {}
    for label, a, b, target in [("herd / memcached, same clients and window", "herd", "memcached", ">= 30"),
                                ("herd / redis, same clients and window", "herd", "redis", None),
                                ("herd / memcached at its best", "herd", "memcached-best", None),
                                ("herd / redis at its best", "herd", "redis-best", None),
                                ("herd / rdmalab-bench UD SEND, same size and CPUs", "herd", "bench-ud-send", ">= 0.6"),
                                ("herd-1x4 / original HERD's 1.8 Mops", "herd-1x4", None, "> 1"),
                                ("herd with batching / without (1 core)", "herd-batching", "herd", None),
                                ("herd with 3 queues / 1 queue (1 core)", "herd-queues3", "herd", None),
                                ("herd with batching and 3 queues / neither (1 core)", "herd-batch-mq", "herd", None)]:
        if a in median and (b is None or b in median):
            ratios[label] = median[a] / (median[b] if b else 1.8)
            print(f"# {label}: {ratios[label]:.2f}x" + (f" (target {target})" if target else ""))
    if args.json:
        args.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "runs": runs,
                                         "medians_mops": median, "ratios": ratios, "errors": errors}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
