"""`run_all.py check --profile P`: does this NIC still do what its profile says?

Measures the calibration suite (experiments/calibrate/calibrate-*.yaml, or the experiments named
with --suite) afresh on the backend, each point with its repeats, and compares each point's best
repeat (interference only slows a run, as the fit assumes) with P's prediction. A point fails when
it is worse than the prediction by more than the tolerance (a lower rate, a longer latency); a
better one is noted, not failed (the profile is stale there, the NIC is not short). Tolerance
`auto`: the larger of kAutoFloor and kAutoSpreads times the point's own spread over its repeats
(worst - best) / best, so a noisy point widens its own band; or a fixed percentage. For every
failing point the model names the resource that sets the point's rate, and the check says what
the measurement implies there instead: the time an operation takes beyond the profile's. Exit 1
on any failure, 0 otherwise (2: nothing could be checked). The result is written as JSON
(`rdmalab-check/1`, docs/schemas/rdmalab-check.schema.json) and JUnit XML, one test case a point.
"""
from __future__ import annotations

import argparse
import collections
import json
import pathlib
import subprocess
import xml.etree.ElementTree as ET
from typing import Any, Callable, Optional

from rich.console import Console

from . import experiment as experiment_mod
from .calibrate import Measured, experiment_files, kCalibrationGlob, measured_points, model_point
from .store import Store, utc_now
from .validate import model_binary
from .yamlloc import ConfigError

kSchema = "rdmalab-check/1"
kAutoFloor = 0.30          # the band no point is held to less than: the score's "within +-30%"
kAutoSpreads = 2.0         # a point's band: this many times its own spread over the repeats, if wider
kBackends = ("softnic", "verbs")
kModelTimeoutS = 60

RunSuite = Callable[[list[str], Console], int]


