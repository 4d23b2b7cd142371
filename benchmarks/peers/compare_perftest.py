#!/usr/bin/python3
"""rdmalab-bench against perftest on the same devices, side by side in one run.

For each metric, perftest's tool and rdmalab-bench run with the same configuration
(size, window, CQ moderation, inline size as perftest uses on the device, the same warm-up: none
before perftest's latency iterations, --bw-warmup seconds before a rate window, which
perftest calls its margin) and the same pinning (server on --server-core, client on
--client-core), in paired rounds that alternate which tool goes first. Reported per metric: the median of each side over --runs rounds, the
median of the per-round ratios (rdmalab / perftest), and whether it lies within the
target band (default +-15%). Latency compares medians (perftest's t_typical with
rdmalab's lat_us_p50); rate compares MsgRate[Mpps] with mops.

Backends: softnic (default; this repo's libibverbs on a fabric of its own) or verbs (the
system libibverbs, e.g. rxe0/rxe1 inside scripts/rxe-vm). A benchmark, not a test:
nothing is asserted; the exit code is non-zero only if a command failed or its output
could not be parsed.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import re
import statistics
import sys
import tempfile
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pairrun  # noqa: E402
from compare_ucx import ParseError, perftest_lat_us, perftest_rate_mpps  # noqa: E402

SCHEMA_VERSION = "rdmalab-compare-perftest/1"
PAIR_TIMEOUT_S = 120.0
ROOT = Path(__file__).resolve().parents[2]
# perftest 4.5's defaults (perftest_parameters.h; inline: its mlx5 values), given to both
# tools explicitly.
PERFTEST_TX_DEPTH_BW = 128
PERFTEST_CQ_MOD_BW = 100
PERFTEST_INLINE = {"write": 220, "send": 236, "read": 0}
# perftest prints the inline size it really used; on devices it does not recognize (rxe,
# any non-Mellanox provider) it ignores -I and uses 0.
_PERFTEST_INLINE_USED = re.compile(r"Max inline data\s*:\s*(\d+)\s*\[B\]")
_UNMEASURABLE = re.compile(r"^\s*\d+\s+\d+\s+inf\b", re.M)


def runs_perftest(side: str, a) -> bool:
    """Whether a pair's side is perftest: always the first, the second too in the A/A control."""
    return side == "perftest" or a.against == "perftest"


def inline_policy(a) -> str:
    """--inline auto: perftest's inline defaults apply to Mellanox devices only."""
    if a.inline != "auto":
        return a.inline
    mellanox = all(dev.startswith("mlx") for dev in (a.server_dev, a.client_dev))
    return "mlx5" if mellanox else "none"


def check_perftest_inline(out: str, m: Metric, a) -> None:
    """A pair compares one test only if perftest used the inline size rdmalab-bench was given."""
    used = _PERFTEST_INLINE_USED.search(out)
    if m.verb == "read" or used is None or int(used.group(1)) == m.inline(a):
        return
    raise ParseError(f"perftest used inline {used.group(1)} B where rdmalab-bench was given {m.inline(a)} B: "
                     "not the same test (perftest ignores -I on devices it does not recognize, such as softnic "
                     "and rxe; use --inline none there)")


def perftest_unmeasurable(out: str) -> str | None:
    """perftest converts cycles with its own CPU-MHz estimate; where that fails (qemu TCG:
    'Correlation coefficient r^2 < 0.9') it prints inf. Not a failed run: a tool limit."""
    if _UNMEASURABLE.search(out):
        return "perftest printed inf: its CPU-MHz estimate failed (e.g. under qemu TCG)"
    return None


@dataclasses.dataclass(frozen=True)
class Metric:
    kind: str  # "lat" or "bw"
    verb: str
    size: int

    @property
    def id(self) -> str:
        return f"{self.verb}_{self.kind}_{self.size}B"

    @property
    def unit(self) -> str:
        return "us" if self.kind == "lat" else "Mpps"

    def inline(self, a) -> int:
        """The inline size both tools get explicitly: perftest's default for Mellanox NICs, or
        none, which is what perftest uses on every device it does not recognize (softnic, rxe)."""
        if inline_policy(a) == "none":
            return 0
        return PERFTEST_INLINE[self.verb] if self.size <= PERFTEST_INLINE[self.verb] else 0

    def perftest_args(self, a) -> list[str]:
        tool = f"ib_{self.verb}_{self.kind}"
        inline = ["-I", str(self.inline(a))] if self.verb != "read" else []
        if self.kind == "lat":
            return [tool, "-s", str(self.size), "-n", str(a.lat_iters), *inline]
        # perftest samples from `margin` seconds after the start until `margin` before the end.
        total = a.bw_seconds + 2 * a.bw_warmup
        return [tool, "-s", str(self.size), "-D", str(total), "-f", str(a.bw_warmup), "-t", str(PERFTEST_TX_DEPTH_BW),
                "-Q", str(PERFTEST_CQ_MOD_BW), *inline]

    def bench_args(self, a) -> list[str]:
        inline = self.inline(a)
        if self.kind == "lat":
            return ["lat", "--verb", self.verb, "-s", str(self.size), "-n", str(a.lat_iters), "-I", str(inline),
                    "--warmup", "0"]
        return ["tput", "--verb", self.verb, "-s", str(self.size), "-D", str(a.bw_seconds), "--warmup",
                str(a.bw_warmup),
                "-t", str(PERFTEST_TX_DEPTH_BW), "-Q", str(PERFTEST_CQ_MOD_BW), "-I", str(inline)]


