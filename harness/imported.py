"""`run_all.py import perftest|ucx_perftest|qperf FILE...`: results users already have, as stored points.

A result of another tool is parsed into the configuration it ran (rdmalab's parameter names: a
mode, verb, connection, size, window, CQ moderation, QPs, post list, inline size, link) and what
it measured (mops, gbps, lat_us_*), then stored as an rdmalab-result/2 point whose provenance
says `imported_from` (the tool, its version, the file and its sha256). Where the configuration is
exactly one of the calibration suite's points (experiments/calibrate/: the same parameters,
timing aside), the point is stored as that point, one repeat per file, so that `run_all.py
calibrate` fits it as if it had measured it (`--no-run`: from stored points alone); every
imported point is also stored under the experiment `imported-TOOL-MODE` (`-roce` on a RoCE
link), whose file this writes under OUT/imported/ with every configuration imported so far, so
that the model predicts it like a run (score reads the fitted pass) and the report draws it.
Anything the importer cannot map (an unknown test, a missing field, a value out of range) refuses
the whole file with the field named, and nothing of that file is stored.

perftest: the `--out_json` file (perftest 4.5 writes it with bare keys and trailing commas, which
this parser accepts). ucx_perftest: the client's printed result (the table's Final line, or -v's
CSV), under its command line as the file's first line (`# ucx_perftest -t put_bw -x rc_verbs -s
64 ...`: the tool prints neither its test nor its sizes). qperf: its printed output with -v
(`qperf -v HOST rc_bw rc_lat ...`).
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import pathlib
import re
import shlex
import subprocess
from typing import Any, Callable, Optional

import yaml
from rich.console import Console

from . import experiment as experiment_mod
from . import model_pass
from .calibrate import experiment_files, kCalibrationGlob
from .provenance import static as static_provenance
from .store import Store, atomic_write, kResultSchema, utc_now
from .suites import Target
from .sweep import Reduction, expand, point_id
from .yamlloc import ConfigError

kTools = ("perftest", "ucx_perftest", "qperf")
kTimingParams = ("duration", "warmup", "iters", "fits")   # what a calibration point fixes but the fit does not read
kImportedRoles = {"server": 1, "client": 1}               # a requester and its responder


class ImportRefused(ConfigError):
    """A file the importer cannot map; the message names the file and the field."""


@dataclasses.dataclass
class Imported:
    tool: str
    version: str
    file: pathlib.Path
    mode: str                    # tput or lat
    params: dict[str, Any]       # rdmalab's names: verb, connection, size, ...
    results: dict[str, float]    # mops, gbps, lat_us_p50, ...
    link: str = "ib"


# perftest ------------------------------------------------------------------------------------

# test name -> (mode, verb, lat_method); the requester's view: direction outbound, one responder
kPerftestTests = {
    "RDMA_Write_BW_Test": ("tput", "write", None), "RDMA_Write_Post_List_BW_Test": ("tput", "write", None),
    "RDMA_Read_BW_Test": ("tput", "read", None), "RDMA_Read_Post_List_BW_Test": ("tput", "read", None),
    "Send_BW_Test": ("tput", "send", None), "Send_Post_List_BW_Test": ("tput", "send", None),
    "RDMA_Write_Latency_Test": ("lat", "write", "pingpong"), "RDMA_Read_Latency_Test": ("lat", "read", "completion"),
    "Send_Latency_Test": ("lat", "send", "pingpong"),
}
kPerftestLatency = {"t_typical": "lat_us_p50", "t_avg": "lat_us_mean", "t_min": "lat_us_min", "t_max": "lat_us_max",
                    "t_stdev": "lat_us_stdev", "percentile_99": "lat_us_p99", "percentile_99.9": "lat_us_p999"}
kLinks = {"IB": "ib", "Ethernet": "roce"}
kConnections = ("RC", "UC", "UD")


def relaxed_json(text: str, where: str) -> dict[str, Any]:
    """perftest's --out_json: nested `{ key: value, }` blocks, keys bare, strings sometimes quoted."""
    stack: list[dict[str, Any]] = [{}]
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip().rstrip(",").strip()
        if not line or line == "{" and len(stack) == 1 and not stack[0]:
            continue
        if line == "}":
            if len(stack) == 1:
                continue
            stack.pop()
            continue
        key, sep, value = line.partition(":")
        if not sep:
            raise ImportRefused(f"{where}:{n}: expected 'key: value', got {raw.strip()!r}")
        key, value = key.strip(), value.strip()
        if value == "{":
            child: dict[str, Any] = {}
            stack[-1][key] = child
            stack.append(child)
            continue
        stack[-1][key] = _scalar(value.strip('"'))
    return stack[0]


