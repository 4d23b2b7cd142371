"""`run_all.py calibrate`: learn a NIC profile from a measured run (model/README.md,
"Calibrating a measured NIC").

1. Run the calibration experiments (experiments/calibrate/calibrate-*.yaml: verb-level
   points only) on the backend through the normal runner, resumable like any run.
2. Hand their stored points to `rdmalab-model calibrate --measured`, the model's own fit
   (model/calibrate.cc, the code that fits the published rows): each point's best repeat
   and spread, the profile field it determines (its `fits` label) and its point files.
3. Write the fitted profile with provenance and print the fit table and the fields the suite
   could not determine (kept from --extends and marked so).
   On a one-host run, two host facts are measured beside the suite and handed to the fit as
   measured values (not fitted): a key-value client's own CPU per request (kv's client loop on
   a transport that answers at once, rdmalab-micro-kv-store BM_ClientRequest) and a cross-core
   cache-line move as a stream of them costs it (rdmalab-cacheline-pingpong --stream); neither
   involves a system.
4. --validate: run the application-level experiments (experiments/calibrate/validate-*.yaml:
   key-value systems, sequencers, ECHO) on the backend and on the model with the new profile,
   and print each point's prediction error.

The wall between fit and validation is `fit_points`: it takes only points of calibration
experiments in verb-level modes and refuses any other (the model refuses them again).
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import pathlib
import platform
import socket
import statistics
import subprocess
from typing import Any, Callable

import yaml
from rich.console import Console

from . import experiment as experiment_mod
from .experiment import kBackends
from .metrics import point_value
from .provenance import static as static_provenance
from .store import Store
from .sweep import expand
from .validate import hidden_params, model_binary
from .yamlloc import ConfigError

kCalibrationGlob = "calibrate-*.yaml"
kValidationGlob = "validate-*.yaml"
kVerbLevelModes = ("lat", "tput", "atomics", "sgbatch")   # the only modes a fit reads
kPointsSchema = "rdmalab-calibration-points/1"
kNoField = "-"                  # a calibration point that checks the fit without determining a field
kTolerance = 0.15               # every calibration point within +-15% of the fitted model
kValidationBand = 0.30
# The profile a backend's fit extends when --extends is not given: softnic's engine is the
# posting CPU; a hardware NIC (verbs) starts from a device NIC's structure.
kDefaultExtends = {"softnic": "host-engine", "verbs": "cx3", "model": "host-engine"}
kOneHostClusters = ("local", "netns")   # every process on this host
kSections = ("pcie", "wqe", "link", "roce", "nic", "cpu", "latency")
kHostMeasureTimeoutS = 60
kMicroRepetitions = 5           # the host facts take the best repeat, as the suite's points do
# Lines in flight in the line-transfer stream: a window of WRITE-delivered requests (rdmalab-bench's
# and the validation's windows are 4-32 per client); what a throughput pays per line moved.
kStreamSlots = 16
# The build target of each host-measurement binary, named when one is missing.
kHostMeasureTargets = {"rdmalab-micro-kv-store": "micro_kv_store", "rdmalab-micro-bench-core": "micro_bench_core",
                       "rdmalab-cacheline-pingpong": "cacheline_pingpong"}


class CalibrationWallError(ValueError):
    """An application-level point (or one from outside the calibration suite) was handed to the fit."""


# Parameters whose value alone names them in a point's label ("outbound write RC").
kBareValues = ("direction", "verb", "connection", "lat_method", "system", "design", "request", "response")


@dataclasses.dataclass
class Measured:
    """One point of an experiment: its parameters and its value over the stored repeats."""
    experiment: Any
    params: dict[str, Any]
    roles: dict[str, int]
    values: list[float]
    files: list[str]

    @property
    def is_latency(self) -> bool:
        return self.experiment.plot.get("y", "").startswith("lat_us")

    @property
    def best(self) -> float:
        """The best repeat: on a host shared with other work, interference only slows a run
        (a lower rate, a longer latency), so the best repeat estimates the point's own cost."""
        return min(self.values) if self.is_latency else max(self.values)

    @property
    def spread(self) -> float:
        """(worst - best) / best over the repeats: the noise of the point."""
        return (max(self.values) - min(self.values)) / self.best if self.best else 0.0

    def label(self) -> str:
        swept = [k for k in self.params if k not in self.experiment.params and k != "fits"]
        parts = []
        for k in swept:
            v = self.params[k]
            if isinstance(v, bool):
                parts += [k] if v else []
            else:
                parts.append(str(v) if k in kBareValues else f"{k}={v}")
        return " ".join(parts)


