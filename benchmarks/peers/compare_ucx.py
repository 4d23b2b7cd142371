#!/usr/bin/python3
"""softnic (perftest on softnic) against UCX's shared-memory transport (ucx_perftest,
UCT posix) and against the cross-core cache-line floor, side by side in one run.

Every measurement is a server and a client pinned to two different cores (taskset),
repeated --runs times (default 5) in paired rounds (softnic and UCX alternate); the
median run of each side, the median of the per-round ratios and the ratio of each side's
best run are reported.

On a VM the two vCPUs' placement on the host changes from one run to the next, and with
it the cost of every cache line crossing cores (this machine's floor is ~15, ~35 or
~220 ns: two hyperthreads of one core, two cores sharing a cache, or farther). A short
cache-line ping-pong on the same two cores before and after every run classes the run
"sibling", "near" or "far" (--placement-bounds-ns); a round counts towards the ratio only
when all its runs saw one placement, and the ratio is also given per placement.

Prints a table (metric, softnic, ucx, ratios, target, met?) and, with --out FILE, one
JSON document (schema_version, context with host info and tool versions, every command
used, every round with its probes).

This is a benchmark, not a test: targets are reported, never asserted. The exit code
is non-zero only when a command failed to run or its output could not be parsed.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pairrun  # noqa: E402

SCHEMA_VERSION = 2  # 2: rounds carry their placement; ratios come from matched rounds only
REPO = Path(__file__).resolve().parents[2]
PAIR_TIMEOUT_S = 120.0
UCX_TLS = "posix,self"
# UCT needs the transport and device named explicitly; posix/memory is UCX's
# shared-memory transport (UCX_TLS=posix,self is what UCP would select).
UCX_TRANSPORT = ["-x", "posix", "-d", "memory"]


class ParseError(Exception):
    pass


# ---------------------------------------------------------------------------------------
# Output parsers (formats checked against perftest 4.5 and ucx_perftest 1.13)

_NUM = r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"


def _perftest_table(out: str) -> tuple[list[str], list[list[float]]]:
    """The header tokens and numeric rows of perftest's result table."""
    lines = out.splitlines()
    for i, line in enumerate(lines):
        if line.strip().startswith("#bytes"):
            header = line.split()
            rows = []
            for row in lines[i + 1:]:
                toks = row.split()
                if toks and all(re.fullmatch(_NUM, t) for t in toks):
                    rows.append([float(t) for t in toks])
                elif rows:
                    break
            if rows:
                return header, rows
    raise ParseError("no perftest result table (a '#bytes' header followed by numeric rows)")


_HISTOGRAM_ROW = re.compile(rf"^\d+, ({_NUM})$")


def perftest_lat_us(out: str) -> float:
    """Median latency. With -H perftest prints every sorted sample ("#, usec" then "i, value"
    rows, to the timer's resolution); their median is used. Without it, the t_typical column
    (perftest's median, rounded to 10 ns) of the first row."""
    lines = out.splitlines()
    if "#, usec" in (line.strip() for line in lines):
        start = next(i for i, line in enumerate(lines) if line.strip() == "#, usec") + 1
        samples = []
        for line in lines[start:]:
            match = _HISTOGRAM_ROW.match(line.strip())
            if match is None:
                break
            samples.append(float(match.group(1)))
        if not samples:
            raise ParseError("perftest printed '#, usec' (-H) but no 'i, value' sample rows after it")
        return statistics.median(samples)
    header, rows = _perftest_table(out)
    idx = next((i for i, t in enumerate(header) if t.startswith("t_typical")), None)
    if idx is None:
        raise ParseError(f"no t_typical column in perftest header {header}")
    # Every header token before t_typical is one word (#bytes #iterations t_min t_max).
    return rows[0][idx]


def perftest_rate_mpps(out: str) -> float:
    """Message rate: the MsgRate[Mpps] column, the last one of the table."""
    header, rows = _perftest_table(out)
    if not header[-1].startswith("MsgRate"):
        raise ParseError(f"last perftest column is {header[-1]!r}, expected MsgRate[Mpps]")
    return rows[0][-1]


def bench_rate_mops(out: str) -> float:
    """rdmalab-bench's message rate: the Mops column of its table's first row."""
    header, rows = _perftest_table(out)
    if "Mops" not in header:
        raise ParseError(f"no Mops column in rdmalab-bench header {header}")
    return rows[0][header.index("Mops")]