def metrics(a) -> list[Metric]:
    out = [Metric("lat", v, s) for s in a.lat_sizes for v in a.lat_verbs]
    out += [Metric("bw", v, s) for s in a.bw_sizes for v in a.bw_verbs]
    return out


class Runner:
    def __init__(self, a) -> None:
        self.a = a
        self.fabric = f"compare-perftest-{uuid.uuid4().hex[:8]}"

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        if self.a.backend == "softnic":
            env.update(LD_LIBRARY_PATH=self.a.softnic_lib, SOFTNIC_FABRIC=self.fabric, SOFTNIC_LINK=self.a.link)
        return env

    def pair(self, args: list[str], tool_path: str, port: int, extra_server: list[str],
             extra_client: list[str]) -> tuple[list[str], list[str]]:
        gid = ["-x", str(self.a.gid_index)] if self.a.gid_index is not None else []
        common = [tool_path, *args, "-p", str(port), *gid]
        return (["taskset", "-c", str(self.a.server_core), *common, "-d", self.a.server_dev, *extra_server],
                ["taskset", "-c", str(self.a.client_core), *common, "-d", self.a.client_dev, *extra_client,
                 "127.0.0.1"])

    def perftest(self, m: Metric, record: dict, side: str = "perftest") -> float | None:
        args = m.perftest_args(self.a)
        port = pairrun.free_port()
        server, client = self.pair(args[1:], str(Path(self.a.perftest_dir) / args[0]), port, ["-F"], ["-F"])
        r = pairrun.run_pair(server, client, port, self.env(), PAIR_TIMEOUT_S)
        record["commands"][side] = {"server": server, "client": client}
        if not r.ok:
            record["errors"].append(r.describe())
            return None
        reason = perftest_unmeasurable(r.client.output)
        if reason:
            record["perftest_unmeasurable"] = reason
            return None
        try:
            check_perftest_inline(r.client.output, m, self.a)
            return (perftest_lat_us if m.kind == "lat" else perftest_rate_mpps)(r.client.output)
        except ParseError as e:
            record["errors"].append(f"{e}\n{r.describe()}")
            return None

    def rdmalab(self, m: Metric, record: dict) -> float | None:
        if self.a.against == "perftest":
            return self.perftest(m, record, "rdmalab")
        port = pairrun.free_port()
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "client.json"
            server, client = self.pair(m.bench_args(self.a), self.a.bench, port, [],
                                       [f"--out_json={out}"])
            r = pairrun.run_pair(server, client, port, self.env(), PAIR_TIMEOUT_S)
            record["commands"]["rdmalab"] = {"server": server, "client": client}
            if not r.ok:
                record["errors"].append(r.describe())
                return None
            row = json.loads(out.read_text())["results"][0]
        return row["lat_us_p50"] if m.kind == "lat" else row["mops"]

    def remove_fabric(self) -> None:
        if self.a.backend == "softnic":
            pairrun.run_one([self.a.softnic_cli, "fabric", "rm", "--fabric", self.fabric], os.environ, 30.0)


def measure(a) -> list[dict]:
    runner = Runner(a)
    rows = []
    try:
        for m in metrics(a):
            record = {"metric": m.id, "unit": m.unit, "perftest": [], "rdmalab": [], "ratios": [], "errors": [],
                      "commands": {}}
            for round_index in range(a.runs):
                order = ("perftest", "rdmalab") if round_index % 2 == 0 else ("rdmalab", "perftest")
                values = {}
                for side in order:
                    values[side] = getattr(runner, side)(m, record)
                    if values[side] is not None:
                        record[side].append(values[side])
                if values["perftest"] and values["rdmalab"]:
                    record["ratios"].append(values["rdmalab"] / values["perftest"])
            finish(record, a.target_band)
            rows.append(record)
    finally:
        runner.remove_fabric()
    return rows