def experiment_files(exp_dir: pathlib.Path, pattern: str) -> list[pathlib.Path]:
    files = sorted((exp_dir / "calibrate").glob(pattern))
    if not files:
        raise ConfigError(f"no {pattern} in {exp_dir / 'calibrate'}")
    return files


def measured_points(store: Store, backend: str, files: list[pathlib.Path]) -> list[Measured]:
    """The points these experiment files define, as stored ok on the backend, repeats together
    (points an older version of a file left in the store are not among them)."""
    out: dict[tuple[str, str], Measured] = {}
    for path in files:
        exp = experiment_mod.parse(path)
        y, role, agg = exp.plot.get("y", "mops"), exp.plot.get("role"), exp.plot.get("aggregate")
        defined = {p.id for p in expand(exp, backend=backend)}
        for rec in store.points(backend, exp.id):
            if rec["point"]["id"] not in defined:
                continue
            value = point_value(rec, y, role, agg)
            if value is None or value <= 0:
                continue
            key = (exp.id, json.dumps(rec["point"]["params"], sort_keys=True))
            m = out.setdefault(key, Measured(exp, rec["point"]["params"], rec["point"]["roles"], [], []))
            m.values.append(value)
            m.files.append(os.path.relpath(rec["_path"], store.root))
    return list(out.values())


def model_point(m: Measured) -> dict[str, Any]:
    """Contract 3's point for a measured one: its mode, roles and the parameters the program took."""
    hidden = hidden_params(m.experiment)
    return {"experiment": m.experiment.id, "mode": m.experiment.mode, "roles": m.roles,
            "params": {k: v for k, v in m.params.items() if k not in hidden}}


def fit_points(points: list[Measured], calibration_ids: set[str]) -> list[dict[str, Any]]:
    """The fit's input: verb-level points of the calibration experiments, nothing else."""
    out = []
    for m in points:
        if m.experiment.id not in calibration_ids:
            raise CalibrationWallError(f"{m.experiment.id}: not a calibration experiment "
                                       f"({', '.join(sorted(calibration_ids))}); the fit reads no other point")
        if m.experiment.mode not in kVerbLevelModes:
            raise CalibrationWallError(f"{m.experiment.id} ({m.label()}): mode {m.experiment.mode} is application "
                                       f"level; the fit reads only verb-level modes ({', '.join(kVerbLevelModes)})")
        field = m.params.get("fits", kNoField)
        out.append({"id": f"{m.experiment.id}: {m.label()}", "field": "" if field == kNoField else field,
                    "metric": "lat_us" if m.is_latency else "mops",
                    "measured": m.best, "spread": m.spread, "files": m.files, "point": model_point(m)})
    return out


def host_facts(store: Store, backend: str, ids: set[str]) -> dict[str, Any]:
    """Where the run measured: host, CPU, kernel, devices and provider library as the points say."""
    devices, providers = {}, set()
    for rec in store.points(backend):
        if rec["experiment"]["id"] not in ids:
            continue
        prov = rec.get("provenance") or {}
        for who, dev in (prov.get("devices") or {}).items():
            if isinstance(dev, dict):
                devices.setdefault(str(dev.get("name") or dev.get("device") or who), dev)
        providers.update(prov.get("provider_library") or [])
    cpu = ""
    try:
        cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "")
    except OSError:
        pass
    return {"devices": devices, "providers": sorted(providers), "cpu": cpu, "cores": os.cpu_count() or 1}


def devices_text(devices: dict[str, dict[str, Any]]) -> str:
    """The devices as their point documents describe them, alike ones once: 'softnic0, softnic1 (firmware ...)'."""
    keys = ("firmware", "vendor_id", "vendor_part_id", "link_layer", "active_mtu_bytes", "max_qp", "max_sge")
    groups: dict[str, list[str]] = {}
    for name, dev in devices.items():
        groups.setdefault(", ".join(f"{k} {dev[k]}" for k in keys if k in dev), []).append(name)
    return "; ".join(f"{', '.join(names)} ({attrs})" for attrs, names in groups.items()) or "not reported"