def _ucx_csv(out: str) -> dict[str, float]:
    lines = out.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("iterations,") and i + 1 < len(lines):
            keys = line.strip().split(",")
            vals = lines[i + 1].strip().split(",")
            if len(vals) == len(keys):
                try:
                    return {k: float(v) for k, v in zip(keys, vals)}
                except ValueError:
                    pass
    raise ParseError("no ucx_perftest CSV result (-v): an 'iterations,...' header and a value line")


def ucx_lat_us(out: str) -> float:
    row = _ucx_csv(out)
    key = next((k for k in row if k.endswith("_percentile_lat")), None)
    if key is None:
        raise ParseError(f"no percentile latency column in {sorted(row)}")
    return row[key]


def ucx_rate_mpps(out: str) -> float:
    return _ucx_csv(out)["overall_mr"] / 1e6


# ---------------------------------------------------------------------------------------
# What is measured

BENCH = "rdmalab-bench"


@dataclasses.dataclass(frozen=True)
class Side:
    tool: str  # perftest tool, BENCH, or ucx_perftest test name
    args: tuple[str, ...]
    parse: Callable[[str], float]


@dataclasses.dataclass(frozen=True)
class Metric:
    id: str
    unit: str  # "us" or "mpps"
    better: str  # "lower" or "higher"
    softnic: Side
    ucx: Side
    target_ratio: float | None  # softnic/ucx; lower-is-better wants <=, higher wants >=
    # Also measure the tool's own ceiling: the softnic side with post_send and poll_cq made
    # free (null_post_preload.cc, in the client), paired with the other two each round;
    # softnic's rate should reach ceiling_target of it (the ratio of each round's pair).
    ceiling: bool = False
    ceiling_target: float | None = None

    def met(self, ratio: float) -> bool | None:
        if self.target_ratio is None:
            return None
        return ratio <= self.target_ratio if self.better == "lower" else ratio >= self.target_ratio


def metrics(a) -> list[Metric]:
    lat_n, bw_n = str(a.lat_iters), str(a.bw_iters)
    bench_s = str(a.bench_seconds)

    def bench_tput(verb: str, connection: str, depth: str) -> Side:
        return Side(BENCH, ("tput", "--verb", verb, "-c", connection, "-s", "32", "-I", "32", "-Q", depth,
                            "-D", bench_s), bench_rate_mops)

    return [
        Metric("send_rate_32B_ud", "mpps", "higher", bench_tput("send", "UD", "16"),
               Side("am_bw", ("-s", "32", "-n", bw_n), ucx_rate_mpps), 1.0),
        Metric("send_rate_32B_rc", "mpps", "higher", bench_tput("send", "RC", "16"),
               Side("am_bw", ("-s", "32", "-n", bw_n), ucx_rate_mpps), 1.0),
        Metric("write_rate_32B_inline", "mpps", "higher", bench_tput("write", "RC", "100"),
               Side("put_bw", ("-s", "32", "-n", bw_n), ucx_rate_mpps), 1.0),
        Metric("write_lat_8B", "us", "lower",
               Side("ib_write_lat", ("-s", "8", "-n", lat_n, "-H"), perftest_lat_us),
               Side("put_lat", ("-s", "8", "-n", lat_n), ucx_lat_us), 1.0),
        Metric("send_lat_8B", "us", "lower",
               Side("ib_send_lat", ("-s", "8", "-n", lat_n, "-H"), perftest_lat_us),
               Side("am_lat", ("-s", "8", "-n", lat_n), ucx_lat_us), 1.2),
        Metric("write_rate_32B", "mpps", "higher",
               Side("ib_write_bw", ("-s", "32", "-n", bw_n), perftest_rate_mpps),
               Side("put_bw", ("-s", "32", "-n", bw_n), ucx_rate_mpps), 1.0, ceiling=True, ceiling_target=0.8),
        Metric("read_lat_8B", "us", "lower",
               Side("ib_read_lat", ("-s", "8", "-n", lat_n, "-H"), perftest_lat_us),
               Side("get", ("-D", "bcopy", "-s", "8", "-O", "1", "-n", lat_n), ucx_lat_us), None),
        Metric("fetch_add_lat_8B", "us", "lower",
               Side("ib_atomic_lat", ("-A", "FETCH_AND_ADD", "-n", lat_n, "-H"), perftest_lat_us),
               Side("fadd", ("-s", "8", "-O", "1", "-n", lat_n), ucx_lat_us), None),
    ]