# ---------------------------------------------------------------------------------------
# The VM tier: no Python in the guest, so the same pairs run from a bash script there
# (scripts/rxe-vm) and the guest log is parsed here afterwards.

_GUEST_PRELUDE = r"""#!/bin/bash
# Generated by benchmarks/peers/compare_perftest.py --guest-script: every pair between markers.
wait_listening() {  # port: poll the listen table, bounded (no fixed sleep)
  for _ in $(seq 1 1000); do ss -ltn | grep -q ":$1 " && return 0; sleep 0.01; done
  return 1
}
pair() {  # id port json_file -- server argv... -- client argv...
  local id=$1 port=$2 json=$3; shift 4
  local server=() client=()
  while [[ $1 != -- ]]; do server+=("$1"); shift; done; shift
  client=("$@")
  echo "=== BEGIN $id"
  rm -f "$json"
  timeout 120 "${server[@]}" > /tmp/pair-server.out 2>&1 &
  local spid=$!
  wait_listening "$port" || echo "server did not listen on $port"
  timeout 120 "${client[@]}" 2>&1
  local rc=$?
  wait "$spid"; local src=$?
  [[ -n $json && -f $json ]] && { echo "=== JSON"; cat "$json"; }
  echo "=== END $id client=$rc server=$src"
}
"""


def guest_script(a) -> str:
    lines = [_GUEST_PRELUDE]
    port = 20000
    gid = ["-x", "$RXE_GID_INDEX"] if a.gid_index is None else ["-x", str(a.gid_index)]
    for m in metrics(a):
        for round_index in range(a.runs):
            order = ("perftest", "rdmalab") if round_index % 2 == 0 else ("rdmalab", "perftest")
            for side in order:
                port += 1
                if runs_perftest(side, a):
                    args = m.perftest_args(a)
                    tool, extra, json_file = args[0], ["-F"], ""
                    args = args[1:]
                else:
                    tool, args, extra, json_file = a.bench, m.bench_args(a), [], "/tmp/pair-client.json"
                common = [tool, *args, "-p", str(port), *gid]
                server = ["taskset", "-c", str(a.server_core), *common, "-d", a.server_dev, *extra]
                client = ["taskset", "-c", str(a.client_core), *common, "-d", a.client_dev, *extra,
                          *([f"--out_json={json_file}"] if json_file else []), "127.0.0.1"]
                lines.append(f"pair {m.id}/{round_index}/{side} {port} '{json_file}' -- {' '.join(server)} -- "
                             f"{' '.join(client)}")
    return "\n".join(lines) + "\n"


def parse_guest_log(a, log: str) -> list[dict]:
    blocks: dict[str, tuple[str, str]] = {}
    for match in re.finditer(r"^=== BEGIN (\S+)\n(.*?)^=== END \1 (client=\d+ server=\d+)$", log, re.M | re.S):
        blocks[match.group(1)] = (match.group(2), match.group(3))
    rows = []
    for m in metrics(a):
        record = {"metric": m.id, "unit": m.unit, "perftest": [], "rdmalab": [], "ratios": [], "errors": [],
                  "commands": {"guest_script": "see --guest-script"}}
        for round_index in range(a.runs):
            values = {}
            for side in ("perftest", "rdmalab"):
                key = f"{m.id}/{round_index}/{side}"
                text, status = blocks.get(key, ("", "missing"))
                values[side] = None
                try:
                    if status != "client=0 server=0":
                        raise ParseError(f"{key}: {status}")
                    if runs_perftest(side, a) and perftest_unmeasurable(text):
                        record["perftest_unmeasurable"] = perftest_unmeasurable(text)
                        continue
                    if runs_perftest(side, a):
                        check_perftest_inline(text, m, a)
                        values[side] = (perftest_lat_us if m.kind == "lat" else perftest_rate_mpps)(text)
                    else:
                        row = json.loads(text.split("=== JSON\n", 1)[1])["results"][0]
                        values[side] = row["lat_us_p50"] if m.kind == "lat" else row["mops"]
                    record[side].append(values[side])
                except (ParseError, IndexError, ValueError, KeyError) as e:
                    record["errors"].append(f"{key}: {e}\n{text[-2000:]}")
            if values["perftest"] and values["rdmalab"]:
                record["ratios"].append(values["rdmalab"] / values["perftest"])
        finish(record, a.target_band)
        rows.append(record)
    return rows


