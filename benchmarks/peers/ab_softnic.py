#!/usr/bin/python3
"""A/B of two softnic variants on one perftest latency tool, side by side in one run.

A variant is a softnic library directory and environment settings, e.g. the library of a
baseline worktree against this one, or SOFTNIC_SINGLE_THREADED=0 against 1. The two
alternate round by round (order flipped every round), each run a server/client pair
pinned to two cores, each on a fabric of its own. A run's value is the median of
perftest's -H samples (full timer resolution). Prints every round, then each side's
median and best run and their ratios (B over A).

  benchmarks/peers/ab_softnic.py --a /tmp/base/build/lib/softnic --b build/lib/softnic
  benchmarks/peers/ab_softnic.py --tool ib_send_lat --a-env SOFTNIC_SINGLE_THREADED=0 \\
      --b-env SOFTNIC_SINGLE_THREADED=1

On a VM whose vCPU placement makes cross-core latency bimodal, compare the best runs (and
the rounds where both sides landed in the same mode), not a mixed median. A benchmark:
nothing is asserted; exit 1 only if a run failed or its output did not parse.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pairrun  # noqa: E402
from compare_ucx import ParseError, perftest_lat_us  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
PAIR_TIMEOUT_S = 120.0
LATENCY_TOOLS = ("ib_write_lat", "ib_send_lat", "ib_read_lat", "ib_atomic_lat")


def parse_env(pairs: list[str], flag: str) -> dict[str, str]:
    env = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise SystemExit(f"{flag} wants NAME=VALUE, got {pair!r}")
        env[name] = value
    return env


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    default_lib = str(REPO / "build/lib/softnic")
    p.add_argument("--tool", default="ib_write_lat", choices=LATENCY_TOOLS, help="perftest tool (ib_write_lat)")
    p.add_argument("--size", type=int, default=8, help="message size in bytes (8; ignored by ib_atomic_lat)")
    p.add_argument("--iters", type=int, default=100000, help="iterations per run (100000)")
    p.add_argument("--rounds", type=int, default=10, help="paired rounds (10)")
    p.add_argument("--cores", default="0,1", help="server core,client core (0,1)")
    p.add_argument("--a", default=default_lib, help="variant A's softnic library dir (build/lib/softnic)")
    p.add_argument("--b", default=default_lib, help="variant B's softnic library dir (build/lib/softnic)")
    p.add_argument("--a-env", action="append", default=[], metavar="NAME=VALUE", help="variant A's environment")
    p.add_argument("--b-env", action="append", default=[], metavar="NAME=VALUE", help="variant B's environment")
    p.add_argument("--softnic-cli", default=str(REPO / "build/bin/softnic"))
    p.add_argument("--perftest-dir", default="/usr/bin")
    a = p.parse_args()
    if a.rounds < 1:
        p.error(f"--rounds must be >= 1, got {a.rounds}")
    try:
        server_core, client_core = (int(x) for x in a.cores.split(","))
    except ValueError:
        p.error(f"--cores wants two core numbers like 0,1, got {a.cores!r}")
    variants = {"A": (a.a, parse_env(a.a_env, "--a-env")), "B": (a.b, parse_env(a.b_env, "--b-env"))}
    for name, (lib, _) in variants.items():
        if not (Path(lib) / "libibverbs.so.1").exists():
            p.error(f"variant {name}: {lib}/libibverbs.so.1 is missing")

    fabrics = {name: f"ab-{os.getpid()}-{name}" for name in variants}
    tool = str(Path(a.perftest_dir) / a.tool)
    size = [] if a.tool == "ib_atomic_lat" else ["-s", str(a.size)]
    common = [tool, *size, "-n", str(a.iters), "-F", "-H"]
    runs: dict[str, list[float]] = {name: [] for name in variants}
    failed = False
    try:
        for round_index in range(a.rounds):
            order = ("A", "B") if round_index % 2 == 0 else ("B", "A")
            values = {}
            for name in order:
                lib, extra = variants[name]
                env = dict(os.environ, LD_LIBRARY_PATH=lib, SOFTNIC_FABRIC=fabrics[name], **extra)
                port = pairrun.free_port()
                server = ["taskset", "-c", str(server_core), *common, "-p", str(port), "-d", "softnic0"]
                client = ["taskset", "-c", str(client_core), *common, "-p", str(port), "-d", "softnic1", "127.0.0.1"]
                r = pairrun.run_pair(server, client, port, env, PAIR_TIMEOUT_S)
                try:
                    value = perftest_lat_us(r.client.output) * 1000.0 if r.ok else None
                except ParseError as e:
                    print(f"variant {name}, round {round_index + 1}: {e}", file=sys.stderr)
                    value = None
                if value is None:
                    failed = True
                    print(f"variant {name}, round {round_index + 1} failed:\n{r.describe()}", file=sys.stderr)
                    continue
                values[name] = value
                runs[name].append(value)
            cells = "  ".join(f"{n}={values[n]:.1f} ns" if n in values else f"{n}=FAIL" for n in ("A", "B"))
            print(f"round {round_index + 1:2d}: {cells}", flush=True)
    finally:
        for fabric in fabrics.values():
            if Path(a.softnic_cli).exists():
                subprocess.run([a.softnic_cli, "fabric", "rm", "--fabric", fabric], capture_output=True, timeout=30)

    print(f"\n{' '.join([a.tool, *size])}, {a.rounds} rounds, cores {a.cores}")
    for name, (lib, extra) in variants.items():
        setting = " ".join(f"{k}={v}" for k, v in extra.items()) or "(no extra environment)"
        values = runs[name]
        summary = f"median {statistics.median(values):.1f} ns, best {min(values):.1f} ns" if values else "no runs"
        print(f"  {name}: {lib} {setting}: {summary}")
    if runs["A"] and runs["B"]:
        print(f"  B/A: median {statistics.median(runs['B']) / statistics.median(runs['A']):.3f}, "
              f"best {min(runs['B']) / min(runs['A']):.3f}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