# ---------------------------------------------------------------------------------------
# Running

@dataclasses.dataclass
class Runner:
    a: argparse.Namespace
    fabric: str

    def _pin(self, core: int) -> list[str]:
        return ["taskset", "-c", str(core)]

    def softnic_cmds(self, s: Side, port: int):
        if s.tool == BENCH:
            common = [self.a.bench, *s.args, "-p", str(port)]
            return (self._pin(self.a.server_core) + common + ["-d", "softnic0"],
                    self._pin(self.a.client_core) + common + ["-d", "softnic1", "--index", "0", "127.0.0.1"])
        tool = str(Path(self.a.perftest_dir) / s.tool)
        gid = ["-x", "0"] if self.a.link == "roce" else []
        common = [tool, *s.args, "-F", "-p", str(port), *gid]
        return (self._pin(self.a.server_core) + common + ["-d", "softnic0"],
                self._pin(self.a.client_core) + common + ["-d", "softnic1", "127.0.0.1"])

    def softnic_env(self) -> dict[str, str]:
        env = dict(os.environ)
        old = env.get("LD_LIBRARY_PATH")
        env["LD_LIBRARY_PATH"] = self.a.softnic_lib + (":" + old if old else "")
        env["SOFTNIC_FABRIC"] = self.fabric
        env["SOFTNIC_LINK"] = self.a.link
        env["SOFTNIC_SINGLE_THREADED"] = "1" if self.a.single_threaded else "0"
        return env

    def ucx_cmds(self, s: Side, port: int):
        common = [self.a.ucx_perftest, "-t", s.tool, *UCX_TRANSPORT, *s.args, "-v", "-p", str(port)]
        return (self._pin(self.a.server_core) + common,
                self._pin(self.a.client_core) + [common[0], "127.0.0.1"] + common[1:])

    def ucx_env(self) -> dict[str, str]:
        return dict(os.environ, UCX_TLS=UCX_TLS)

    def measure_once(self, which: str, s: Side, record: dict) -> float | None:
        """Runs one pair once; appends its value (or error) to record; returns the value."""
        port = pairrun.free_port()
        if which in ("softnic", "ceiling"):
            server, client = self.softnic_cmds(s, port)
            if which == "ceiling":
                client = ["env", f"LD_PRELOAD={self.a.null_post}"] + client
            env = self.softnic_env()
        else:
            server, client = self.ucx_cmds(s, port)
            env = self.ucx_env()
        record["commands"] = {"server": server, "client": client}
        r = pairrun.run_pair(server, client, port, env, PAIR_TIMEOUT_S)
        if not r.ok:
            record["errors"].append(r.describe())
            return None
        try:
            value = s.parse(r.client.output)
        except ParseError as e:
            record["errors"].append(f"{e}\n{r.describe()}")
            return None
        record["runs"].append(value)
        return value

    def cacheline_argv(self, *extra: str) -> list[str]:
        return [self.a.cacheline, "--cores", f"{self.a.server_core},{self.a.client_core}", *extra, "--json"]

    def cacheline_ns(self, argv: list[str]) -> float:
        """One cache-line ping-pong run's one-way median (ns); ParseError if it failed."""
        r = pairrun.run_one(argv, os.environ, PAIR_TIMEOUT_S)
        try:
            if r.returncode != 0:
                raise ParseError(f"exit code {r.returncode}")
            return json.loads(r.output)["one_way_ns_median"]
        except (ParseError, ValueError, KeyError) as e:
            raise ParseError(f"{' '.join(argv)}: {e}\n{r.output}") from e

    def probe_ns(self) -> float | None:
        """A short ping-pong on the run's two cores: the placement right now (None if it failed)."""
        try:
            return self.cacheline_ns(self.cacheline_argv("--rounds", "101", "--batch", "200"))
        except ParseError:
            return None

    def floor(self) -> dict:
        argv = self.cacheline_argv()
        values, errors = [], []
        for _ in range(self.a.runs):
            try:
                values.append(self.cacheline_ns(argv) / 1000.0)
            except ParseError as e:
                errors.append(str(e))
        return {"median": statistics.median(values) if values else None,
                "best": min(values) if values else None, "runs": values,
                "commands": {"single": argv}, "errors": errors}