def host_measurements(bin_dir: pathlib.Path, out_dir: pathlib.Path) -> dict[str, dict[str, Any]]:
    """This host's own costs, each measured by a micro benchmark that runs no system: the
    kv client loop's CPU per request, a sequencer's and an ECHO client's per answer (their own
    code, the network taken out), and a cross-core line move in a stream of them (a ping-pong's
    one-way latency would charge each line a whole hop, which a throughput overlaps). Their
    outputs are kept in out_dir; each fact's source names its file."""
    out_dir.mkdir(parents=True, exist_ok=True)

    def run(argv: list[str], name: str) -> Any:
        if not pathlib.Path(argv[0]).is_file():
            raise ConfigError(f"{argv[0]} is missing (build it: cmake --build build --target "
                              f"{kHostMeasureTargets[pathlib.Path(argv[0]).name]})")
        r = subprocess.run(argv, capture_output=True, text=True, timeout=kHostMeasureTimeoutS)
        if r.returncode != 0:
            raise ConfigError(f"{' '.join(argv)}: exit {r.returncode}: {r.stderr.strip()[-500:]}")
        (out_dir / name).write_text(r.stdout)
        return json.loads(r.stdout)

    def best_rate(binary: str, benchmark: str, name: str) -> tuple[float, int]:
        """The micro benchmark's fastest repetition, items per second, and how many ran."""
        micro = run([str(bin_dir / binary), f"--benchmark_filter={benchmark}$",
                     f"--benchmark_repetitions={kMicroRepetitions}", "--benchmark_min_time=0.1",
                     "--benchmark_format=json"], name)
        rates = [b["items_per_second"] for b in micro["benchmarks"] if b.get("run_type") == "iteration"]
        return max(rates), len(rates)

    request_rate, requests_runs = best_rate("rdmalab-micro-kv-store", "BM_ClientRequest", "client_request.json")
    answer_facts = {}
    for field, who, benchmark in (("cpu.sequencer_client_answer_ns", "sequencer", "BM_SequencerClientAnswer"),
                                  ("cpu.echo_client_answer_ns", "ECHO", "BM_EchoClientAnswer")):
        name = f"{field.split('.')[1].removesuffix('_ns')}.json"
        rate, runs = best_rate("rdmalab-micro-bench-core", benchmark, name)
        answer_facts[field] = {"value": 1e9 / rate,
                               "source": f"measured: rdmalab-bench's {who} client per answer with the network taken "
                                         f"out, best of {runs} (rdmalab-micro-bench-core {benchmark}, {out_dir}/{name})"}
    lines = [run([str(bin_dir / "rdmalab-cacheline-pingpong"), "--rounds", "101", "--batch", "2000",
                  "--stream", str(kStreamSlots), "--json"], f"line_transfer.{i}.json")["per_line_ns_median"]
             for i in range(kMicroRepetitions)]
    where = str(out_dir)
    return {"cpu.client_request_ns": {"value": 1e9 / request_rate,
                                      "source": f"measured: kv's client loop per request with the network taken "
                                                f"out, best of {requests_runs} (rdmalab-micro-kv-store "
                                                f"BM_ClientRequest, {where}/client_request.json)"},
            **answer_facts,
            "cpu.line_transfer_ns": {"value": min(lines),
                                     "source": f"measured: a cross-core cache-line move in a stream of "
                                               f"{kStreamSlots} in flight, best of {len(lines)} "
                                               f"(rdmalab-cacheline-pingpong --stream median per line, "
                                               f"{where}/line_transfer.*.json)"}}


def run_model_fit(model: pathlib.Path, doc: dict[str, Any], work: pathlib.Path, tolerance: float) -> dict[str, Any]:
    work.mkdir(parents=True, exist_ok=True)
    path = work / "calibration-points.json"
    path.write_text(json.dumps(doc, indent=1) + "\n")
    r = subprocess.run([str(model), "calibrate", "--measured", str(path), "--tolerance", str(tolerance)],
                       capture_output=True, text=True, timeout=120)
    if r.returncode not in (0, 1) or not r.stdout.strip():
        raise ConfigError(f"rdmalab-model calibrate --measured {path}: {r.stderr.strip() or 'no output'}")
    return json.loads(r.stdout)


