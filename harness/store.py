"""The result store: one JSON document per point, an index, CSV export.

Layout under the output directory (default results/):
  <backend>/<experiment>/points/<point-id>.json    one point: status, role documents, provenance
  <backend>/<experiment>/logs/<point-id>/           full stdout/stderr of every role
  <backend>/<experiment>/results.csv                one row per (point, role process, results row)
  <backend>/<experiment>/superseded/<time>/         points replaced by --force or re-run after failing
  index.json                                        every stored point, rebuilt from the files
  fitted/<backend>/model/<experiment>/...           the model's predictions with the profile fitted to
                                                    <backend> (a store of its own: harness/model_pass.py)

Writes are atomic (temporary file + rename) and a stored point is never replaced in place:
a re-run moves the old file to superseded/ first, so nothing is lost silently.
"""
from __future__ import annotations

import csv
import datetime
import json
import os
import pathlib
import shutil
from typing import Any, Iterator, Optional

# Version 2 added the status "unsupported" and its reason; a version 1 document is a valid
# version 2 document, so both are read.
kResultSchema = "rdmalab-result/2"
kReadableResultSchemas = ("rdmalab-result/1", kResultSchema)
kIndexSchema = "rdmalab-index/2"
kCsvParamsPrefix = "param."
# A point's status: ok, failed, not_modeled (the model backend answered that the point is
# outside its scope) or unsupported (a role exited saying this host or provider cannot run it,
# e.g. far NUMA memory on a one-node host). The last two did not run and have no value; their
# reason is in the point under the same key. ok, not_modeled and unsupported are final.
kNotModeled = "not_modeled"
kUnsupported = "unsupported"
kNotRun = {kNotModeled: "not modeled", kUnsupported: "unsupported"}   # status -> how people read it
kFinalStatuses = ("ok", kNotModeled, kUnsupported)


def not_run(rec: dict[str, Any]) -> Optional[tuple[str, str]]:
    """(what, reason) for a point that did not run (not modeled, unsupported), else None."""
    status = rec.get("status")
    if status not in kNotRun:
        return None
    return kNotRun[status], rec.get(status) or kNotRun[status]


kFittedDir = "fitted"


def fitted_root(root: str | pathlib.Path, backend: str) -> pathlib.Path:
    """The store of the model's predictions with the profile fitted to `backend`."""
    return pathlib.Path(root) / kFittedDir / backend


class StoreError(RuntimeError):
    pass


def utc_now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds")