def _scalar(v: str) -> Any:
    for conv in (int, float):
        try:
            return conv(v)
        except ValueError:
            pass
    return v


def _field(block: dict[str, Any], name: str, where: str, kinds: tuple[type, ...] = (int, float)) -> Any:
    if name not in block:
        raise ImportRefused(f"{where}: field {name} is missing (found: {', '.join(block) or 'nothing'})")
    v = block[name]
    if not isinstance(v, kinds) or isinstance(v, bool):
        raise ImportRefused(f"{where}: field {name} = {v!r} is not {'a number' if kinds == (int, float) else 'text'}")
    return v


def parse_perftest(text: str, path: pathlib.Path, version: str) -> list[Imported]:
    where = str(path)
    doc = relaxed_json(text, where)
    info, results = doc.get("test_info"), doc.get("results")
    if not isinstance(info, dict) or not isinstance(results, dict):
        raise ImportRefused(f"{where}: not perftest's --out_json (test_info and results blocks expected)")
    test = _field(info, "test", f"{where}: test_info", (str,))
    if test not in kPerftestTests:
        raise ImportRefused(f"{where}: test_info.test {test!r} cannot be imported (valid: {', '.join(kPerftestTests)})")
    mode, verb, lat_method = kPerftestTests[test]
    conn = _field(info, "Connection_type", f"{where}: test_info", (str,))
    if conn not in kConnections:
        raise ImportRefused(f"{where}: test_info.Connection_type {conn!r} (valid: {', '.join(kConnections)})")
    link = _field(info, "Link_type", f"{where}: test_info", (str,))
    if link not in kLinks:
        raise ImportRefused(f"{where}: test_info.Link_type {link!r} (valid: {', '.join(kLinks)})")
    if info.get("Dual_port", "OFF") != "OFF" or info.get("Using_SRQ", "OFF") != "OFF":
        raise ImportRefused(f"{where}: test_info.Dual_port / Using_SRQ ON: rdmalab has no such point")
    size = _field(results, "MsgSize", f"{where}: results")
    # a READ carries no payload of its own, and perftest's READ tests report no inline size
    inline = 0 if verb == "read" else _field(info, "Max_inline_data", f"{where}: test_info")
    params: dict[str, Any] = {"verb": verb, "connection": conn, "size": size, "inline_size": inline}
    qps = _field(info, "Number_of_qps", f"{where}: test_info")
    if mode == "tput":
        params.update(qp=qps, direction="outbound", tx_depth=_field(info, "TX_depth", f"{where}: test_info"),
                      cq_mod=_field(info, "CQ_Moderation", f"{where}: test_info"),
                      post_list=info.get("Post_List", 1), threads=1)
        rate = _field(results, "MsgRate", f"{where}: results")
        row = {"mops": float(rate), "gbps": float(rate) * size * 8 / 1e3}
    else:
        if qps != 1:
            raise ImportRefused(f"{where}: test_info.Number_of_qps = {qps}: a latency point has one QP (valid: 1)")
        params["lat_method"] = lat_method
        row = {ours: float(results[theirs]) for theirs, ours in kPerftestLatency.items() if theirs in results}
        if "lat_us_p50" not in row:
            raise ImportRefused(f"{where}: results.t_typical is missing: a latency file of a run in duration mode "
                               f"(-D) has no typical latency; run with -n ITERS")
    for k, v in row.items():
        if not v > 0:
            raise ImportRefused(f"{where}: results: {k} = {v} is not a positive measurement")
    return [Imported("perftest", version, path, mode, params, row, kLinks[link])]


# qperf ---------------------------------------------------------------------------------------

# test -> (mode, verb, connection, what it reports); qperf's requester posts, one responder
kQperfTests = {"rc_bw": ("tput", "send", "RC"), "uc_bw": ("tput", "send", "UC"), "ud_bw": ("tput", "send", "UD"),
               "rc_rdma_write_bw": ("tput", "write", "RC"), "uc_rdma_write_bw": ("tput", "write", "UC"),
               "rc_rdma_read_bw": ("tput", "read", "RC"),
               "rc_lat": ("lat", "send", "RC"), "uc_lat": ("lat", "send", "UC"), "ud_lat": ("lat", "send", "UD"),
               "rc_rdma_write_lat": ("lat", "write", "RC"), "uc_rdma_write_lat": ("lat", "write", "UC"),
               "rc_rdma_read_lat": ("lat", "read", "RC")}
