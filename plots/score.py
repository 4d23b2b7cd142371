"""How well the model knows a NIC: the predictions made with the profile fitted to a backend
(OUT/fitted/BACKEND/) against what that backend measured (OUT/BACKEND/), point by point as the
figures pair them (facet, series, x of each experiment's plot), beside the measurement's own
spread: its repeats, or a second run of the same suite (`--against`). Stored results only.

Per experiment: the pairs, the median absolute error of the fitted prediction, the share within
+-30%, the rank agreement (Spearman's rho over the experiment's pairs); the floor beside them (the
repeats' median coefficient of variation; with a second run, the same three figures of that run
scored against this one). Overall: the pooled pairs' median and share, the experiments' median rho.
The document is `rdmalab-score/1` (docs/schemas/rdmalab-score.schema.json)."""
from __future__ import annotations

import dataclasses
import json
import math
import pathlib
import statistics
from typing import Any, Optional

import yaml

from harness.model_pass import fitted_profile
from harness.store import Store, fitted_root

from .figures import Table

kSchema = "rdmalab-score/1"
kModel = "model"
kWithinFraction = 0.30     # a prediction "within" is within +-30% of the measured value
kMinRankPairs = 3          # fewer pairs than this have no rank agreement worth the name
kFileName = "score.json"
kCalibrationDir = "calibrate"   # experiments/calibrate/: the calibration suite and calibrate --validate


@dataclasses.dataclass
class Pair:
    key: tuple               # (facet, series, x) of the experiment's plot
    measured: float
    predicted: float

    @property
    def error(self) -> float:
        return self.predicted / self.measured - 1.0


def _ranks(values: list[float]) -> list[float]:
    """1-based ranks, ties sharing their mean rank."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def spearman(xs: list[float], ys: list[float]) -> Optional[float]:
    """Spearman's rho; None for fewer than kMinRankPairs pairs or a constant side (no order to agree on)."""
    if len(xs) < kMinRankPairs:
        return None
    rx, ry = _ranks(xs), _ranks(ys)
    mx, my = statistics.fmean(rx), statistics.fmean(ry)
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    sxx, syy = sum((a - mx) ** 2 for a in rx), sum((b - my) ** 2 for b in ry)
    if sxx == 0 or syy == 0:
        return None
    return sxy / math.sqrt(sxx * syy)


def pairs(measured: Table, predicted: Table) -> list[Pair]:
    """The points both tables hold a positive value at, keyed as the figure draws them."""
    found = []
    for row in measured.rows:
        m = row["mean"]
        if m is None or m <= 0:
            continue
        p, _ = predicted.lookup(row["facet"], row["series"], row["x"])
        if p is not None and p > 0:
            found.append(Pair((row["facet"], row["series"], row["x"]), m, p))
    return found


def summary(found: list[Pair]) -> dict[str, Any]:
    errors = [abs(p.error) for p in found]
    return {"points": len(found),
            "median_abs_error": statistics.median(errors) if errors else None,
            "within_30pct": sum(e <= kWithinFraction for e in errors) / len(errors) if errors else None,
            "rank_agreement": spearman([p.measured for p in found], [p.predicted for p in found])}


def _repeat_spread(t: Table) -> Optional[float]:
    """The median coefficient of variation of the points measured more than once."""
    cvs = [r["stdev"] / r["mean"] for r in t.rows if r["n"] > 1 and r["mean"]]
    return statistics.median(cvs) if cvs else None


def _table(store: Store, backend: str, exp_id: str) -> Optional[Table]:
    records = list(store.points(backend, exp_id))
    return Table(records) if records else None


def _calibration_suite(t: Table) -> bool:
    """The calibration suite's own experiments (experiments/calibrate/): the profile was fitted to
    them (calibrate-*) or they are calibrate --validate's own check (validate-*), not the run's."""
    return any(pathlib.Path(r["experiment"]["file"]).parent.name == kCalibrationDir for r in t.records)


def stale_predictions(fitted: Store, profile: dict[str, Any], experiments: list[str]) -> Optional[str]:
    """Predictions made before the profile was written predict another profile's NIC."""
    written = str((profile.get("provenance") or {}).get("date") or "")
    made = [str(r["provenance"].get("started", "")) for e in experiments for r in fitted.points(kModel, e)]
    older = sum(1 for m in made if written and m[:19] < written[:19])  # both ISO 8601, UTC
    if older:
        return (f"{older} of {len(made)} fitted predictions were made before the profile was fitted ({written}): "
                f"they predict an earlier profile; make them again (remove {fitted.root} and run the suite, "
                f"which resumes: only the predictions run)")
    return None


def run_hosts(store: Store, backend: str) -> tuple[set[tuple[str, str]], set[Any]]:
    """(host, kernel) pairs and core counts of the coordinators of the points stored for
    `backend` (imported points say nothing of where they ran), in one read of the store."""
    coordinators = [r["provenance"].get("coordinator") or {} for r in store.points(backend)
                    if "imported_from" not in r["provenance"]]
    return ({(c.get("host", "?"), c.get("kernel", "?")) for c in coordinators},
            {c["cores"] for c in coordinators if c.get("cores") is not None})