def remove_fabric(a, fabric: str) -> None:
    if Path(a.softnic_cli).exists():
        pairrun.run_one([a.softnic_cli, "fabric", "rm", "--fabric", fabric], os.environ, 30.0)


# ---------------------------------------------------------------------------------------
# Context and reporting

def _cmd_out(argv: list[str]) -> str | None:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def host_info() -> dict:
    cpu = None
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), None)
    except OSError:
        pass
    return {
        "hostname": platform.node(),
        "kernel": platform.release(),
        "machine": platform.machine(),
        "cpu_model": cpu,
        "cpus_online": os.cpu_count(),
        "loadavg_1m": os.getloadavg()[0],
        "python": sys.version.split()[0],
    }


def tool_versions() -> dict:
    q = lambda pkg: _cmd_out(["dpkg-query", "-W", "-f", "${Version}", pkg])  # noqa: E731
    return {"perftest": q("perftest"), "ucx_utils": q("ucx-utils"), "ibverbs_utils": q("ibverbs-utils"),
            "rdmalab_git": _cmd_out(["git", "-C", str(REPO), "rev-parse", "--verify", "-q", "HEAD"])}


def fmt(v: float | None, unit: str) -> str:
    if v is None:
        return "FAIL"
    return f"{v * 1000:.0f} ns" if unit == "us" else f"{v:.2f} Mpps"


def print_table(rows: list[dict]) -> None:
    head = ["metric", "softnic", "ucx / floor", "ratio", "met?", "rounds by placement", "best-run ratio", "met?",
            "target"]
    cells = [head]
    as_ratio = lambda v: "-" if v is None else f"{v:.2f}x"  # noqa: E731
    as_met = {True: "yes", False: "NO", None: "-"}.get
    for r in rows:
        target = "report" if r["target"] is None else r["target"]
        cells.append([r["label"], r["softnic_text"], r["peer_text"], as_ratio(r["ratio"]), as_met(r["met"]),
                      r["placements"], as_ratio(r["best_ratio"]), as_met(r["met_by_best"]), target])
    widths = [max(len(c[i]) for c in cells) for i in range(len(head))]
    for n, c in enumerate(cells):
        print("  ".join(x.ljust(w) for x, w in zip(c, widths)).rstrip())
        if n == 0:
            print("  ".join("-" * w for w in widths))


def ratio_of(x: float | None, y: float | None) -> float | None:
    return x / y if x is not None and y else None


# ---------------------------------------------------------------------------------------
# Placement: which of the host's cache-line modes a run saw

SIBLING, NEAR, FAR, MIXED = "sibling", "near", "far", "mixed"
PLACEMENTS = (SIBLING, NEAR, FAR)  # in order of one-way cache-line latency


def placement_of(floors_ns: list[float | None], bounds_ns: tuple[float, float]) -> str | None:
    """The placement the probes around some runs saw: SIBLING below bounds_ns[0], NEAR
    below bounds_ns[1], else FAR, when every probe fell in the same class; MIXED when they
    did not or one failed; None when unprobed."""
    if not floors_ns:
        return None
    if any(f is None for f in floors_ns):
        return MIXED
    classes = {PLACEMENTS[sum(f >= b for b in bounds_ns)] for f in floors_ns}
    return classes.pop() if len(classes) == 1 else MIXED


def summarize_rounds(rounds: list[dict], key: str) -> dict:
    """The median of rounds[i][key] over the rounds whose runs all saw one placement (or that
    were not probed), overall and per placement; MIXED rounds are counted, not used."""
    usable = [r for r in rounds if r.get(key) is not None and r["placement"] != MIXED]
    by_placement = {}
    for where in PLACEMENTS:
        values = [r[key] for r in usable if r["placement"] == where]
        if values:
            by_placement[where] = {"median": statistics.median(values), "rounds": len(values)}
    values = [r[key] for r in usable]
    return {"median": statistics.median(values) if values else None, "values": values,
            "by_placement": by_placement,
            "rounds_mixed": sum(1 for r in rounds if r.get(key) is not None and r["placement"] == MIXED)}