kQperfUnits = {"bytes": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "KiB": 1024, "MiB": 1 << 20, "GiB": 1 << 30}
kQperfTime = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "sec": 1e6}


def _qperf_quantity(value: str, unit: str, where: str, table: dict[str, float]) -> float:
    try:
        v = float(value)
    except ValueError:
        raise ImportRefused(f"{where}: {value!r} is not a number") from None
    if unit not in table:
        raise ImportRefused(f"{where}: unit {unit!r} (valid: {', '.join(table)})")
    return v * table[unit]


def parse_qperf(text: str, path: pathlib.Path, version: str) -> list[Imported]:
    """`qperf -v HOST TEST...`: a `TEST:` line, then `name = value unit` lines per test."""
    out, test, fields = [], None, {}

    def finish() -> None:
        if test is None:
            return
        where = f"{path}: {test}"
        mode, verb, conn = kQperfTests[test]
        if "msg_size" not in fields:
            raise ImportRefused(f"{where}: field msg_size is missing (run qperf with -v)")
        size = _qperf_quantity(*fields["msg_size"], f"{where}: msg_size", kQperfUnits)
        params: dict[str, Any] = {"verb": verb, "connection": conn, "size": int(size)}
        if mode == "tput":
            if "msg_rate" not in fields:
                raise ImportRefused(f"{where}: field msg_rate is missing (run qperf with -v)")
            value, unit = fields["msg_rate"]
            scale = {"/sec": 1e-6, "K/sec": 1e-3, "M/sec": 1.0, "G/sec": 1e3}
            if unit not in scale:
                raise ImportRefused(f"{where}: msg_rate unit {unit!r} (valid: {', '.join(scale)})")
            mops = float(value) * scale[unit]
            params.update(direction="outbound", threads=1)
            row = {"mops": mops, "gbps": mops * size * 8 / 1e3}
        else:
            if "latency" not in fields:
                raise ImportRefused(f"{where}: field latency is missing")
            params["lat_method"] = "completion" if verb == "read" else "pingpong"
            row = {"lat_us_mean": _qperf_quantity(*fields["latency"], f"{where}: latency", kQperfTime)}
        if not all(v > 0 for v in row.values()):
            raise ImportRefused(f"{where}: {row} is not a positive measurement")
        out.append(Imported("qperf", version, path, mode, params, row, "ib"))

    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        if m := re.fullmatch(r"([a-z_]+):", line):
            finish()
            if m.group(1) not in kQperfTests:
                raise ImportRefused(f"{path}:{n}: test {m.group(1)!r} cannot be imported (valid: {', '.join(kQperfTests)})")
            test, fields = m.group(1), {}
            continue
        if test is None:
            raise ImportRefused(f"{path}:{n}: expected a test name line (e.g. 'rc_bw:'), got {line!r}")
        m = re.fullmatch(r"([a-z_]+)\s*=\s*([-+0-9.eE]+)\s*(.*)", line)
        if m is None:
            raise ImportRefused(f"{path}:{n}: expected 'name = value unit', got {line!r}")
        fields[m.group(1)] = (m.group(2), m.group(3))
    finish()
    if not out:
        raise ImportRefused(f"{path}: no qperf test in the file")
    return out


# ucx_perftest --------------------------------------------------------------------------------

# test -> (mode, verb); UCT tests name their transport with -x, UCP tests take UCX_TLS
kUcxTests = {"put_bw": ("tput", "write"), "ucp_put_bw": ("tput", "write"), "am_bw": ("tput", "send"),
             "ucp_am_bw": ("tput", "send"), "tag_bw": ("tput", "send"), "put_lat": ("lat", "write"),
             "ucp_put_lat": ("lat", "write"), "am_lat": ("lat", "send"), "ucp_am_lat": ("lat", "send"),
             "tag_lat": ("lat", "send")}
kUcxTransports = {"rc_verbs": "RC", "rc_mlx5": "RC", "ud_verbs": "UD", "ud_mlx5": "UD"}
kUcxColumns = ("iterations", "lat_p50", "lat_avg", "lat_overall", "bw_avg", "bw_overall", "mr_avg", "mr_overall")