def host_warnings(profile: dict[str, Any], hosts: set[tuple[str, str]], cores: set[Any]) -> list[str]:
    """Where the run's host is not the one the profile was fitted on: a prediction of another machine."""
    prov = profile.get("provenance") or {}
    if not prov:
        return ["the fitted profile records no provenance: where it was fitted is unknown"]
    warnings = []
    for host, kernel in sorted(hosts):
        if host != prov.get("host") or kernel != prov.get("kernel"):
            warnings.append(f"the run's host {host} (kernel {kernel}) is not the host the profile was fitted on, "
                            f"{prov.get('host')} (kernel {prov.get('kernel')}): fit on the host you predict")
    fitted_cores = prov.get("cores")
    for c in sorted(cores, key=str):
        if fitted_cores is not None and c != fitted_cores:
            warnings.append(f"the run's host has {c} cores, the profile was fitted on {fitted_cores}")
    return warnings


def _profile(backend: str) -> dict[str, Any]:
    """The profile the fitted pass predicts with (harness/model_pass.py: the one named after the backend)."""
    path = fitted_profile(backend)
    return (yaml.safe_load(path.read_text()) or {}) if path else {}


def score(root: pathlib.Path, backend: str, against: Optional[pathlib.Path] = None) -> dict[str, Any]:
    """The `rdmalab-score/1` document of one results directory."""
    store = Store(root)
    fitted = Store(fitted_root(root, backend))
    other = Store(against) if against else None
    experiments, pooled, floor_pooled, rhos, floor_rhos = [], [], [], [], []
    for b, exp_id in store.experiments():
        if b != backend:
            continue
        measured = _table(store, backend, exp_id)
        predicted = _table(fitted, kModel, exp_id)
        if measured is None or predicted is None or _calibration_suite(measured):
            continue
        found = pairs(measured, predicted)
        if not found:
            continue
        entry = {"experiment": exp_id, **summary(found), "spread": {"repeats_cv": _repeat_spread(measured)},
                 "points_detail": [{"key": [str(k) for k in p.key], "measured": p.measured, "predicted": p.predicted,
                                    "error": p.error} for p in found]}
        second = _table(other, backend, exp_id) if other else None
        if second is not None:
            floor = pairs(measured, second)
            entry["spread"]["against"] = summary(floor)
            floor_pooled += floor
            if entry["spread"]["against"]["rank_agreement"] is not None:
                floor_rhos.append(entry["spread"]["against"]["rank_agreement"])
        experiments.append(entry)
        pooled += found
        if entry["rank_agreement"] is not None:
            rhos.append(entry["rank_agreement"])
    overall = {**summary(pooled), "rank_agreement": statistics.median(rhos) if rhos else None,
               "experiments": len(experiments)}
    doc: dict[str, Any] = {"schema_version": kSchema, "backend": backend, "results": str(root),
                           "fitted": str(fitted_root(root, backend)), "overall": overall, "experiments": experiments}
    if other is not None:
        doc["against"] = {"results": str(against), **summary(floor_pooled),
                          "rank_agreement": statistics.median(floor_rhos) if floor_rhos else None}
    prof = _profile(backend)
    doc["profile"] = {"name": prof.get("name"), "provenance": prof.get("provenance") or {}}
    doc["warnings"] = host_warnings(prof, *run_hosts(store, backend)) if prof else [
        f"no fitted profile found for {backend}'s predictions"]
    if prof and (stale := stale_predictions(fitted, prof, [e["experiment"] for e in experiments])):
        doc["warnings"].append(stale)
    return doc


def write(doc: dict[str, Any], out: pathlib.Path) -> pathlib.Path:
    out.mkdir(parents=True, exist_ok=True)
    path = out / kFileName
    path.write_text(json.dumps(doc, indent=1) + "\n")
    return path


def _pct(v: Optional[float]) -> str:
    return "" if v is None else f"{100 * v:.0f}%"


def _rho(v: Optional[float]) -> str:
    return "" if v is None else f"{v:.2f}"


def rows(doc: dict[str, Any]) -> list[list[str]]:
    """The table people read: per experiment, then overall, each beside the measurement's own floor."""
    out = []
    for e in doc["experiments"]:
        floor = e["spread"].get("against") or {}
        out.append([e["experiment"], str(e["points"]), _pct(e["median_abs_error"]), _pct(e["within_30pct"]),
                    _rho(e["rank_agreement"]), _pct(e["spread"]["repeats_cv"]), _pct(floor.get("median_abs_error")),
                    _pct(floor.get("within_30pct")), _rho(floor.get("rank_agreement"))])
    o, a = doc["overall"], doc.get("against") or {}
    out.append(["overall", str(o["points"]), _pct(o["median_abs_error"]), _pct(o["within_30pct"]),
                _rho(o["rank_agreement"]), "", _pct(a.get("median_abs_error")), _pct(a.get("within_30pct")),
                _rho(a.get("rank_agreement"))])
    return out


kColumns = ["experiment", "points", "median |error|", "within +-30%", "rank rho", "repeats' CV",
            "2nd run |diff|", "2nd run within 30%", "2nd run rho"]