def profile_yaml(name: str, backend: str, cluster: str, extends: str, fit: dict[str, Any],
                 provenance: dict[str, str], results_root: pathlib.Path) -> tuple[str, list[str]]:
    """The fitted profile (every field, each with its source) and the fields kept from --extends."""
    sections: dict[str, dict[str, Any]] = {}
    kept = []
    for f in fit["fields"]:
        section, field = f["path"].split(".", 1)
        value = f["value"]
        leaf: dict[str, Any] = {"value": int(value) if isinstance(value, float) and value.is_integer() else value}
        if "fit" in f:
            leaf["source"] = f"fit to {f['fit']} measured on {backend} ({results_root})"
            leaf["fit"] = f["fit"]
            leaf["points"] = f["points"]
        elif f["source"] and f["source"].startswith("measured:"):
            leaf["source"] = f["source"]
        else:
            kept.append(f["path"])
            leaf["source"] = f"kept from {extends}, not determined by the calibration suite: {f['source'] or 'model default'}"
        sections.setdefault(section, {})[field] = leaf
    head = {"name": name, "description": f"{backend} measured on {provenance['host']} ({provenance['cpu']}), "
                                         f"fitted by run_all.py calibrate", "provenance": provenance}
    body = {s: sections[s] for s in kSections if s in sections}
    header = (f"# {name}: a measured profile, written by `run_all.py calibrate --backend {backend} --cluster {cluster} "
              f"--extends {extends}`.\n# Fitted fields name the calibration points and stored point files they "
              f"come from; 'kept from {extends}' marks what the suite could not determine.\n")
    dump = dict(sort_keys=False, width=200, allow_unicode=True)
    return (header + yaml.safe_dump(head, default_flow_style=False, **dump)
            + yaml.safe_dump(body, default_flow_style=None, **dump)), kept


def fit_table(fit: dict[str, Any], console: Console) -> None:
    """One line per calibration point (plain text: the table is read in logs as often as on a terminal)."""
    rows = [(r["id"], r["field"] or "(check)", f"{r['measured']:.3f}", f"{r['predicted']:.3f}",
             "us" if r["metric"] == "lat_us" else "Mops", f"{r['error']:+.1%}", f"{r['spread']:.0%}",
             "" if r["pass"] else "  <- outside", r["bottleneck"]) for r in fit["rows"]]
    head = ("point", "determines", "measured", "model", "unit", "error", "spread", "", "model bottleneck")
    widths = [max(len(row[i]) for row in [head, *rows]) for i in range(len(head))]
    console.print(f"calibration points: measured (best of the repeats) vs the fitted model, tolerance "
                  f"+-{fit['tolerance']:.0%}; spread = (worst - best) / best over the repeats",
                  markup=False, highlight=False, soft_wrap=True)
    for row in [head, *rows]:
        cells = [c.ljust(w) if i in (0, 1, 4, 8) else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))]
        console.print("  ".join(cells).rstrip(), markup=False, highlight=False, soft_wrap=True)


def validation_rows(measured: list[Measured], predicted: list[Measured]) -> list[dict[str, Any]]:
    by_key = {(p.experiment.id, json.dumps(p.params, sort_keys=True)): p for p in predicted}
    rows = []
    for m in measured:
        p = by_key.get((m.experiment.id, json.dumps(m.params, sort_keys=True)))
        if p is None:
            continue
        rows.append({"experiment": m.experiment.id, "point": m.label(), "measured": m.best,
                     "predicted": p.best, "error": p.best / m.best - 1, "spread": m.spread,
                     "files": m.files})
    return sorted(rows, key=lambda r: (r["experiment"], r["point"]))