def _ucx_command(first: str, where: str) -> dict[str, str]:
    """The configuration ucx_perftest does not print: its command line, the file's first line."""
    if not first.startswith("#") or "ucx_perftest" not in first:
        raise ImportRefused(f"{where}:1: ucx_perftest does not print what it ran: put the client's command line "
                            f"first, as '# [UCX_TLS=...] ucx_perftest -t TEST -x TRANSPORT -s SIZE ...'")
    words = shlex.split(first.lstrip("#"))
    flags: dict[str, str] = {w.split("=", 1)[0]: w.split("=", 1)[1] for w in words if "=" in w and not w.startswith("-")}
    for i, w in enumerate(words):
        if w.startswith("-") and len(w) == 2 and i + 1 < len(words):
            flags[w] = words[i + 1]
    return flags


def parse_ucx_perftest(text: str, path: pathlib.Path, version: str) -> list[Imported]:
    """The client's printed result (the table's Final line, or -v's CSV) under its command line."""
    lines = text.splitlines()
    where = str(path)
    flags = _ucx_command(lines[0].strip() if lines else "", where)
    test = flags.get("-t")
    if test not in kUcxTests:
        raise ImportRefused(f"{where}:1: -t {test!r} cannot be imported (valid: {', '.join(kUcxTests)})")
    transport = flags.get("-x") or flags.get("UCX_TLS", "").split(",")[0]
    if transport not in kUcxTransports:
        raise ImportRefused(f"{where}:1: transport {transport or '(none: -x or UCX_TLS)'!r} (valid: "
                            f"{', '.join(kUcxTransports)})")
    sizes = flags.get("-s", "8").split(",")
    if len(sizes) != 1 or not sizes[0].isdigit():
        raise ImportRefused(f"{where}:1: -s {flags.get('-s')!r}: one message size (a scatter-gather list has no "
                            f"rdmalab point)")
    values = None
    for n, line in enumerate(lines):
        if line.startswith("Final:"):
            values = line.split()[1:]
        elif line.startswith("iterations,") and n + 1 < len(lines):
            values = lines[n + 1].strip().split(",")
    if values is None or len(values) != len(kUcxColumns):
        raise ImportRefused(f"{where}: no result: neither a 'Final:' line nor -v's CSV with {len(kUcxColumns)} columns")
    try:
        got = dict(zip(kUcxColumns, map(float, values)))
    except ValueError:
        raise ImportRefused(f"{where}: the result line holds a value that is not a number: {values}") from None
    mode, verb = kUcxTests[test]
    size = int(sizes[0])
    params: dict[str, Any] = {"verb": verb, "connection": kUcxTransports[transport], "size": size}
    if mode == "tput":
        mops = got["mr_overall"] / 1e6
        params.update(direction="outbound", threads=1)
        row = {"mops": mops, "gbps": mops * size * 8 / 1e3}
    else:
        params["lat_method"] = "pingpong"
        row = {"lat_us_p50": got["lat_p50"], "lat_us_mean": got["lat_avg"]}
    if not all(v > 0 for v in row.values()):
        raise ImportRefused(f"{where}: {row} is not a positive measurement")
    return [Imported("ucx_perftest", version, path, mode, params, row, "ib")]


# storing -------------------------------------------------------------------------------------

kParsers: dict[str, Callable[[str, pathlib.Path, str], list[Imported]]] = {
    "perftest": parse_perftest, "ucx_perftest": parse_ucx_perftest, "qperf": parse_qperf}
kVersionCommands = {"perftest": ["dpkg-query", "-W", "-f", "${Version}", "perftest"],
                    "ucx_perftest": ["dpkg-query", "-W", "-f", "${Version}", "ucx-utils"],
                    "qperf": ["dpkg-query", "-W", "-f", "${Version}", "qperf"]}


def tool_version(tool: str) -> str:
    """The installed tool's version where its package says it; the files themselves do not."""
    try:
        r = subprocess.run(kVersionCommands[tool], capture_output=True, text=True, timeout=10)
        return r.stdout.strip() if r.returncode == 0 and r.stdout.strip() else "unknown"
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


