"""Measuring designs on the backend through the normal runner: each batch of designs is written
as an experiment file (its sweep a zip of the designs) and run by the coordinator with resume,
so a stored point is never measured twice, every point is stored with its provenance, and every
point has the experiment's deadline. The same writer makes the anomalies' minimal files."""
from __future__ import annotations

import json
import pathlib
import statistics
import time
from typing import Any, Optional

import yaml
from rich.console import Console

from ..coordinator import Coordinator, Options, Planned, load_all
from ..inventory import Inventory
from ..metrics import point_value
from ..runner import RunConfig
from ..store import Store, kFinalStatuses
from ..suites import Target
from ..sweep import Reduction, expand
from ..yamlloc import plain
from .scoring import design_point
from .space import Space

kChunkPoints = 4            # with a deadline: points run between two looks at the clock
# A process's PCIe bytes per operation, as its document's modeled rows count them: device to
# host, and host to device as MMIO (doorbells, inline WQEs) and DMA-read completions.
kPcieBytesPerOp = ("pcie_d2h_bytes", "pcie_mmio_bytes", "pcie_dma_cpl_bytes")


def experiment_document(space: Space, exp_id: str, title: str, description: str,
                        rows: list[dict[str, Any]], fixed: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    """An experiment of the space's fixed part, `fixed` dimension values as parameters, and the
    rows (values of the other dimensions) as a zip sweep."""
    node = space.node
    doc: dict[str, Any] = {"id": exp_id, "title": title, "description": description}
    for key in ("binary", "mode", "roles", "labels", "model_params", "paper_testbed", "timeout_s", "link", "backends", "repeats"):
        if key in node:
            doc[key] = plain(node[key])
    if space.exp.binary and "binary" in node:
        doc["binary"] = space.exp.binary   # resolved: the file lives elsewhere than the space
    params = {**space.exp.params, **(fixed or {})}
    if params:
        doc["params"] = params
    varying = [d for d in space.dims if d not in (fixed or {})]
    if rows and varying:
        doc["sweep"] = {"zip": {d: [r[d] for r in rows] for d in varying}}
    metric = space.objective.metric
    doc["plot"] = {"x": varying[0] if varying and rows else next(iter(space.dims)), "y": metric, "kind": "bar"}
    for key in ("role", "aggregate"):
        if getattr(space.objective, key):
            doc["plot"][key] = getattr(space.objective, key)
    return doc


def write_experiment(path: pathlib.Path, doc: dict[str, Any]) -> pathlib.Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("# written by ./run_all.py explore; runnable as ./run_all.py " + path.name + "\n"
                    + yaml.safe_dump(doc, sort_keys=False, width=110))
    return path


def measured_mean(space: Space, recs: list[dict[str, Any]]) -> Optional[float]:
    """The objective's metric of a design (not divided by a cost): the mean over its repeats."""
    values = [v for rec in recs if (v := measured_value(space, rec)) is not None]
    return statistics.fmean(values) if values else None


def measured_value(space: Space, rec: dict[str, Any]) -> Optional[float]:
    """The objective's metric of one stored point (not divided by a cost)."""
    metric, role = space.objective.metric, space.objective.role
    if metric != "pcie_bytes_per_op":
        return point_value(rec, metric, role, space.objective.aggregate)
    if rec.get("status") != "ok":
        return None
    per_row = []
    for r in rec.get("roles") or []:
        if role and r["role"] != role:
            continue
        pcie = (r.get("document") or {}).get("pcie") or {}
        if r["role"] == "model":          # the model backend: its prediction's bytes per operation
            row = ((r.get("document") or {}).get("results") or [{}])[0].get("pcie") or {}
            if row.get("h2d_bytes_per_op") is not None and row.get("d2h_bytes_per_op") is not None:
                per_row.append(row["h2d_bytes_per_op"] + row["d2h_bytes_per_op"])
            continue
        # A process's PCIe accounting (model/wr_accounting.h, what softnic counts): both directions.
        for row in (pcie.get("modeled") or {}).get("rows") or []:
            per_op = row.get("per_op") or {}
            if all(k in per_op for k in kPcieBytesPerOp):
                per_row.append(sum(per_op[k] for k in kPcieBytesPerOp))
    return statistics.fmean(per_row) if per_row else None


class _Coordinator(Coordinator):
    """The coordinator with its progress, but without a summary table after every batch (an
    explore runs many small ones); the store's index and CSV are written as always."""

    def finish(self, plans: list[Planned]) -> None:
        for pl in plans:
            self.store.export_csv(self.opts.backend, pl.exp.id)
        self.store.write_index()


class Measurer:
    """Measures designs on the backend; knows the budget of points and the deadline."""

    def __init__(self, space: Space, cfg: RunConfig, inventory: Inventory, store: Store, console: Console,
                 work_dir: pathlib.Path, budget_points: int, deadline: Optional[float]):
        self.space, self.cfg, self.inventory, self.store, self.console = space, cfg, inventory, store, console
        self.path = work_dir / "measure" / f"{space.id}.yaml"
        self.budget_points = budget_points
        self.deadline = deadline
        self.rows: list[dict[str, Any]] = []     # every design asked for so far (the file's zip)
        self.ran = 0                             # points this explore ran (resumed ones are free)
        self.interrupted = False

    def point_ids(self, design: dict[str, Any]) -> list[str]:
        """The ids of a design's points, one per repeat."""
        return [design_point(self.space.exp, self.space.params(design), r).id for r in range(self.space.exp.repeats)]

    def stored(self, design: dict[str, Any]) -> list[dict[str, Any]]:
        """The stored points of a design (its repeats that have one)."""
        paths = [self.store.point_path(self.cfg.backend, self.space.id, pid) for pid in self.point_ids(design)]
        return [json.loads(p.read_text()) for p in paths if p.exists()]

    def stored_final(self, design: dict[str, Any]) -> bool:
        recs = self.stored(design)
        return len(recs) == self.space.exp.repeats and all(r.get("status") in kFinalStatuses for r in recs)

    def left(self) -> int:
        return max(0, self.budget_points - self.ran)

    def out_of_time(self) -> bool:
        return self.deadline is not None and time.monotonic() >= self.deadline

    def measure(self, designs: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
        """Runs the designs' points not stored yet (as many as the budget and the deadline
        allow); returns the stored points of every design that has some, keyed by repr of the design."""
        for d in designs:
            if d not in self.rows:
                self.rows.append(d)
        todo_designs = [d for d in designs if not self.stored_final(d)]
        if todo_designs and not self.interrupted:
            exp, points = self._bound()
            wanted = [pid for d in todo_designs for pid in self.point_ids(d)
                      if self.store.status(self.cfg.backend, exp.id, pid) not in kFinalStatuses]
            self._run(exp, list(points.values()), [points[pid] for pid in wanted if pid in points])
        return self.records(designs)

    def again(self, design: dict[str, Any]) -> Optional[dict[str, Any]]:
        """One more measurement of a measured design: its point one repeat past the space's
        repeats (its own id, stored beside the others, so a resumed explore finds it). None: no
        budget or time left, or interrupted."""
        exp, points = self._bound()
        point = design_point(exp, self.space.params(design), self.space.exp.repeats)
        path = self.store.point_path(self.cfg.backend, exp.id, point.id)
        if self.store.status(self.cfg.backend, exp.id, point.id) not in kFinalStatuses and not self.interrupted:
            self._run(exp, [*points.values(), point], [point])
        return json.loads(path.read_text()) if path.exists() else None

    def _bound(self) -> tuple[Any, dict[str, Any]]:
        """The measure file with every design asked for so far, validated for the backend, and its points."""
        doc = experiment_document(self.space, self.space.id, f"{self.space.exp.title}: designs measured by explore",
                                  f"The designs `./run_all.py explore {self.space.path.name}` measured "
                                  f"(written by it; the point ids are those of the space).", self.rows)
        write_experiment(self.path, doc)
        loaded = load_all([Target(self.path, Reduction())], self.cfg.backend, self.cfg.bin_dir, self.cfg.model_bin)
        exp = loaded.experiments[0][0]
        return exp, {p.id: p for p in expand(exp, Reduction(), self.cfg.backend)}

    def _run(self, exp: Any, points: list[Any], todo: list[Any]) -> None:
        """Runs `todo` through the coordinator, as much as the budget and the deadline allow."""
        stored = {p.id: st for p in points if (st := self.store.status(self.cfg.backend, exp.id, p.id))}
        while todo and self.left() > 0 and not self.out_of_time():
            chunk_size = kChunkPoints if self.deadline is not None else len(todo)
            chunk, todo = todo[:min(chunk_size, self.left())], todo[min(chunk_size, self.left()):]
            coord = _Coordinator(self.cfg, self.inventory, self.store, Options(self.cfg.backend, resume=True),
                                 self.console)
            rc = coord.run([Planned(exp, points, chunk, stored)])
            self.ran += len(chunk)
            if coord.interrupted or rc == 130:
                self.interrupted = True
                break

    def records(self, designs: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
        """The stored points of every design that has some, keyed by repr of the design."""
        return {repr(d): recs for d in designs if (recs := self.stored(d))}
