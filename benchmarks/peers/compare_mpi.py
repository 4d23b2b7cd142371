#!/usr/bin/python3
"""MPI ping-pong latency over softnic, side by side in one run: MPICH and Open MPI over UCX's
rc_verbs on softnic, and MPICH over UCX's shared memory (posix) as the floor.

Each round runs the three once, in a rotated order (mpi_pingpong.c: 2 ranks, 256 B to
--max-bytes, every size checked before and after its timed round trips); per configuration and
size, the best round and the median round are reported, and the ratios the targets are about:
MPICH/Open MPI on rc_verbs (target <= 1.5) and MPICH rc_verbs/MPICH posix (target <= 2), each
from the best rounds (a loaded host only ever adds time) and from the medians.

Prints a table and, with --out FILE, one JSON document (schema_version, context, commands,
every round). A benchmark, not a test: targets are reported, never asserted; the exit code is
non-zero only when a run failed or its output could not be parsed.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import mpi_runs  # noqa: E402

SCHEMA_VERSION = 1
REPO = Path(__file__).resolve().parents[2]
RUN_TIMEOUT_S = 300.0
CONFIGS = [("mpich_rc_verbs", "mpich", "rc_verbs"), ("openmpi_rc_verbs", "openmpi", "rc_verbs"),
           ("mpich_posix", "mpich", "posix")]
TARGETS = [("mpich_rc_verbs / openmpi_rc_verbs", "mpich_rc_verbs", "openmpi_rc_verbs", 1.5),
           ("mpich_rc_verbs / mpich_posix", "mpich_rc_verbs", "mpich_posix", 2.0)]


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text}: want an integer >= 1")
    return value


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", type=Path, default=REPO / "build", help="build tree holding bin/softnic (default: ./build)")
    p.add_argument("--rounds", type=positive, default=5, help="rounds of all three configurations (default 5)")
    p.add_argument("--iters", type=positive, default=2000, help="timed round trips per size (default 2000)")
    p.add_argument("--warmup", type=positive, default=200, help="untimed round trips per size first (default 200)")
    p.add_argument("--min-bytes", type=positive, default=256, help="smallest message (default 256)")
    p.add_argument("--max-bytes", type=positive, default=65536, help="largest message (default 65536)")
    p.add_argument("--out", type=Path, help="write the JSON document here")
    args = p.parse_args(argv)
    if args.min_bytes > args.max_bytes:
        p.error(f"--min-bytes {args.min_bytes} exceeds --max-bytes {args.max_bytes}")
    return args


def tool_version(argv: list[str]) -> str:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return next((line.strip() for line in out.splitlines() if line.strip()), "unknown")


def summarize(rounds: list[dict]) -> dict:
    """Per configuration and size: the best and the median one-way latency over the rounds."""
    summary: dict[str, dict[int, dict[str, float]]] = {}
    for name, _, _ in CONFIGS:
        by_size: dict[int, list[float]] = {}
        for r in rounds:
            for point in r[name]["results"]:
                by_size.setdefault(point["bytes"], []).append(point["lat_us"])
        summary[name] = {size: {"best_us": min(v), "median_us": statistics.median(v)} for size, v in by_size.items()}
    return summary


def ratios(summary: dict) -> list[dict]:
    rows = []
    for label, top, bottom, target in TARGETS:
        for size in sorted(summary[top]):
            best = summary[top][size]["best_us"] / summary[bottom][size]["best_us"]
            median = summary[top][size]["median_us"] / summary[bottom][size]["median_us"]
            rows.append({"ratio": label, "bytes": size, "of_best": round(best, 3), "of_median": round(median, 3),
                         "target": target, "met": best <= target})
    return rows


def print_table(summary: dict, rows: list[dict]) -> None:
    sizes = sorted(summary[CONFIGS[0][0]])
    print(f"{'one-way latency, us (best / median)':<36}" + "".join(f"{s:>14}" for s in sizes))
    for name, _, _ in CONFIGS:
        cells = "".join(f"{summary[name][s]['best_us']:>7.2f}/{summary[name][s]['median_us']:<6.2f}" for s in sizes)
        print(f"{name:<36}{cells}")
    for label, _, _, target in TARGETS:
        mine = [r for r in rows if r["ratio"] == label]
        print(f"{label + f' (<= {target})':<36}" +
              "".join(f"{r['of_best']:>7.2f}/{r['of_median']:<6.2f}" for r in mine))
        print(f"{'  met (best rounds)':<36}" + "".join(f"{'yes' if r['met'] else 'NO':>14}" for r in mine))


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    cli = args.build / "bin/softnic"
    if not cli.exists():
        print(f"compare_mpi: {cli} is missing; build it: cmake --build {args.build} --target softnic softnic_ibverbs",
              file=sys.stderr)
        return 2
    for mpi in ("mpich", "openmpi"):
        if (program := mpi_runs.missing(mpi)) is not None:
            print(f"compare_mpi: {program} is not installed (scripts/install-deps.sh installs it)", file=sys.stderr)
            return 2
    fabric = f"compare-mpi-{os.getpid()}"
    pingpong = ["--min", str(args.min_bytes), "--max", str(args.max_bytes), "--iters", str(args.iters),
                "--warmup", str(args.warmup)]
    rounds: list[dict] = []
    commands: dict[str, list[str]] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="compare-mpi-") as tmp:
            binaries = {mpi: mpi_runs.build(mpi, Path(tmp)) for mpi in ("mpich", "openmpi")}
            for index in range(args.rounds):
                shift = index % len(CONFIGS)
                record: dict = {}
                for name, mpi, transport in CONFIGS[shift:] + CONFIGS[:shift]:
                    job = mpi_runs.job(mpi, transport, binaries[mpi], pingpong, cli, fabric)
                    commands[name] = job.argv
                    record[name] = mpi_runs.run(job, RUN_TIMEOUT_S)
                rounds.append(record)
                print(f"round {index + 1}/{args.rounds} done", file=sys.stderr)
    except mpi_runs.MpiError as e:
        print(f"compare_mpi: {e}", file=sys.stderr)
        return 1
    finally:
        subprocess.run([str(cli), "fabric", "rm", "--fabric", fabric], capture_output=True, timeout=30)
    summary = summarize(rounds)
    rows = ratios(summary)
    print_table(summary, rows)
    if args.out:
        document = {
            "schema_version": SCHEMA_VERSION,
            "context": {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(), "host": platform.node(),
                        "kernel": platform.release(), "cpus": os.cpu_count(),
                        "load_average": os.getloadavg(), "ucx": tool_version(["ucx_info", "-v"]),
                        "mpich": tool_version(["mpichversion"]), "openmpi": tool_version(["ompi_info", "--version"]),
                        "iters": args.iters, "warmup": args.warmup, "rounds": args.rounds},
            "commands": commands,
            "rounds": rounds,
            "summary_us": {name: {str(size): v for size, v in by_size.items()} for name, by_size in summary.items()},
            "ratios": rows,
        }
        args.out.write_text(json.dumps(document, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