def atomic_write(path: pathlib.Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp.{os.getpid()}")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class Store:
    def __init__(self, root: str | pathlib.Path):
        self.root = pathlib.Path(root).resolve()

    def experiment_dir(self, backend: str, experiment: str) -> pathlib.Path:
        return self.root / backend / experiment

    def point_path(self, backend: str, experiment: str, point_id: str) -> pathlib.Path:
        return self.experiment_dir(backend, experiment) / "points" / f"{point_id}.json"

    def log_dir(self, backend: str, experiment: str, point_id: str) -> pathlib.Path:
        d = self.experiment_dir(backend, experiment) / "logs" / point_id
        d.mkdir(parents=True, exist_ok=True)
        return d

    def has_points(self, backend: str, experiment: str) -> bool:
        """Whether any point of the experiment is stored (one directory look, not one per point)."""
        d = self.experiment_dir(backend, experiment) / "points"
        return d.is_dir() and any(d.iterdir())

    def status(self, backend: str, experiment: str, point_id: str) -> Optional[str]:
        path = self.point_path(backend, experiment, point_id)
        if not path.exists():
            return None
        try:
            return json.loads(path.read_text()).get("status", "unknown")
        except (OSError, json.JSONDecodeError):
            return "unreadable"

    def supersede(self, backend: str, experiment: str, point_id: str, stamp: str) -> Optional[pathlib.Path]:
        """Moves a stored point (and its logs) aside; returns where it went."""
        path = self.point_path(backend, experiment, point_id)
        if not path.exists():
            return None
        dest = self.experiment_dir(backend, experiment) / "superseded" / stamp
        dest.mkdir(parents=True, exist_ok=True)
        shutil.move(str(path), dest / path.name)
        logs = self.experiment_dir(backend, experiment) / "logs" / point_id
        if logs.exists():
            shutil.move(str(logs), dest / f"{point_id}.logs")
        return dest / path.name

    def write_point(self, record: dict[str, Any]) -> pathlib.Path:
        path = self.point_path(record["backend"], record["experiment"]["id"], record["point"]["id"])
        if path.exists():
            raise StoreError(f"{path} exists; the harness supersedes a stored point before re-running it, "
                             "so this is a concurrent run writing the same results directory")
        atomic_write(path, json.dumps(record, indent=1, sort_keys=False) + "\n")
        return path

    def points(self, backend: Optional[str] = None, experiment: Optional[str] = None) -> Iterator[dict[str, Any]]:
        pattern = f"{backend or '*'}/{experiment or '*'}/points/*.json"
        for path in sorted(self.root.glob(pattern)):
            try:
                rec = json.loads(path.read_text())
            except (OSError, json.JSONDecodeError) as exc:
                raise StoreError(f"{path}: not a readable result ({exc})") from None
            if rec.get("schema_version") not in kReadableResultSchemas:
                raise StoreError(f"{path}: schema_version {rec.get('schema_version')!r} is not one of "
                                 f"{', '.join(kReadableResultSchemas)}; re-run the point or convert the file")
            rec["_path"] = str(path)
            yield rec

    def experiments(self) -> list[tuple[str, str]]:
        return sorted({(p.parts[-4], p.parts[-3]) for p in self.root.glob("*/*/points/*.json")})

    def write_index(self) -> pathlib.Path:
        entries = []
        for rec in self.points():
            entries.append({"backend": rec["backend"], "experiment": rec["experiment"]["id"],
                            "point": rec["point"]["id"], "params": rec["point"]["params"],
                            "repeat": rec["point"]["repeat"], "status": rec["status"],
                            "not_modeled": rec.get(kNotModeled), "unsupported": rec.get(kUnsupported),
                            "headline": rec.get("headline"), "file": os.path.relpath(rec["_path"], self.root)})
        path = self.root / "index.json"
        atomic_write(path, json.dumps({"schema_version": kIndexSchema, "written": utc_now(), "points": entries},
                                      indent=1) + "\n")
        return path

    def export_csv(self, backend: str, experiment: str) -> Optional[pathlib.Path]:
        recs = list(self.points(backend, experiment))
        if not recs:
            return None
        param_names: list[str] = []
        metric_names: list[str] = []
        rows = []
        for rec in recs:
            for k in rec["point"]["params"]:
                if k not in param_names:
                    param_names.append(k)
            base = {"point": rec["point"]["id"], "repeat": rec["point"]["repeat"], "status": rec["status"],
                    "not_modeled": rec.get(kNotModeled, ""), "unsupported": rec.get(kUnsupported, "")}
            base.update({kCsvParamsPrefix + k: v for k, v in rec["point"]["params"].items()})
            docs = [(r["role"], r["index"], r.get("document")) for r in rec.get("roles", [])]
            if rec.get("model_document") is not None:
                docs = [("model", 0, rec["model_document"])]
            wrote = False
            for role, index, doc in docs:
                for row in (doc or {}).get("results", []) or []:
                    flat = {k: v for k, v in row.items() if isinstance(v, (int, float, str, bool)) or v is None}
                    for k in flat:
                        if k not in metric_names:
                            metric_names.append(k)
                    rows.append({**base, "role": role, "index": index, **flat})
                    wrote = True
            if not wrote:
                rows.append({**base, "role": "", "index": ""})
        path = self.experiment_dir(backend, experiment) / "results.csv"
        fields = ["point", "repeat", "status", kNotModeled, kUnsupported, *[kCsvParamsPrefix + k for k in param_names],
                  "role", "index", *metric_names]
        tmp = path.with_name(".results.csv.tmp")
        with open(tmp, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
            w.writeheader()
            w.writerows(rows)
        os.replace(tmp, path)
        return path