def placement_text(summary: dict) -> str:
    """e.g. "3 near 1.02x, 1 far 0.91x, 1 mixed"."""
    parts = [f"{v['rounds']} {w} {v['median']:.2f}x" for w, v in summary["by_placement"].items()]
    if summary["rounds_mixed"]:
        parts.append(f"{summary['rounds_mixed']} mixed")
    return ", ".join(parts) or "-"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    build = REPO / "build"
    p.add_argument("--out", help="write the JSON document here")
    p.add_argument("--runs", type=int, default=5, help="paired rounds per measurement; the median and the best run are reported (5)")
    p.add_argument("--cores", default="0,1", help="server core,client core (0,1)")
    p.add_argument("--lat-iters", type=int, default=100000, help="iterations of latency tests (100000)")
    p.add_argument("--bw-iters", type=int, default=1000000, help="iterations of message-rate tests (1000000)")
    p.add_argument("--link", choices=["ib", "roce"], default="ib", help="softnic link layer (ib)")
    p.add_argument("--single-threaded", action="store_true",
                   help="run softnic with SOFTNIC_SINGLE_THREADED=1 (fast posts skip the QP lock, as "
                        "MLX5_SINGLE_THREADED on mlx5; ucx_perftest runs single-threaded too)")
    p.add_argument("--skip", action="append", default=[], choices=["softnic", "ucx", "floor", "ceiling"],
                   help="leave one side out (repeatable); ceiling: perftest's own rate limit")
    p.add_argument("--softnic-lib", default=str(build / "lib/softnic"), help="dir of softnic's libibverbs.so.1")
    p.add_argument("--softnic-cli", default=str(build / "bin/softnic"))
    p.add_argument("--bench", default=str(build / "bin/rdmalab-bench"), help="rdmalab-bench, for the SEND and WRITE rate rows")
    p.add_argument("--bench-seconds", type=float, default=2.0, help="duration of each rdmalab-bench rate run (2)")
    p.add_argument("--cacheline", default=str(build / "bin/rdmalab-cacheline-pingpong"))
    p.add_argument("--null-post", default=str(build / "lib/librdmalab-null-post.so"),
                   help="the LD_PRELOAD shim that measures perftest's ceiling (target null_post_preload)")
    p.add_argument("--perftest-dir", default="/usr/bin")
    p.add_argument("--ucx-perftest", default="/usr/bin/ucx_perftest")
    p.add_argument("--placement-bounds-ns", default="25,100",
                   help="one-way cache-line latencies that separate the placements of the two cores: "
                        "sibling hyperthreads, near (a shared cache), far (25,100; this VM's modes are "
                        "~15, ~35 and ~220 ns)")
    p.add_argument("--only", action="append", default=[], metavar="METRIC",
                   help="measure only this metric (repeatable), e.g. send_rate_32B_ud; default: all")
    a = p.parse_args()
    known = [m.id for m in metrics(a)]
    for wanted in a.only:
        if wanted not in known:
            p.error(f"--only {wanted!r}: no such metric; known: {', '.join(known)}")
    try:
        a.server_core, a.client_core = (int(x) for x in a.cores.split(","))
    except ValueError:
        p.error(f"--cores wants two core numbers like 0,1, got {a.cores!r}")
    if a.server_core == a.client_core:
        p.error(f"--cores wants two different cores, got {a.cores!r}")
    if a.runs < 1:
        p.error(f"--runs must be >= 1, got {a.runs}")
    bounds_text = a.placement_bounds_ns
    try:
        a.placement_bounds_ns = tuple(float(x) for x in bounds_text.split(","))
    except ValueError:
        a.placement_bounds_ns = ()
    if len(a.placement_bounds_ns) != 2 or not 0 < a.placement_bounds_ns[0] < a.placement_bounds_ns[1]:
        p.error(f"--placement-bounds-ns wants two increasing positive latencies in ns like 25,100, "
                f"got {bounds_text!r}")
    if "softnic" not in a.skip and not (Path(a.softnic_lib) / "libibverbs.so.1").exists():
        p.error(f"{a.softnic_lib}/libibverbs.so.1 is missing (build softnic, or --skip softnic)")
    if "floor" not in a.skip and not Path(a.cacheline).exists():
        p.error(f"{a.cacheline} is missing (build the cacheline_pingpong target, or --skip floor)")
    if "softnic" in a.skip:
        a.skip.append("ceiling")
    if "ceiling" not in a.skip and not Path(a.null_post).exists():
        p.error(f"{a.null_post} is missing (build the null_post_preload target, or --skip ceiling)")

    runner = Runner(a, f"peers-{os.getpid()}")
    started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    results, rows = [], []
    probe = "floor" not in a.skip  # the floor's tool also probes each run's placement
    try:
        for m in (m for m in metrics(a) if not a.only or m.id in a.only):
            res = {"id": m.id, "unit": m.unit, "better": m.better}
            sides = {"softnic": m.softnic, "ucx": m.ucx}
            if m.ceiling and "ceiling" not in a.skip:
                sides["ceiling"] = m.softnic
            for which in sides:
                res[which] = None if which in a.skip else {"runs": [], "errors": [], "commands": None}
            # Paired rounds: the two sides alternate (order flipped every round), so a
            # change in the machine (a VM's vCPUs moving) hits both sides of a round alike.
            rounds = []
            for round_index in range(a.runs):
                order = tuple(sides) if round_index % 2 == 0 else tuple(reversed(sides))
                values, floors = {}, []
                if probe:
                    floors.append(runner.probe_ns())
                for which in order:
                    if res.get(which) is None:
                        continue
                    print(f"  measuring {m.id} on {which} (round {round_index + 1})", file=sys.stderr, flush=True)
                    values[which] = runner.measure_once(which, sides[which], res[which])
                    if probe:
                        floors.append(runner.probe_ns())
                rounds.append({"ratio": ratio_of(values.get("softnic"), values.get("ucx")),
                               "ceiling_ratio": ratio_of(values.get("softnic"), values.get("ceiling")),
                               "floors_ns": floors, "placement": placement_of(floors, a.placement_bounds_ns)})
            best_of = min if m.better == "lower" else max
            for which in sides:
                if res[which] is not None:
                    runs = res[which]["runs"]
                    res[which]["median"] = statistics.median(runs) if runs else None
                    res[which]["best"] = best_of(runs) if runs else None
            s = res["softnic"]["median"] if res["softnic"] else None
            u = res["ucx"]["median"] if res["ucx"] else None
            res["rounds"] = rounds
            paired = summarize_rounds(rounds, "ratio")
            res["round_ratios"] = paired["values"]
            res["ratio_by_placement"] = paired["by_placement"]
            res["rounds_mixed"] = paired["rounds_mixed"]
            res["ratio_softnic_over_ucx"] = paired["median"]
            res["target"] = None if m.target_ratio is None else \
                {"op": "<=" if m.better == "lower" else ">=", "ratio": m.target_ratio}
            res["met"] = None if res["ratio_softnic_over_ucx"] is None else m.met(res["ratio_softnic_over_ucx"])
            # Each side's best run is its fastest placement: their ratio compares like with
            # like even when probing is skipped.
            best = {w: res[w]["best"] if res.get(w) else None for w in sides}
            res["ratio_of_best_runs"] = ratio_of(best["softnic"], best["ucx"])
            res["met_by_best_runs"] = None if res["ratio_of_best_runs"] is None else m.met(res["ratio_of_best_runs"])
            results.append(res)
            rows.append({"label": f"{m.id} ({m.softnic.tool} vs {m.ucx.tool})",
                         "softnic_text": "-" if res["softnic"] is None else fmt(s, m.unit),
                         "peer_text": "-" if res["ucx"] is None else fmt(u, m.unit),
                         "ratio": res["ratio_softnic_over_ucx"], "placements": placement_text(paired),
                         "best_ratio": res["ratio_of_best_runs"],
                         "target": None if res["target"] is None else f"{res['target']['op']} {m.target_ratio:.1f}x",
                         "met": res["met"], "met_by_best": res["met_by_best_runs"]})
            if res.get("ceiling") is not None:
                # The rate perftest reports when the provider costs nothing: the most any
                # provider can show through this tool; below UCX, the target is out of reach.
                c = res["ceiling"]
                res["ceiling_over_ucx"] = ratio_of(c["median"], u)
                rows.append({"label": f"{m.id} perftest ceiling ({m.softnic.tool}, post/poll free)",
                             "softnic_text": fmt(c["median"], m.unit),
                             "peer_text": "-" if res["ucx"] is None else fmt(u, m.unit),
                             "ratio": res["ceiling_over_ucx"], "placements": "-",
                             "best_ratio": ratio_of(c["best"], best["ucx"]),
                             "target": None, "met": None, "met_by_best": None})
                # The share of that ceiling softnic reaches, round by round.
                of_ceiling = summarize_rounds(rounds, "ceiling_ratio")
                res["softnic_over_ceiling_rounds"] = of_ceiling["values"]
                res["softnic_over_ceiling_by_placement"] = of_ceiling["by_placement"]
                res["softnic_over_ceiling"] = of_ceiling["median"]
                of_best = ratio_of(best["softnic"], c["best"])
                share, goal = res["softnic_over_ceiling"], m.ceiling_target
                rows.append({"label": f"{m.id} softnic vs that ceiling (same rounds)",
                             "softnic_text": "-" if res["softnic"] is None else fmt(s, m.unit),
                             "peer_text": fmt(c["median"], m.unit),
                             "ratio": share, "placements": placement_text(of_ceiling), "best_ratio": of_best,
                             "target": None if goal is None else f">= {goal:.1f}x",
                             "met": None if goal is None or share is None else share >= goal,
                             "met_by_best": None if goal is None or of_best is None else of_best >= goal})
        if "floor" not in a.skip:
            print("  measuring the cache-line floor", file=sys.stderr, flush=True)
        floor = None if "floor" in a.skip else runner.floor()
    finally:
        if "softnic" not in a.skip:
            remove_fabric(a, runner.fabric)
    if floor is not None:
        f = floor["median"]
        by_id = {r["id"]: r for r in results}
        floor["ratios"] = {}
        # Only the latencies this run measured (--only may have left them out).
        latencies = [mid for mid in ("write_lat_8B", "send_lat_8B") if mid in by_id]
        for mid in latencies:
            for which in ("softnic", "ucx"):
                side = by_id[mid][which]
                if side is not None:
                    floor["ratios"][f"{which}_{mid}_over_floor"] = ratio_of(side["median"], f)
        for mid in latencies:
            side = by_id[mid]["softnic"]
            rows.append({"label": f"{mid} softnic vs cache-line floor",
                         "softnic_text": "-" if side is None else fmt(side["median"], "us"),
                         "peer_text": fmt(f, "us"),
                         "ratio": None if side is None else ratio_of(side["median"], f), "placements": "-",
                         "best_ratio": None if side is None else ratio_of(side["best"], floor["best"]),
                         "target": None, "met": None, "met_by_best": None})

    print()
    print(f"softnic ({a.link}{', SOFTNIC_SINGLE_THREADED=1' if a.single_threaded else ''}) vs UCX {UCX_TLS} (UCT {' '.join(UCX_TRANSPORT)}), "
          f"cores {a.server_core},{a.client_core}, median of {a.runs} runs; ratio: median of the "
          f"ratios of the rounds whose runs all saw one placement (sibling/near/far: cache-line floor "
          f"below {a.placement_bounds_ns[0]:.0f}, below {a.placement_bounds_ns[1]:.0f}, above)"
          f"{'' if probe else ' (not probed: --skip floor)'}; best-run ratio: "
          f"each side's best run")
    print_table(rows)

    failures = [e for r in results for w in ("softnic", "ucx", "ceiling") if r.get(w) for e in r[w]["errors"]]
    failures += floor["errors"] if floor else []
    for e in failures:
        print(f"\nFAILED RUN:\n{e}", file=sys.stderr)

    if a.out:
        doc = {
            "schema_version": SCHEMA_VERSION,
            "context": {
                "benchmark": "compare_ucx",
                "date_utc": started,
                "host": host_info(),
                "tools": tool_versions(),
                "cores": {"server": a.server_core, "client": a.client_core},
                "runs": a.runs,
                "placement_bounds_ns": list(a.placement_bounds_ns) if probe else None,
                "lat_iters": a.lat_iters,
                "bw_iters": a.bw_iters,
                "softnic": {"library_dir": a.softnic_lib, "link": a.link, "fabric": runner.fabric,
                            "single_threaded": a.single_threaded},
                "ucx": {"UCX_TLS": UCX_TLS, "uct_transport": UCX_TRANSPORT},
                "units": {"us": "microseconds, median of the tool's per-iteration latencies "
                                "(perftest: the median of its -H samples; ucx: 50th percentile); one-way for "
                                "write/send/put/am, a full operation for read/get/atomics",
                          "mpps": "million messages per second"},
                "resolution_us": {"ucx_perftest": 0.001},
            },
            "metrics": results,
            "floor_cacheline_one_way": None if floor is None else dict(floor, unit="us"),
        }
        Path(a.out).write_text(json.dumps(doc, indent=2) + "\n")
        print(f"\nwrote {a.out}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
