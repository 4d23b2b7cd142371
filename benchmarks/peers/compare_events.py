#!/usr/bin/python3
"""SEND ping-pong latency with completions waited for by polling and by completion
channels (rdmalab-bench lat --verb send, without and with -e/--events), side by side.

The two alternate round by round (order flipped every round), each run a server/client
pair on softnic0/softnic1 pinned to two cores, on a fabric of its own. A run's value is
rdmalab-bench's half-round-trip p50. Prints every round, each side's median, and the ratio
events / polling: what a program pays for sleeping between messages instead of spinning.

  benchmarks/peers/compare_events.py                    # 8 B, 20000 iterations, 3 rounds
  benchmarks/peers/compare_events.py --size 4096 --out results/compare_events.json

Works on any provider: --library '' runs the system libibverbs (e.g. rxe with
--server-dev rxe0 --client-dev rxe0). A benchmark: nothing is asserted; exit 1 only if a
run failed or its output did not parse.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pairrun  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
PAIR_TIMEOUT_S = 120.0
kSchemaVersion = 1
kWaits = {"polling": [], "events": ["--events"]}


def run_once(a, wait: str, round_index: int) -> float:
    port = pairrun.free_port()
    fabric = f"compare-events-{os.getpid()}-{round_index}-{wait}"
    env = dict(os.environ)
    if a.library:
        env["LD_LIBRARY_PATH"] = a.library + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
        env["SOFTNIC_FABRIC"] = fabric
        env["SOFTNIC_LINK"] = a.link
    server_core, client_core = a.cores.split(",")
    common = ["lat", "--verb", "send", "-s", str(a.size), "-n", str(a.iters), "--port", str(port),
              "--timeout", str(PAIR_TIMEOUT_S - 10), *kWaits[wait]]
    server = ["taskset", "-c", server_core, str(a.bench), *common, "-d", a.server_dev]
    client = ["taskset", "-c", client_core, str(a.bench), *common, "-d", a.client_dev, "--out_json", "127.0.0.1"]
    result = pairrun.run_pair(server, client, port, env, PAIR_TIMEOUT_S)
    if a.library:
        pairrun.run_one([str(a.softnic), "fabric", "rm", "--fabric", fabric], env, 30)
    if not result.ok:
        raise SystemExit(f"compare_events: the {wait} run failed:\n{result.describe()}")
    try:
        doc = json.loads(result.client.output[result.client.output.index("{"):])
        return float(doc["results"][0]["lat_us_p50"])
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise SystemExit(f"compare_events: cannot read lat_us_p50 from the {wait} client's JSON ({exc}):\n"
                         f"{result.client.output[-2000:]}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", type=int, default=8, help="SEND payload bytes (8)")
    p.add_argument("--iters", type=int, default=20000, help="ping-pongs per run (20000)")
    p.add_argument("--rounds", type=int, default=3, help="paired rounds (3)")
    p.add_argument("--cores", default="0,1", help="server core,client core (0,1)")
    p.add_argument("--link", default="ib", choices=["ib", "roce"], help="softnic fabric link layer (ib)")
    p.add_argument("--bench", type=Path, default=REPO / "build/bin/rdmalab-bench")
    p.add_argument("--softnic", type=Path, default=REPO / "build/bin/softnic")
    p.add_argument("--library", default=str(REPO / "build/lib/softnic"),
                   help="softnic's library dir ('' for the system libibverbs)")
    p.add_argument("--server-dev", default="softnic0")
    p.add_argument("--client-dev", default="softnic1")
    p.add_argument("--out", type=Path, help="write the JSON here")
    a = p.parse_args()
    for name in ("size", "iters", "rounds"):
        if getattr(a, name) < 1:
            p.error(f"--{name} {getattr(a, name)} must be at least 1")
    if not a.bench.is_file():
        p.error(f"--bench {a.bench} does not exist; build the rdmalab-bench target")

    runs: dict[str, list[float]] = {w: [] for w in kWaits}
    for r in range(a.rounds):
        order = list(kWaits) if r % 2 == 0 else list(reversed(kWaits))
        for wait in order:
            runs[wait].append(run_once(a, wait, r))
        print(f"round {r + 1}: polling {runs['polling'][-1]:8.2f} us   events {runs['events'][-1]:8.2f} us")
    medians = {w: statistics.median(v) for w, v in runs.items()}
    ratio = medians["events"] / medians["polling"]
    print(f"SEND ping-pong {a.size} B, half round trip p50, median of {a.rounds} rounds: "
          f"polling {medians['polling']:.2f} us, events {medians['events']:.2f} us, events/polling {ratio:.1f}x")
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps({
            "schema_version": kSchemaVersion,
            "context": {"size_bytes": a.size, "iters": a.iters, "rounds": a.rounds, "cores": a.cores,
                        "library": a.library, "link": a.link, "server_dev": a.server_dev, "client_dev": a.client_dev},
            "lat_us_p50_runs": runs,
            "lat_us_p50_median": medians,
            "events_over_polling": ratio,
        }, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
