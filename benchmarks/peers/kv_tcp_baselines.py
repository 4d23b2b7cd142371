#!/usr/bin/python3
"""memcached and Redis under rdmalab-kv's client (issue 13, acceptance 3, the TCP side).

The real servers from Debian over loopback TCP, the store pinned to one CPU and one client
process with --clients clients on another (16 B keys, 32 B values, 95% GET, uniform by
default), each configuration with one connection per window slot and with --pipeline (W
requests on one connection), in rounds that rotate the order; reports each
configuration's median Mops and p50/p99 round-trip latency, with the connections used.
A benchmark: nothing is asserted; the exit code is non-zero only when a run fails.
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
SCHEMA_VERSION = "rdmalab-kv-tcp-baselines/1"
STORES = [("memcached", ["--protocol", "text"]), ("memcached", ["--protocol", "binary"]), ("redis", [])]


def run_once(a, system: str, store_args: list[str], pipeline: bool, fabric: str) -> dict:
    port = pairrun.free_port()
    env = dict(os.environ, LD_LIBRARY_PATH=a.softnic_lib, SOFTNIC_FABRIC=fabric)
    common = [a.kv, "--system", system, *store_args, "--clients", str(a.clients), "--window", str(a.window),
              "-D", str(a.seconds), "--warmup", "0.5", "--keys", str(a.keys), "--value-size", str(a.value_size),
              "--put-fraction", str(a.put_fraction), "--workers", "1", "-p", str(port),
              *(["--pipeline"] if pipeline else [])]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "client.json"
        server = [common[0], "server", *common[1:], "-d", "softnic0", "--cpus", a.server_cpu]
        client = [common[0], "client", *common[1:], "-d", "softnic1", "--cpus", a.client_cpu,
                  f"--out_json={out}", "127.0.0.1"]
        r = pairrun.run_pair(server, client, port, env, a.seconds + 120.0)
        if not r.ok:
            raise RuntimeError(r.describe())
        row = json.loads(out.read_text())["results"][0]
        return {"mops": row["mops"], "lat_us_p50": row["lat_us_p50"], "lat_us_p99": row["lat_us_p99"]}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kv", default=str(ROOT / "build" / "bin" / "rdmalab-kv"))
    p.add_argument("--softnic-lib", default=str(ROOT / "build" / "lib" / "softnic"))
    p.add_argument("--softnic-cli", default=str(ROOT / "build" / "bin" / "softnic"))
    p.add_argument("--clients", type=int, default=4)
    p.add_argument("--window", type=int, default=4)
    p.add_argument("--seconds", type=float, default=5)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--keys", type=int, default=1 << 20)
    p.add_argument("--value-size", type=int, default=32)
    p.add_argument("--put-fraction", type=float, default=0.05)
    p.add_argument("--server-cpu", default="0")
    p.add_argument("--client-cpu", default="1")
    p.add_argument("--out-json", help="also write the results here")
    a = p.parse_args()

    configurations = [(system, args, pipeline) for system, args in STORES for pipeline in (False, True)]
    samples: dict[int, list[dict]] = {i: [] for i in range(len(configurations))}
    fabric = f"kv-tcp-{uuid.uuid4().hex[:8]}"
    try:
        for r in range(a.rounds):
            order = configurations[r % len(configurations):] + configurations[:r % len(configurations)]
            for configuration in order:
                i = configurations.index(configuration)
                samples[i].append(run_once(a, *configuration, fabric))
    finally:
        pairrun.subprocess.run([a.softnic_cli, "fabric", "rm", "--fabric", fabric], capture_output=True)

    rows = []
    print(f"# {a.clients} clients x W={a.window}, {a.value_size} B values, PUT {a.put_fraction:.0%}, uniform, "
          f"{a.keys} keys; store on CPU {a.server_cpu} (1 thread), clients on CPU {a.client_cpu}; "
          f"median of {a.rounds} rounds of {a.seconds} s; load average {os.getloadavg()[0]:.1f}")
    print(f"{'store':<24}{'connections':>22}{'Mops':>9}{'p50[us]':>10}{'p99[us]':>10}")
    for i, (system, args, pipeline) in enumerate(configurations):
        store = system + (f" {args[1]}" if args else "")
        connections = (f"{a.clients} pipelined" if pipeline else f"{a.clients * a.window} (1 per slot)")
        median = {k: statistics.median(s[k] for s in samples[i]) for k in ("mops", "lat_us_p50", "lat_us_p99")}
        rows.append({"store": store, "pipeline": pipeline, "connections": connections, **median,
                     "samples": samples[i]})
        print(f"{store:<24}{connections:>22}{median['mops']:>9.3f}{median['lat_us_p50']:>10.1f}"
              f"{median['lat_us_p99']:>10.1f}")
    if a.out_json:
        Path(a.out_json).write_text(json.dumps({"schema_version": SCHEMA_VERSION, "config": vars(a), "rows": rows},
                                               indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
