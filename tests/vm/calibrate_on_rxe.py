#!/usr/bin/python3
"""`run_all.py calibrate` end to end on kernel rxe in the Soft-RoCE VM: the calibration
suite's points (experiments/calibrate/calibrate-*.yaml, one repeat each, latency over
1000 round trips) measured between
rxe0 and rxe1, fitted by the model's own fit (harness/calibrate.py, `rdmalab-model calibrate
--measured`) and written as a profile with provenance. The fit's errors are reported, not
asserted: rates under TCG are the emulator's, not a NIC's.

The guest has no Python, so the points run from a generated bash script there (the case
runner of systems_on_rxe.py) and the documents are turned into the fit's points here. What
fails: a point without a document or with a non-zero exit, or the fit refusing its input.

  tests/vm/calibrate_on_rxe.py [--build DIR] [--out FILE.yaml]
  tests/vm/calibrate_on_rxe.py --on softnic ...   the same points on a softnic RoCE fabric
  tests/vm/calibrate_on_rxe.py --guest-log FILE   fit the log of a run made elsewhere
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import platform
import shlex
import socket
import sys

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(ROOT), str(HERE)]

from rich.console import Console  # noqa: E402

import systems_on_rxe as vm  # noqa: E402
from harness import calibrate, experiment  # noqa: E402
from harness.metrics import point_value  # noqa: E402
from harness.provenance import static as static_provenance  # noqa: E402
from harness.runner import flag, forwarded  # noqa: E402
from harness.sweep import Reduction, expand  # noqa: E402
from harness.validate import load  # noqa: E402
from harness.yamlloc import ConfigError  # noqa: E402

FIRST_PORT = 22000
# One repeat a point, and latency over 1000 round trips (not 10000): a WRITE ping-pong under
# TCG takes milliseconds a round trip, 10000 outlast a point's 90 s deadline.
REDUCTION = Reduction(repeats=1, params=(("iters", 1000),))
GUEST_CPUS = 2   # scripts/rxe-vm's guest: server on vCPU 0, clients on vCPU 1
EXTENDS = "host-engine"   # rxe's engine is the host's CPUs too (the kernel's, not the poster's)
PROFILE_NAME = "rxe-vm"


def calibration_points(bin_dir: pathlib.Path) -> list[tuple[experiment.Experiment, object]]:
    """Every point of the calibration experiments, one repeat, bound to rdmalab-bench."""
    out = []
    for path in calibrate.experiment_files(ROOT / "experiments", calibrate.kCalibrationGlob):
        errors: list[str] = []
        exp = load(experiment.parse(path), "verbs", bin_dir, None, errors)
        if exp is None:
            raise ConfigError(errors)
        out += [(exp, p) for p in expand(exp, REDUCTION, backend="verbs")]
    return out


def case_of(exp, point, bench: str) -> vm.Case:
    args = [exp.mode]
    for k, v in forwarded(exp, point.params).items():
        param = exp.program.params[k]
        args += flag(param.flag or f"--{k}", v, param.default)
    return vm.Case(f"{exp.id}-{point.index}", "bench", tuple(args), clients=point.roles.get("client", 1))


def guest_script(cases: list[vm.Case], bench: str) -> str:
    lines = [vm._GUEST_PRELUDE, 'echo "=== NPROC $(nproc)"']
    for port, case in enumerate(cases, FIRST_PORT):
        lines.append(f"run_case {case.id} {port} {vm.CASE_DEADLINE_S} {case.clients} -- "
                     + " ".join(shlex.quote(a) for a in [bench, *case.args]))
    return "\n".join(lines) + "\n"


def measured(points, cases, blocks: dict, out_dir: pathlib.Path) -> tuple[list[calibrate.Measured], list[str]]:
    """Each point's value as the harness reads it from its documents; the documents kept in
    out_dir, named by the point files of the fit's provenance."""
    found, problems = [], []
    for (exp, point), case in zip(points, cases):
        block = blocks.get(case.id)
        if block is None:
            problems.append(f"{case.id}: no result in the log")
            continue
        bad = {r: rc for r, rc in block["statuses"].items() if rc != "0"}
        roles = ["server", *(f"client{i}" for i in range(case.clients))]
        if bad or not all(r in block["docs"] for r in roles):
            problems.append(f"{case.id}: exit statuses {block['statuses']}, documents {sorted(block['docs'])}")
            continue
        rec = {"status": "ok", "roles": [{"role": r.rstrip("0123456789"), "document": block["docs"][r]} for r in roles]}
        value = point_value(rec, exp.plot.get("y", "mops"), exp.plot.get("role"), exp.plot.get("aggregate"))
        if value is None or value <= 0:
            problems.append(f"{case.id}: no {exp.plot.get('y', 'mops')} in its documents")
            continue
        path = out_dir / exp.id / f"{point.id}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(rec, indent=1) + "\n")
        found.append(calibrate.Measured(exp, point.params, point.roles, [value], [str(path.relative_to(out_dir))]))
    return found, problems


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default=str(ROOT / "build"), help="build directory with bin/rdmalab-bench, rdmalab-model")
    p.add_argument("--out", help="the fitted profile (default: BUILD/rxe-vm.yaml; the guest log and the point "
                                 "documents beside it)")
    p.add_argument("--on", choices=("rxe", "softnic"), default="rxe", help="provider [rxe: in the VM]")
    p.add_argument("--vm-timeout", type=int, default=vm.VM_TIMEOUT_S, help="limit for the whole VM run, seconds")
    p.add_argument("--guest-log", metavar="FILE", help="fit this log instead of running")
    a = p.parse_args()
    build = pathlib.Path(a.build).resolve()
    a.bench, a.kv = str(build / "bin" / "rdmalab-bench"), str(build / "bin" / "rdmalab-kv")
    model = build / "bin" / "rdmalab-model"
    for binary in (a.bench, str(model)):
        if not os.access(binary, os.X_OK):
            p.error(f"{binary} is not built (cmake --build {build} --target rdmalab-bench rdmalab-model)")
    console = Console(highlight=False)
    try:
        points = calibration_points(build / "bin")
    except ConfigError as exc:
        print("\n".join(exc.messages))
        return 2
    cases = [case_of(exp, point, a.bench) for exp, point in points]
    out = pathlib.Path(a.out or build / f"{PROFILE_NAME}-on-{a.on}.yaml")
    docs_dir = out.with_suffix("")
    if a.guest_log:
        log = pathlib.Path(a.guest_log).read_text(errors="replace")
    else:
        script = guest_script(cases, a.bench)
        log = (vm.run_on_rxe if a.on == "rxe" else vm.run_on_softnic)(script, a)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.with_suffix(".log").write_text(log)
    found, problems = measured(points, cases, vm.parse_log(log), docs_dir)
    for problem in problems:
        print(f"calibrate_on_rxe: {problem}")
    if not found:
        print("calibrate_on_rxe: no point measured; the log ends:\n" + "\n".join(log.splitlines()[-40:]))
        return 1
    ids = {exp.id for exp, _ in points}
    nproc = next((int(line.split()[-1]) for line in log.splitlines() if line.startswith("=== NPROC ")), GUEST_CPUS)
    facts = {"cpu.cores": {"value": nproc, "source": f"measured: the {a.on} run's CPUs (nproc where it ran)"}}
    doc = {"schema_version": calibrate.kPointsSchema, "extends": EXTENDS, "backend": "verbs",
           "points": calibrate.fit_points(found, ids), "facts": facts}
    try:
        fit = calibrate.run_model_fit(model, doc, docs_dir, calibrate.kTolerance)
    except ConfigError as exc:
        print("\n".join(exc.messages))
        return 1
    first = next(m for m in found if m.experiment.id.endswith("tput"))
    device = {}
    docs = json.loads((docs_dir / first.files[0]).read_text())
    env = (docs["roles"][-1]["document"].get("environment") or {}).get("device") or {}
    if env:
        device[str(env.get("name", "client device"))] = env
    provenance = {"host": f"{socket.gethostname()} ({'Soft-RoCE VM, TCG' if a.on == 'rxe' else 'softnic RoCE fabric'})",
                  "cpu": f"{nproc} CPUs where the points ran", "kernel": platform.release() if a.on == "softnic"
                  else "Debian's kernel in scripts/rxe-vm", "backend": a.on, "cluster": "vm" if a.on == "rxe" else "local",
                  "device": calibrate.devices_text(device), "driver": a.on,
                  "commit": static_provenance(ROOT)["git"]["revision"],
                  "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                  "results": str(docs_dir), "extends": EXTENDS,
                  "suite": "calibrate/calibrate-*.yaml, one repeat each (tests/vm/calibrate_on_rxe.py)"}
    text, kept = calibrate.profile_yaml(PROFILE_NAME, a.on, provenance["cluster"], EXTENDS, fit, provenance, docs_dir)
    out.write_text(text)
    calibrate.fit_table(fit, console)
    within = sum(r["pass"] for r in fit["rows"])
    print(f"calibrate_on_rxe: profile {out} ({within}/{len(fit['rows'])} calibration points within "
          f"+-{calibrate.kTolerance:.0%} on {a.on}: reported, not asserted; {len(kept)} fields kept from {EXTENDS}; "
          f"{len(problems)} points without a value)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