def tolerance(arg: str) -> Optional[float]:
    """None for auto; else the fraction of a percentage ('20' or '20%')."""
    if arg == "auto":
        return None
    try:
        pct = float(arg.rstrip("%"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--tolerance {arg!r}: expected auto or a percentage, e.g. 20") from None
    if not 0 < pct < 1000:
        raise argparse.ArgumentTypeError(f"--tolerance {arg!r}: a percentage in (0, 1000)")
    return pct / 100


def parser(root: pathlib.Path) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="run_all.py check",
                                description="measure the calibration suite and compare it with a profile's "
                                            "predictions: exit 1 when a point falls short, naming what")
    p.add_argument("--profile", required=True, help="the profile the NIC should meet (a name in model/profiles or a "
                                                    "path to a .yaml)")
    p.add_argument("--backend", choices=kBackends, default="softnic")
    p.add_argument("--cluster", default="local", help="inventory YAML, or a built-in: local (default), netns")
    p.add_argument("--suite", action="append", metavar="NAME",
                   help="a calibration experiment to check (calibrate-tput, calibrate-lat, ...; repeatable; "
                        "default: all of them)")
    p.add_argument("--tolerance", type=tolerance, default=None, metavar="auto|PCT",
                   help=f"auto (default): the larger of {kAutoFloor * 100:.0f}%% and {kAutoSpreads:g} x the point's spread "
                        "over its repeats; or a fixed percentage")
    p.add_argument("--no-run", action="store_true", help="compare the points stored in --out, measure nothing")
    p.add_argument("--out", default=str(root / "results" / "check"), help="results directory (default: results/check)")
    p.add_argument("--json", help="where the JSON goes (default: OUT/check.json)")
    p.add_argument("--junit", help="where the JUnit XML goes (default: OUT/check.xml)")
    p.add_argument("--bin-dir", default=str(root / "build" / "bin"))
    p.add_argument("--model-bin")
    p.add_argument("--experiments-dir", default=str(root / "experiments"))
    return p


def predict(model: pathlib.Path, point: dict[str, Any], profile: str) -> dict[str, Any]:
    """The profile's prediction of one point (contract 3): the first row of the answer."""
    r = subprocess.run([str(model), "predict", "--json"], input=json.dumps({**point, "profile": profile}),
                       capture_output=True, text=True, timeout=kModelTimeoutS)
    if r.returncode != 0:
        raise ConfigError(f"rdmalab-model predict: {r.stderr.strip() or 'no answer'}")
    doc = json.loads(r.stdout)
    if doc.get("not_modeled"):
        raise ConfigError(f"the model does not represent {point['experiment']} {point['params']}: {doc['not_modeled']}")
    return doc["results"][0]


def verdict(m: Measured, row: dict[str, Any], band: Optional[float]) -> dict[str, Any]:
    metric = "lat_us_p50" if m.is_latency else "mops"
    predicted = row.get(metric)
    if predicted is None and m.is_latency:  # a prediction without a median latency gives its mean
        predicted = row.get("lat_us_mean")
    tol = band if band is not None else max(kAutoFloor, kAutoSpreads * m.spread)
    worse = m.best / predicted - 1 if m.is_latency else predicted / m.best - 1   # > 0: the NIC falls short
    status = "fail" if worse > tol else "better" if -worse > tol else "pass"
    out = {"experiment": m.experiment.id, "point": m.label(), "params": m.params, "metric": metric,
           "measured": m.best, "repeats": m.values, "spread": m.spread, "predicted": predicted, "tolerance": tol,
           "shortfall": worse, "status": status, "resource": row.get("bottleneck_label") or row.get("bottleneck"),
           "files": m.files}
    if status == "fail":
        # per operation: what the profile allows at its bottleneck, and what the run took
        allowed_ns = predicted * 1e3 if m.is_latency else 1e3 / predicted
        took_ns = m.best * 1e3 if m.is_latency else 1e3 / m.best
        out["explanation"] = (f"{out['resource']} sets this point in the profile, at {allowed_ns:.4g} ns "
                              f"{'of latency' if m.is_latency else 'an operation'}; the run took {took_ns:.4g} ns: "
                              f"{took_ns - allowed_ns:.4g} ns more there, or another resource the profile does not "
                              f"see")
    return out


def common_region(failed: list[dict[str, Any]], checked: list[dict[str, Any]]) -> dict[str, Any]:
    """What every failing point shares and not every checked point does: the region of the
    workload the shortfall lies in (its sizes as a range)."""
    if not failed:
        return {}

    def shared(points: list[dict[str, Any]]) -> dict[str, Any]:
        common = dict(points[0]["params"])
        for q in points[1:]:
            common = {k: v for k, v in common.items() if q["params"].get(k) == v}
        return common
    everywhere = shared(checked)
    sizes = sorted({f["params"].get("size") for f in failed if f["params"].get("size") is not None})
    region = {k: v for k, v in shared(failed).items()
              if k not in ("fits", "size") and everywhere.get(k, object()) != v}
    if sizes:
        region["size"] = sizes[0] if len(sizes) == 1 else f"{sizes[0]}-{sizes[-1]}"
    return region


def junit(doc: dict[str, Any]) -> str:
    suite = ET.Element("testsuite", name=f"rdmalab check {doc['profile']}", tests=str(len(doc["points"])),
                       failures=str(doc["failed"]), timestamp=doc["written"])
    for p in doc["points"]:
        case = ET.SubElement(suite, "testcase", classname=p["experiment"], name=p["point"])
        text = (f"measured {p['measured']:.4g} {p['metric']}, predicted {p['predicted']:.4g}, "
                f"band +-{p['tolerance']:.0%}")
        if p["status"] == "fail":
            ET.SubElement(case, "failure", message=text).text = p.get("explanation", "")
        else:
            ET.SubElement(case, "system-out").text = f"{p['status']}: {text}"
    return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"


def main(argv: list[str], console: Console, root: pathlib.Path, run: RunSuite) -> int:
    p = parser(root)
    args = p.parse_args(argv)
    exp_dir = pathlib.Path(args.experiments_dir)
    try:
        files = experiment_files(exp_dir, kCalibrationGlob)
    except ConfigError as exc:
        console.print("\n".join(exc.messages), markup=False)
        return 2
    by_id = {experiment_mod.parse(f).id: f for f in files}
    if args.suite:
        unknown = [s for s in args.suite if s not in by_id]
        if unknown:
            p.error(f"--suite {', '.join(unknown)}: not a calibration experiment (valid: {', '.join(sorted(by_id))})")
        files = [by_id[s] for s in args.suite]
    profile = args.profile
    if not (root / "model" / "profiles" / f"{profile}.yaml").is_file() and not pathlib.Path(profile).is_file():
        known = sorted(f.stem for f in (root / "model" / "profiles").glob("*.yaml"))
        p.error(f"--profile {profile}: not a profile (valid: {', '.join(known)}, or a path to a .yaml)")
    if not args.no_run:
        rc = run([*map(str, files), "--backend", args.backend, "--cluster", args.cluster, "--out", args.out,
                  "--bin-dir", args.bin_dir, "--experiments-dir", args.experiments_dir, "--force", "--no-report",
                  "--no-model"], console)
        if rc in (2, 130):
            return rc
    measured = measured_points(Store(args.out), args.backend, files)
    if not measured:
        console.print(f"check: no point of {', '.join(f.stem for f in files)} stored ok on {args.backend} in "
                      f"{args.out}", markup=False)
        return 2
    model = pathlib.Path(args.model_bin) if args.model_bin else model_binary(pathlib.Path(args.bin_dir), None)
    points = []
    try:
        for m in measured:
            points.append(verdict(m, predict(model, model_point(m), profile), args.tolerance))
    except (ConfigError, subprocess.TimeoutExpired, json.JSONDecodeError) as exc:
        console.print(f"check: {getattr(exc, 'messages', [exc])[0]}", markup=False)
        return 2
    failed = [q for q in points if q["status"] == "fail"]
    doc = {"schema_version": kSchema, "written": utc_now(), "profile": profile, "backend": args.backend,
           "cluster": args.cluster, "results": args.out, "tolerance": "auto" if args.tolerance is None else
           args.tolerance, "points": points, "failed": len(failed), "region": common_region(failed, points),
           "resources": dict(collections.Counter(q["resource"] for q in failed))}
    report(doc, console)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    json_path = pathlib.Path(args.json) if args.json else out / "check.json"
    xml_path = pathlib.Path(args.junit) if args.junit else out / "check.xml"
    json_path.write_text(json.dumps(doc, indent=1) + "\n")
    xml_path.write_text(junit(doc))
    console.print(f"check: {json_path}, {xml_path}", markup=False)
    return 1 if failed else 0


def report(doc: dict[str, Any], console: Console) -> None:
    from rich.table import Table
    t = Table(title=f"check against profile {doc['profile']} ({doc['backend']})")
    for c in ("point", "measured", "predicted", "band", "verdict", "resource (the model's)"):
        t.add_column(c, justify="left" if c in ("point", "verdict", "resource (the model's)") else "right")
    for q in doc["points"]:
        style = {"fail": "red", "better": "yellow"}.get(q["status"], "")
        t.add_row(f"{q['experiment']}: {q['point']}", f"{q['measured']:.4g}", f"{q['predicted']:.4g}",
                  f"+-{q['tolerance']:.0%}", f"[{style}]{q['status']}[/{style}]" if style else q["status"],
                  q["resource"] or "")
    Console(stderr=True, width=200).print(t)
    for q in doc["points"]:
        if q["status"] == "fail":
            console.print(f"FAIL {q['experiment']}: {q['point']}: measured {q['measured']:.4g} {q['metric']} against "
                          f"{q['predicted']:.4g} (+-{q['tolerance']:.0%}): {q['explanation']}", markup=False,
                          highlight=False, soft_wrap=True)
    if doc["failed"]:
        region = " ".join(f"{k}={v}" for k, v in doc["region"].items())
        console.print(f"check: {doc['failed']} of {len(doc['points'])} points fall short of profile {doc['profile']}; "
                      f"what they share: {region or 'nothing'}; resources: "
                      f"{', '.join(f'{r} ({n})' for r, n in doc['resources'].items())}", markup=False, highlight=False)
    else:
        console.print(f"check: all {len(doc['points'])} points meet profile {doc['profile']}", markup=False)