def finish(record: dict, band: float) -> None:
    for side in ("perftest", "rdmalab"):
        record[f"{side}_median"] = statistics.median(record[side]) if record[side] else None
    record["ratio"] = statistics.median(record["ratios"]) if record["ratios"] else None
    record["within_target"] = record["ratio"] is not None and abs(record["ratio"] - 1.0) <= band
    print_row(record, band)


def print_row(r: dict, band: float) -> None:
    def f(v):
        return "-" if v is None else f"{v:10.3f}"
    met = "-" if r["ratio"] is None else ("yes" if r["within_target"] else "NO")
    if r.get("perftest_unmeasurable"):
        met = "n/a: " + r["perftest_unmeasurable"]
    print(f"{r['metric']:>18} {r['unit']:>5} {f(r['perftest_median'])} {f(r['rdmalab_median'])} "
          f"{f(r['ratio'])}  +-{band:.0%}: {met}", flush=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    build = ROOT / "build"
    p.add_argument("--backend", choices=["softnic", "verbs"], default="softnic")
    p.add_argument("--bench", default=str(build / "bin" / "rdmalab-bench"))
    p.add_argument("--softnic-lib", default=str(build / "lib" / "softnic"))
    p.add_argument("--softnic-cli", default=str(build / "bin" / "softnic"))
    p.add_argument("--perftest-dir", default="/usr/bin")
    p.add_argument("--server-dev", default="softnic0")
    p.add_argument("--client-dev", default="softnic1")
    p.add_argument("--gid-index", type=int, default=None, help="-x for both tools (RoCE/rxe needs one)")
    p.add_argument("--link", choices=["ib", "roce"], default="ib", help="softnic fabric link layer")
    p.add_argument("--inline", choices=["auto", "mlx5", "none"], default="auto",
                   help="inline sizes for both tools: perftest's mlx5 defaults (220 B WRITE, 236 B SEND), or "
                        "none, which is what perftest uses on devices it does not recognize (softnic, rxe); "
                        "auto: mlx5 on mlx* devices, else none")
    p.add_argument("--server-core", type=int, default=0)
    p.add_argument("--client-core", type=int, default=1)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--lat-iters", type=int, default=20000)
    p.add_argument("--bw-seconds", type=int, default=2, help="measured window of a rate pair")
    p.add_argument("--bw-warmup", type=int, default=1,
                   help="seconds of traffic before the window (perftest's -f margin; it also runs that long after)")
    p.add_argument("--lat-sizes", type=lambda s: [int(x) for x in s.split(",")], default=[8])
    p.add_argument("--bw-sizes", type=lambda s: [int(x) for x in s.split(",")], default=[64])
    p.add_argument("--lat-verbs", type=lambda s: s.split(","), default=["write", "read", "send"])
    p.add_argument("--bw-verbs", type=lambda s: s.split(","), default=["write", "send"])
    p.add_argument("--target-band", type=float, default=0.15)
    p.add_argument("--against", choices=["rdmalab-bench", "perftest"], default="rdmalab-bench",
                   help="the second tool of every pair; perftest is an A/A control: perftest against itself in "
                        "the same paired rounds shows how far the tier's noise alone moves the ratio")
    p.add_argument("--out", help="write the JSON document here")
    p.add_argument("--guest-script", metavar="FILE",
                   help="write a bash script running every pair (for scripts/rxe-vm) and exit")
    p.add_argument("--guest-log", metavar="FILE", help="parse the log of that script instead of running pairs")
    a = p.parse_args()
    for verb in a.lat_verbs + a.bw_verbs:
        if verb not in PERFTEST_INLINE:
            p.error(f"verb {verb!r}: valid verbs are {', '.join(PERFTEST_INLINE)}")
    if a.guest_script:
        Path(a.guest_script).write_text(guest_script(a))
        return 0
    second = "perftest" if a.against == "perftest" else "rdmalab"
    print(f"{'metric':>18} {'unit':>5} {'perftest':>10} {second:>10} {'ratio':>10}  target")
    rows = parse_guest_log(a, Path(a.guest_log).read_text(errors="replace")) if a.guest_log else measure(a)
    document = {"schema_version": SCHEMA_VERSION,
                "context": {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
                            "backend": a.backend, "devices": [a.server_dev, a.client_dev],
                            "cores": [a.server_core, a.client_core], "runs": a.runs,
                            "second_tool": a.against, "inline": inline_policy(a), "bw_warmup_s": a.bw_warmup,
                            "target_band": a.target_band, "host": os.uname().nodename},
                "metrics": rows}
    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(json.dumps(document, indent=2) + "\n")
    failed = [r for r in rows if r["errors"]]
    for r in failed:
        print(f"--- {r['metric']}: {len(r['errors'])} failed run(s)\n{r['errors'][0]}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