def calibration_match(imp: Imported, exp_dir: pathlib.Path) -> Optional[tuple[experiment_mod.Experiment, Any]]:
    """The calibration point the imported configuration is, timing aside; None if none is."""
    for path in experiment_files(exp_dir, kCalibrationGlob):
        exp = experiment_mod.parse(path)
        if exp.mode != imp.mode or exp.link != imp.link:
            continue
        for p in expand(exp):
            if p.repeat != 0 or p.roles != kImportedRoles:
                continue
            counts = {r.count for r in exp.roles if isinstance(r.count, str)}   # `count: $clients`
            theirs = {k: v for k, v in p.params.items() if k not in kTimingParams and k not in counts}
            if all(imp.params.get(k, _default(k)) == theirs.get(k, _default(k)) for k in set(theirs) | set(imp.params)):
                return exp, p
    return None


def _default(name: str) -> Any:
    """What a configuration means where it leaves a name out (rdmalab-bench's defaults)."""
    return {"header_only": False, "threads": 1, "post_list": 1, "qp": 1}.get(name)


@dataclasses.dataclass(frozen=True)
class ExperimentRef:
    """What a stored point says of its experiment."""
    id: str
    title: str
    file: pathlib.Path
    sha256: str
    plot: dict[str, Any]


def record(imp: Imported, backend: str, exp: ExperimentRef, params: dict[str, Any], repeat: int, run_id: str,
           file_sha: str, root: pathlib.Path) -> dict[str, Any]:
    """An rdmalab-result/2 point of an imported result: the measurement in the role the plot reads."""
    pid = point_id(exp.id, params, repeat, kImportedRoles)
    now = utc_now()
    role = exp.plot.get("role") or "server"
    roles = [{"role": r, "index": 0, "peers": 1, "host": "imported", "argv": [], "exit_code": 0,
              "document": _document(imp, params, imp.results if r == role else {})} for r in kImportedRoles]
    y = exp.plot.get("y", "mops")
    return {"schema_version": kResultSchema, "status": "ok", "error": None, "backend": backend,
            "experiment": {"id": exp.id, "title": exp.title, "file": str(exp.file), "sha256": exp.sha256,
                           "paper": {"id": "none", "figure": "imported"}, "description": f"imported from {imp.tool}",
                           "plot": exp.plot, "reference": [], "conclusions": []},
            "point": {"id": pid, "index": 0, "params": params, "repeat": repeat, "roles": dict(kImportedRoles),
                      "swept": sorted(params)},
            "roles": roles, "headline": {"metric": y, "value": imp.results.get(y)},
            "provenance": {"run_id": run_id, "started": now, "ended": now, "duration_s": 0.0,
                           "imported_from": {"tool": imp.tool, "version": imp.version, "file": str(imp.file),
                                             "sha256": file_sha},
                           "git": static_provenance(root)["git"], "hosts": [],
                           "command_lines": [f"{imp.tool} (imported: {shlex.quote(str(imp.file))})"]}}


kRowMetrics = ("mops", "gbps", "lat_us_mean", "lat_us_p50", "lat_us_p99")   # rdmalab-bench/1 rows name each


def _document(imp: Imported, params: dict[str, Any], measured: dict[str, float]) -> dict[str, Any]:
    """A participant document (rdmalab-bench/1) of one side of the imported run: the side that
    measured carries the tool's numbers, the other one none (null)."""
    row = {"size_bytes": int(params["size"]), **{m: None for m in kRowMetrics}, **measured}
    config = {"mode": imp.mode, **{k: v for k, v in params.items() if k != "size"}, "size": [int(params["size"])]}
    return {"schema_version": "rdmalab-bench/1", "tool": {"name": imp.tool, "version": imp.version},
            "backend": "measured", "mode": imp.mode, "config": config, "results": [row]}


def _plot(mode: str, latency_metric: str) -> dict[str, Any]:
    if mode == "tput":
        return {"x": "size", "y": "mops", "series": ["verb", "connection"], "role": "server", "xlog": True,
                "xlabel": "payload (bytes)", "ylabel": "throughput (Mops)"}
    return {"x": "size", "y": latency_metric, "series": ["verb", "connection"], "role": "client", "xlog": True,
            "xlabel": "payload (bytes)", "ylabel": "latency (us)"}


def imported_experiment_id(imp: Imported) -> str:
    return f"imported-{imp.tool}-{imp.mode}" + ("" if imp.link == "ib" else f"-{imp.link}")


