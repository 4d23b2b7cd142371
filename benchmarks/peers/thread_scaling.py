#!/usr/bin/python3
"""Aggregate inbound rate of rdmalab-bench tput as client threads are added, on softnic.

One client process with T threads (thread t pinned to CPU t) against a passive server, for
T in --threads, in paired rounds that alternate the order; reports each T's median rate
and its ratio to T = 1 (median of per-round ratios). A benchmark: nothing is asserted;
the exit code is non-zero only when a run fails.

Each round also runs the same client with post_send and poll_cq made free (the null-post
shim, as compare_ucx.py's ceiling): how far the bench's own loop scales on this machine
at that moment. On a VM whose two vCPUs may share a physical core, that ceiling's scaling
moves from round to round; `x ceiling's` is softnic's ratio over the ceiling's, per round.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pairrun  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SCHEMA_VERSION = "rdmalab-thread-scaling/2"


def run_once(a, threads: int, fabric: str, null_post: str | None = None) -> float:
    port = pairrun.free_port()
    env = dict(os.environ, LD_LIBRARY_PATH=a.softnic_lib, SOFTNIC_FABRIC=fabric)
    cpus = ",".join(str(c) for c in range(threads))
    common = [a.bench, "tput", "--verb", a.verb, "-c", a.connection, "-s", str(a.size), "-D", str(a.seconds),
              "--threads", str(threads), "-t", str(a.tx_depth), "-Q", str(a.cq_mod), "-p", str(port)]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "server.json"
        server = [*common, "-d", "softnic0", f"--out_json={out}"]
        client = [*common, "-d", "softnic1", "--cpus", cpus, "127.0.0.1"]
        if null_post is not None:
            client = ["env", f"LD_PRELOAD={null_post}", *client]
        r = pairrun.run_pair(server, client, port, env, 60.0)
        if not r.ok:
            raise RuntimeError(r.describe())
        return json.loads(out.read_text())["results"][0]["mops"]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bench", default=str(ROOT / "build" / "bin" / "rdmalab-bench"))
    p.add_argument("--softnic-lib", default=str(ROOT / "build" / "lib" / "softnic"))
    p.add_argument("--softnic-cli", default=str(ROOT / "build" / "bin" / "softnic"))
    p.add_argument("--threads", type=lambda s: [int(x) for x in s.split(",")], default=[1, 2])
    p.add_argument("--verb", default="write")
    p.add_argument("--connection", default="RC")
    p.add_argument("--size", type=int, default=64)
    p.add_argument("--tx-depth", type=int, default=128)
    p.add_argument("--cq-mod", type=int, default=16)
    p.add_argument("--seconds", type=float, default=2.0)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--null-post", default=str(ROOT / "build" / "lib" / "librdmalab-null-post.so"),
                   help="the LD_PRELOAD shim that measures the bench's own ceiling (target null_post_preload)")
    p.add_argument("--no-ceiling", action="store_true", help="leave the ceiling runs out")
    p.add_argument("--out")
    a = p.parse_args()
    if a.verb != "write" and not a.no_ceiling:
        p.error(f"--verb {a.verb}: the ceiling runs only for write (the shim completes no RECV); add --no-ceiling")
    if not a.no_ceiling and not Path(a.null_post).exists():
        p.error(f"{a.null_post} is missing (build the null_post_preload target, or --no-ceiling)")
    sides = {"softnic": None} if a.no_ceiling else {"softnic": None, "ceiling": a.null_post}
    fabric = f"thread-scaling-{uuid.uuid4().hex[:8]}"
    rates = {side: {t: [] for t in a.threads} for side in sides}
    ratios = {side: {t: [] for t in a.threads} for side in sides}
    try:
        for round_index in range(a.runs):
            order = a.threads if round_index % 2 == 0 else list(reversed(a.threads))
            for side, null_post in sides.items():
                this_round = {t: run_once(a, t, fabric, null_post) for t in order}
                for t in a.threads:
                    rates[side][t].append(this_round[t])
                    ratios[side][t].append(this_round[t] / this_round[a.threads[0]])
    finally:
        pairrun.run_one([a.softnic_cli, "fabric", "rm", "--fabric", fabric], os.environ, 30.0)
    print(f"tput {a.verb} {a.connection} {a.size} B inbound, 1 client process, median of {a.runs} paired rounds")
    first = "x threads=" + str(a.threads[0])
    header = f"{'threads':>8} {'Mops':>10} {first:>14}"
    if "ceiling" in sides:
        over_ceiling = "x ceiling's"
        header += f" {'ceiling Mops':>13} {'ceiling ' + first:>22} {over_ceiling:>12}"
    print(header)
    rows = []
    for t in a.threads:
        row = {"threads": t, "mops_median": statistics.median(rates["softnic"][t]), "mops_runs": rates["softnic"][t],
               "ratio_to_first": statistics.median(ratios["softnic"][t])}
        line = f"{t:>8} {row['mops_median']:>10.2f} {row['ratio_to_first']:>14.2f}"
        if "ceiling" in sides:
            row["ceiling_mops_median"] = statistics.median(rates["ceiling"][t])
            row["ceiling_mops_runs"] = rates["ceiling"][t]
            row["ceiling_ratio_to_first"] = statistics.median(ratios["ceiling"][t])
            row["ratio_over_ceiling_ratio"] = statistics.median(
                mine / theirs for mine, theirs in zip(ratios["softnic"][t], ratios["ceiling"][t]))
            line += (f" {row['ceiling_mops_median']:>13.2f} {row['ceiling_ratio_to_first']:>22.2f}"
                     f" {row['ratio_over_ceiling_ratio']:>12.2f}")
        rows.append(row)
        print(line)
    if a.out:
        Path(a.out).write_text(json.dumps({"schema_version": SCHEMA_VERSION, "config": vars(a), "rows": rows},
                                          indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