def validation_table(rows: list[dict[str, Any]], console: Console) -> dict[str, float]:
    console.print("validation: application-level points measured (best of the repeats) vs predicted by the "
                  "fitted profile, which never saw them", markup=False, highlight=False, soft_wrap=True)
    lines = [(r["experiment"], r["point"], f"{r['measured']:.3f}", f"{r['predicted']:.3f}", f"{r['error']:+.1%}",
              f"{r['spread']:.0%}", "" if abs(r["error"]) <= kValidationBand else "  <- outside +-30%")
             for r in rows]
    head = ("experiment", "point", "measured Mops", "predicted Mops", "error", "spread", "")
    widths = [max(len(line[i]) for line in [head, *lines]) for i in range(len(head))]
    for line in [head, *lines]:
        cells = [c.ljust(w) if i in (0, 1, 6) else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths))]
        console.print("  ".join(cells).rstrip(), markup=False, highlight=False, soft_wrap=True)
    errors = [abs(r["error"]) for r in rows]
    summary = {"points": len(rows), "median_abs_error": statistics.median(errors) if errors else float("nan"),
               "within_30": sum(e <= kValidationBand for e in errors) / len(errors) if errors else float("nan")}
    console.print(f"validation: {summary['points']} points, median |error| {summary['median_abs_error']:.1%}, "
                  f"{summary['within_30']:.0%} within +-{kValidationBand:.0%} "
                  f"(targets: median <= 20%, >= 80% within +-30%)", markup=False, highlight=False, soft_wrap=True)
    return summary


def parser(root: pathlib.Path) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="run_all.py calibrate",
                                description="Measure the calibration suite on a backend, fit a model profile to it "
                                            "(rdmalab-model's own fit), write it with provenance.")
    p.add_argument("--backend", choices=kBackends, default="softnic")
    p.add_argument("--cluster", default="local", help="inventory YAML, or a built-in: local (default), netns")
    p.add_argument("--name", help="profile name (default: the backend's name); written to --profile-dir/NAME.yaml")
    p.add_argument("--extends", help="profile the fit starts from and keeps what it cannot determine "
                                     f"(default: {', '.join(f'{b}: {e}' for b, e in kDefaultExtends.items())})")
    p.add_argument("--profile", help="backend model only: the profile whose predictions stand in for a measurement "
                                     "(a check of the fit itself: it must find that profile's values again)")
    p.add_argument("--validate", action="store_true",
                   help="also measure the application-level validation experiments and compare them with the model")
    p.add_argument("--force", action="store_true", help="re-measure every point (default: resume what is stored)")
    p.add_argument("--no-run", action="store_true",
                   help="run nothing: fit the points stored already, measured or imported (run_all.py import); "
                        "fields no stored point determines, and the host's own costs, stay as --extends has them")
    p.add_argument("--out", default=str(root / "results"), help="results directory (default: results/)")
    p.add_argument("--profile-dir", default=str(root / "model" / "profiles"), help="where the profile is written")
    p.add_argument("--bin-dir", default=str(root / "build" / "bin"))
    p.add_argument("--model-bin")
    p.add_argument("--experiments-dir", default=str(root / "experiments"))
    p.add_argument("--tolerance", type=float, default=kTolerance, help="allowed error of a calibration point")
    return p


RunSuite = Callable[[list[str], Console], int]   # cli.main's run: argv -> exit status