def write_experiment(out: pathlib.Path, exp_id: str, tool: str, mode: str, link: str, configs: list[dict[str, Any]],
                     repeats: int, plot: dict[str, Any]) -> ExperimentRef:
    """An experiment file holding every configuration imported so far (a zip sweep), so that the
    imported points have an experiment like measured ones: the model predicts it (the fitted
    pass, which score reads), the report draws it, and it can be run on any backend."""
    keys = sorted({k for c in configs for k in c})
    doc = {"id": exp_id, "title": f"{tool}'s results, imported (run_all.py import {tool})",
           "description": f"configurations of {tool} runs imported by run_all.py import; each point's provenance "
                          f"names its file", "paper": {"id": "none", "figure": "imported"}, "mode": mode,
           "roles": {"server": {"count": 1}, "client": {"count": 1}},
           "sweep": {"zip": {k: [c.get(k, _default(k)) for c in configs] for k in keys}},
           "repeats": repeats, "plot": plot}
    if link != "ib":
        doc["link"] = link
    path = out / "imported" / f"{exp_id}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "# written by run_all.py import: every configuration imported into this results directory\n" + \
        yaml.safe_dump(doc, sort_keys=False, default_flow_style=None, width=120)
    path.write_text(text)
    return ExperimentRef(exp_id, doc["title"], path, hashlib.sha256(text.encode()).hexdigest(), plot)


def _stored_configs(store: Store, backend: str, exp_id: str) -> list[tuple[dict[str, Any], int]]:
    """(params, repeat) of every point imported into this experiment before."""
    return [(r["point"]["params"], r["point"]["repeat"]) for r in store.points(backend, exp_id)]


def parser(root: pathlib.Path) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="run_all.py import",
                                description="store other tools' results as rdmalab points: calibrate fits them where "
                                            "they are calibration points, score and the report read them")
    p.add_argument("tool", choices=kTools)
    p.add_argument("files", nargs="*", metavar="FILE")
    p.add_argument("--commands", action="store_true",
                   help="print the tool's command lines that reproduce calibration points, then stop")
    p.add_argument("--backend", default="verbs", help="the backend the tool measured (default verbs: a real NIC)")
    p.add_argument("--out", default=str(root / "results"), help="results directory (default: results/)")
    p.add_argument("--tool-version", help="the tool's version (default: the installed package's)")
    p.add_argument("--experiments-dir", default=str(root / "experiments"))
    p.add_argument("--bin-dir", default=str(root / "build" / "bin"), help="where rdmalab-model is, for the predictions")
    p.add_argument("--no-model", action="store_true", help="store the points only, predict nothing")
    return p


def main(argv: list[str], console: Console, root: pathlib.Path) -> int:
    p = parser(root)
    args = p.parse_args(argv)
    if args.commands:
        if args.tool != "perftest":
            p.error(f"--commands: only perftest's command lines are known, not {args.tool}'s")
        print("\n".join(perftest_commands(pathlib.Path(args.experiments_dir))))
        return 0
    if not args.files:
        p.error("give the files to import (FILE...)")
    version = args.tool_version or tool_version(args.tool)
    parsed: list[tuple[Imported, str]] = []
    errors: list[str] = []
    for f in args.files:
        path = pathlib.Path(f).resolve()
        try:
            data = path.read_bytes()
            sha = hashlib.sha256(data).hexdigest()
            parsed += [(imp, sha) for imp in kParsers[args.tool](data.decode(errors="replace"), path, version)]
        except OSError as exc:
            errors.append(f"{f}: cannot read ({exc.strerror})")
        except ImportRefused as exc:
            errors += exc.messages
    if errors:
        for e in errors:
            console.print(e, markup=False, highlight=False, soft_wrap=True)
        console.print(f"import: nothing stored ({len(errors)} file(s) refused)", markup=False)
        return 2
    out = pathlib.Path(args.out)
    store = Store(out)
    run_id = f"import-{utc_now()}"
    groups: dict[str, list[tuple[Imported, str]]] = {}
    for imp, sha in parsed:
        groups.setdefault(imported_experiment_id(imp), []).append((imp, sha))
    refs = []
    for exp_id, members in groups.items():
        first = members[0][0]
        before = _stored_configs(store, args.backend, exp_id)
        configs, counts = [], {}
        for params, _ in before:
            key = json.dumps(params, sort_keys=True)
            if key not in counts:
                configs.append(params)
            counts[key] = counts.get(key, 0) + 1
        todo = []
        for imp, sha in members:
            key = json.dumps(imp.params, sort_keys=True)
            if key not in counts:
                configs.append(imp.params)
            todo.append((imp, sha, counts.get(key, 0)))
            counts[key] = counts.get(key, 0) + 1
        latency = "lat_us_p50" if all("lat_us_p50" in i.results for i, _ in members) else "lat_us_mean"
        ref = write_experiment(out, exp_id, first.tool, first.mode, first.link, configs, max(counts.values()),
                               _plot(first.mode, latency))
        refs.append(ref)
        for params, rep in before:  # the experiment file moved on: every point names the new one
            rec = json.loads(store.point_path(args.backend, exp_id, point_id(exp_id, params, rep, kImportedRoles))
                             .read_text())
            rec["experiment"].update(file=str(ref.file), sha256=ref.sha256)
            rec.pop("_path", None)
            atomic_write(store.point_path(args.backend, exp_id, rec["point"]["id"]), json.dumps(rec, indent=1) + "\n")
        for imp, sha, rep in todo:
            store.write_point(record(imp, args.backend, ref, imp.params, rep, run_id, sha, root))
            console.print(_describe(imp, _calibrate(imp, args.backend, store, pathlib.Path(args.experiments_dir),
                                                    run_id, sha, root)), markup=False, highlight=False, soft_wrap=True)
    store.write_index()
    console.print(f"import: {len(parsed)} result(s) stored under {store.root / args.backend}", markup=False)
    if args.no_model:
        return 0
    targets = [Target(r.file, Reduction()) for r in refs]
    return model_pass.predict(targets, args.backend, out, pathlib.Path(args.bin_dir), None, False, console)


