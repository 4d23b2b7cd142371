#!/usr/bin/python3
"""HERD's rate as its server gets more workers, one core each, against the same client
process on the other cores: the scaling herd14 Fig. 14 shows, measured on softnic.
A benchmark, not a test: it prints rates and ratios, asserts nothing.

  /usr/bin/python3 kv/peers/herd_scaling.py [--workers 1,2,4,8] [--rounds 3] [--duration 2]

Worker i of a run with N workers runs on CPU i (0..N-1, softnic0); the client process's
--threads threads run on --client-cpus (default: the CPUs after the largest worker count,
so that every run's clients have the same cores), with --clients clients at --window
(default 64 x W=4 on 8 threads, 16 B keys, 32 B values, 95% GET, uniform over 1 Mi keys).
Each round runs every worker count once, in an order that rotates between rounds; the
medians are reported, with each count's rate over the previous one's and over one worker's.

What tells a bound apart, per run: each worker's no-ops per request (a no-op is pushed
after a sweep of the worker's slots found nothing: many no-ops, the workers wait for
requests and the clients or the window bound the rate; few, the workers are busy), and
the spread of the workers' rates (keys are uniform over the partitions, so in a closed
loop every worker runs at the slowest one's rate).
Needs as many CPUs as the largest worker count plus at least one for the clients.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare_kv import HERD_LOG_MB, ROOT, re_exec_under_debian_python, run_pair  # noqa: E402

SCHEMA = "rdmalab-herd-scaling/1"


def cpu_list(cpus: list[int]) -> str:
    return ",".join(str(c) for c in cpus)


def parse_cpu_list(text: str) -> list[int]:
    """'8-11,14' -> [8, 9, 10, 11, 14], as rdmalab-kv's --cpus reads it."""
    cpus = []
    for part in filter(None, text.split(",")):
        first, _, last = part.partition("-")
        cpus.extend(range(int(first), int(last or first) + 1))
    return cpus


def run_once(args: argparse.Namespace, workers: int, client_cpus: list[int]) -> dict:
    common = ["--system", "herd", "--workers", str(workers), "--clients", str(args.clients), "--window",
              str(args.window), "-D", str(args.duration), "--keys", str(args.keys), "--value-size",
              str(args.value_size), "--put-fraction", str(args.put_fraction), "--log-mb", str(HERD_LOG_MB),
              "--timeout", str(args.duration * 10 + 60), *args.extra]
    kv = str(args.build / "bin" / "rdmalab-kv")
    server, client = run_pair(args.build, [kv, "server", *common], [kv, "client", "--threads", str(args.threads),
                                                                      *common],
                              args.duration * 10 + 120, server_cpus=cpu_list(list(range(workers))),
                              client_cpus=cpu_list(client_cpus))
    row = client["results"][0]
    per_worker = server["server"]["workers"]
    return {"workers": workers, "mops": row["mops"], "lat_us_p50": row["lat_us_p50"], "lat_us_p99": row["lat_us_p99"],
            "retries": row["retries"],
            "worker_mops": [w["mops"] for w in per_worker],
            "worker_noops_per_request": [w["noops"] / max(w["requests"], 1) for w in per_worker]}