def main(argv: list[str], console: Console, root: pathlib.Path, run: RunSuite) -> int:
    args = parser(root).parse_args(argv)
    exp_dir = pathlib.Path(args.experiments_dir)
    name = args.name or args.backend
    extends = args.extends or kDefaultExtends[args.backend]
    common = ["--backend", args.backend, "--cluster", args.cluster, "--out", args.out, "--bin-dir", args.bin_dir,
              "--experiments-dir", args.experiments_dir, "--no-report", "--force" if args.force else "--resume"]
    common += ["--model-bin", args.model_bin] if args.model_bin else []
    common += ["--profile", args.profile] if args.profile else []
    if (args.backend == "model") != bool(args.profile) or (args.backend == "model" and args.validate):
        console.print("run_all.py calibrate: --profile goes with --backend model (and without --validate), whose "
                      "predictions of that profile stand in for a measurement; nothing was run", markup=False)
        return 2
    known = sorted(f.stem for f in (root / "model" / "profiles").glob("*.yaml"))
    if extends not in known and not (extends.endswith(".yaml") and pathlib.Path(extends).is_file()):
        console.print(f"run_all.py calibrate: --extends {extends} is not a profile (valid: {', '.join(known)}, "
                      "or a path to a .yaml file); nothing was run", markup=False)
        return 2
    try:
        cal_files = experiment_files(exp_dir, kCalibrationGlob)
        val_files = experiment_files(exp_dir, kValidationGlob) if args.validate else []
    except ConfigError as exc:
        console.print("\n".join(exc.messages), markup=False)
        return 2
    if args.no_run and (args.validate or args.force):
        console.print("run_all.py calibrate: --no-run runs nothing, so neither --validate nor --force applies; "
                      "nothing was done", markup=False)
        return 2
    to_run = [str(f) for f in cal_files + val_files]   # one run: the validation measured beside the calibration
    rc = 0 if args.no_run else run([*to_run, *common], console)
    if rc == 2 or rc == 130:
        return rc
    store = Store(args.out)
    cal_ids = {experiment_mod.parse(f).id for f in cal_files}
    points = fit_points(measured_points(store, args.backend, cal_files), cal_ids)
    if not points:
        console.print(f"calibrate: no calibration point stored ok on {args.backend} in {store.root}", markup=False)
        return 1
    facts = host_facts(store, args.backend, cal_ids)
    # A one-host run (every process here) measured this host's cores; on a cluster the
    # coordinator's cores say nothing of the server's, which stay as --extends has them.
    host = {"cpu.cores": {"value": facts["cores"],
                          "source": f"measured: cores of {socket.gethostname()} (os.cpu_count), shared by every "
                                    "process of a one-host run"},
            # the fit's start for the cores a shared host leaves the run: all of them
            "cpu.available_cores": {"value": facts["cores"], "source": "measured: os.cpu_count (fit start)"}}
    one_host = args.cluster in kOneHostClusters and args.backend != "model" and not args.no_run
    if one_host:
        try:
            host.update(host_measurements(pathlib.Path(args.bin_dir), store.root / args.backend / "calibrate-host"))
        except (ConfigError, subprocess.TimeoutExpired, json.JSONDecodeError, KeyError, ValueError) as exc:
            console.print(f"calibrate: measuring the host's own costs failed: {exc}", markup=False)
            return 2
    doc = {"schema_version": kPointsSchema, "extends": extends, "backend": args.backend, "points": points,
           "facts": host if one_host else {}}
    model = pathlib.Path(args.model_bin) if args.model_bin else model_binary(pathlib.Path(args.bin_dir), None)
    work = store.root / "calibrate" / name
    try:
        fit = run_model_fit(model, doc, work, args.tolerance)
    except ConfigError as exc:
        console.print("\n".join(exc.messages), markup=False)
        return 2
    git = static_provenance(root)["git"]
    provenance = {"host": socket.gethostname(), "cpu": facts["cpu"] or platform.machine(),
                  "cores": facts["cores"], "kernel": platform.release(), "backend": args.backend, "cluster": args.cluster,
                  "device": devices_text(facts["devices"]),
                  "driver": ", ".join(facts["providers"]) or "not reported",
                  "commit": f"{git['revision']}{' (dirty tree)' if git['dirty'] else ''}",
                  "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                  "results": str(store.root), "extends": extends,
                  "suite": ", ".join(str(f.relative_to(exp_dir)) for f in cal_files)}
    text, kept = profile_yaml(name, args.backend, args.cluster, extends, fit, provenance, store.root)
    out = pathlib.Path(args.profile_dir) / f"{name}.yaml"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    (work / "fit.json").write_text(json.dumps(fit, indent=1) + "\n")
    fit_table(fit, console)
    console.print(f"fitted {len(fit['fits'])} fields: " + ", ".join(f"{f['field']} = {f['fitted']:.4g}"
                                                                      for f in fit["fits"]), markup=False)
    console.print(f"not determined by the calibration suite (kept from {extends}): {', '.join(kept)}",
                  markup=False, highlight=False)
    failing = [r["id"] for r in fit["rows"] if not r["pass"]]
    console.print(f"profile {name}: {out} ({len(fit['rows']) - len(failing)}/{len(fit['rows'])} calibration "
                  f"points within +-{args.tolerance:.0%})", markup=False)
    if args.validate:
        vrc = run([*map(str, val_files), "--backend", "model", "--profile", str(out), "--out", args.out,
                   "--bin-dir", args.bin_dir, "--experiments-dir", args.experiments_dir, "--no-report", "--force",
                   *(["--model-bin", args.model_bin] if args.model_bin else [])], console)
        if vrc in (2, 130):
            return vrc
        rows = validation_rows(measured_points(store, args.backend, val_files),
                               measured_points(store, "model", val_files))
        summary = validation_table(rows, console)
        (work / "validation.json").write_text(
            json.dumps({"profile": str(out), "rows": rows, "summary": summary}, indent=1) + "\n")
    return 0 if not failing else 1