def _calibrate(imp: Imported, backend: str, store: Store, exp_dir: pathlib.Path, run_id: str, sha: str,
               root: pathlib.Path) -> str:
    """Stores the result as its calibration point where it is one; says what it did."""
    match = calibration_match(imp, exp_dir)
    if match is None:
        return ""
    exp, point = match
    fits = point.params.get("fits", "a check")
    rep = 0
    while store.point_path(backend, exp.id, point_id(exp.id, point.params, rep, point.roles)).is_file():
        rep += 1
    if rep >= exp.repeats:
        return f" ({exp.id}'s point for {fits} holds {exp.repeats} repeats already)"
    ref = ExperimentRef(exp.id, exp.title, exp.path, exp.sha256, exp.plot)
    store.write_point(record(imp, backend, ref, point.params, rep, run_id, sha, root))
    return f" -> {exp.id}'s point for {fits}, repeat {rep}"


def _describe(imp: Imported, calibration: str) -> str:
    return (f"{imp.file.name}: {imp.tool} {imp.mode} " + " ".join(f"{k}={v}" for k, v in imp.params.items()) + ": "
            + ", ".join(f"{k} {v:.4g}" for k, v in imp.results.items()) + calibration)


def perftest_commands(exp_dir: pathlib.Path) -> list[str]:
    """The perftest runs that reproduce calibration points (`import --perftest-commands`)."""
    verbs = {("tput", "write"): "ib_write_bw", ("tput", "read"): "ib_read_bw", ("tput", "send"): "ib_send_bw",
             ("lat", "write"): "ib_write_lat", ("lat", "read"): "ib_read_lat", ("lat", "send"): "ib_send_lat"}
    out = []
    for path in experiment_files(exp_dir, kCalibrationGlob):
        exp = experiment_mod.parse(path)
        for p in expand(exp):
            q = p.params
            tool = verbs.get((exp.mode, q.get("verb")))
            if (p.repeat or tool is None or p.roles != kImportedRoles or q.get("header_only")
                    or q.get("direction", "outbound") != "outbound" or q.get("threads", 1) != 1):
                continue
            if exp.mode == "lat" and q.get("lat_method") != dict(read="completion").get(q["verb"], "pingpong"):
                continue
            args = [tool, "-c", q.get("connection", "RC"), "-s", str(q.get("size", 32)), "--out_json"]
            if exp.mode == "tput":
                args += ["-t", str(q.get("tx_depth", 128)), "-Q", str(q.get("cq_mod", 1)), "-q", str(q.get("qp", 1)),
                         "-D", "1"] + (["-l", str(q["post_list"])] if q.get("post_list", 1) > 1 else [])
            else:
                args += ["-n", "10000"]
            if q.get("inline_size"):
                args += ["-I", str(q["inline_size"])]
            out.append(f"{' '.join(args)}    # {exp.id}: {q.get('fits', 'a check')}")
    return out