def main() -> int:
    re_exec_under_debian_python()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", type=Path, default=ROOT / "build")
    parser.add_argument("--workers", default="1,2,4,8", help="comma-separated worker counts")
    parser.add_argument("--client-cpus", help="CPU list of the client threads (default: the CPUs after the "
                                              "largest worker count)")
    parser.add_argument("--threads", type=int, default=8, help="client threads")
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--window", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=2.0, help="seconds measured per run")
    parser.add_argument("--keys", type=int, default=1 << 20)
    parser.add_argument("--value-size", type=int, default=32)
    parser.add_argument("--put-fraction", type=float, default=0.05)
    parser.add_argument("--extra", default="", help="more rdmalab-kv flags for both sides, e.g. '--batching'")
    parser.add_argument("--json", type=Path, help="write every run and the summary here")
    args = parser.parse_args()
    args.extra = args.extra.split()
    try:
        counts = [int(n) for n in args.workers.split(",")]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        parser.error(f"--workers {args.workers!r}: expected comma-separated positive integers, e.g. 1,2,4,8")
    if args.rounds < 1 or args.duration <= 0:
        parser.error(f"--rounds {args.rounds} and --duration {args.duration} must be positive")
    online = os.cpu_count() or 1
    if args.client_cpus:
        try:
            client_cpus = parse_cpu_list(args.client_cpus)
        except ValueError:
            parser.error(f"--client-cpus {args.client_cpus!r}: expected N or N-M, comma-separated")
    else:
        client_cpus = list(range(max(counts), online))
    if not client_cpus or max(client_cpus) >= online:
        parser.error(f"no client CPUs: {online} CPUs online and workers on CPUs 0..{max(counts) - 1}; "
                     f"give --client-cpus or fewer --workers")

    runs: dict[int, list[dict]] = {n: [] for n in counts}
    errors: dict[int, str] = {}
    for r in range(args.rounds):
        for n in counts[r % len(counts):] + counts[:r % len(counts)]:
            if n in errors:
                continue
            try:
                runs[n].append(run_once(args, n, client_cpus))
            except (RuntimeError, subprocess.TimeoutExpired, json.JSONDecodeError, KeyError) as exc:
                errors[n] = str(exc)
                continue
            print(f"# round {r + 1}: {n} workers {runs[n][-1]['mops']:.3f} Mops", file=sys.stderr, flush=True)

    median = {n: statistics.median(m["mops"] for m in runs[n]) for n in counts if runs[n]}
    print(f"# HERD scaling: {args.rounds} rounds x {args.duration:g} s, {args.clients} clients x W={args.window} on "
          f"{args.threads} threads (CPUs {cpu_list(client_cpus)}), workers on CPUs 0..N-1, {args.keys} keys, "
          f"PUT {args.put_fraction:g}{' ' + ' '.join(args.extra) if args.extra else ''}; medians")
    print(f"{'workers':>7} {'Mops':>8} {'x prev':>7} {'x first':>7} {'p50[us]':>8} {'p99[us]':>8} "
          f"{'worker Mops min..max':>21} {'no-ops/req':>11}")
    previous = None
    for n in counts:
        if n in errors and not runs[n]:
            print(f"{n:7} failed: {errors[n]}")
            continue
        mid = sorted(runs[n], key=lambda m: m["mops"])[len(runs[n]) // 2]
        over_prev = f"{median[n] / median[previous]:7.2f}" if previous in median else f"{'-':>7}"
        over_first = f"{median[n] / median[counts[0]]:7.2f}" if counts[0] in median else f"{'-':>7}"
        noops = statistics.median(mid["worker_noops_per_request"])
        print(f"{n:7} {median[n]:8.3f} {over_prev} {over_first} {mid['lat_us_p50']:8.2f} {mid['lat_us_p99']:8.2f} "
              f"{min(mid['worker_mops']):10.3f}..{max(mid['worker_mops']):<10.3f} {noops:11.3f}")
        previous = n
    for n, error in errors.items():
        print(f"# {n} workers: {error}")
    if 4 in median and 8 in median:
        print(f"# 8 workers / 4 workers: {median[8] / median[4]:.2f}x (target >= 1.8 where 16 cores are at hand)")
    if args.json:
        args.json.write_text(json.dumps({"schema": SCHEMA, "args": {k: str(v) for k, v in vars(args).items()},
                                         "client_cpus": client_cpus, "runs": {str(n): runs[n] for n in counts},
                                         "medians_mops": {str(n): m for n, m in median.items()},
                                         "errors": {str(n): e for n, e in errors.items()}}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
