"""Scoring designs with rdmalab-model, many per process.

A prediction takes microseconds; starting a process takes milliseconds. So designs are scored
in lines: the designs that differ in one dimension only go to one `rdmalab-model sweep
--sweep NAME=V1,V2,...` (one process, one row per value, in order), and lines run a few
processes at a time. A line the sweep command refuses (a value outside the model's scope
answers "not modeled", which fails the whole sweep) is scored point by point with `predict
--json`, contract 3, which answers not_modeled per point. Scores are kept in a JSON cache
keyed by the model request, so a resumed explore scores nothing twice.
"""
from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import os
import pathlib
import subprocess
import threading
from typing import Any, Callable, Optional

from ..experiment import Experiment
from ..runner import PointRunner, RunConfig
from ..store import atomic_write
from ..sweep import Point, point_id

kScoresSchema = "rdmalab-explore-scores/1"
kModelTimeoutS = 60
kParallel = max(2, min(8, 2 * (os.cpu_count() or 1)))


@dataclasses.dataclass
class Score:
    """The model's answer for one design: the metrics the objective can use and why."""
    mops: Optional[float] = None
    gbps: Optional[float] = None
    lat_us: Optional[float] = None          # the analytic latency, standing in for every latency metric
    pcie_bytes_per_op: Optional[float] = None
    bottleneck: Optional[str] = None
    bottleneck_label: Optional[str] = None
    not_modeled: Optional[str] = None
    error: Optional[str] = None

    def metric(self, name: str) -> Optional[float]:
        if name.startswith("lat_us"):
            return self.lat_us
        return getattr(self, name)


def score_from_row(row: dict[str, Any]) -> Score:
    pcie = row.get("pcie") or {}
    h2d, d2h = pcie.get("h2d_bytes_per_op"), pcie.get("d2h_bytes_per_op")
    return Score(mops=row.get("mops"), gbps=row.get("gbps"), lat_us=row.get("lat_us_mean"),
                 pcie_bytes_per_op=(h2d + d2h) if h2d is not None and d2h is not None else None,
                 bottleneck=row.get("bottleneck"), bottleneck_label=row.get("bottleneck_label"))


def design_point(exp: Experiment, params: dict[str, Any], repeat: int = 0) -> Point:
    """The harness's point for a design's parameters (the runner's and the store's id)."""
    roles = {r.name: (int(params[r.count]) if isinstance(r.count, str) else r.count) for r in exp.roles}
    return Point(exp.id, 0, params, repeat, roles, point_id(exp.id, params, repeat, roles))


def _flag_args(name: str, value: Any) -> list[str]:
    # rdmalab-model turns '-' into '_' in all of '--name=value', so a value with '-' (herd-rpc)
    # goes as its own argument; a boolean needs '=' (a bare boolean flag is a switch).
    if isinstance(value, bool):
        return [f"--{name}={'true' if value else 'false'}"]
    return [f"--{name}", str(value)]


class Scorer:
    def __init__(self, exp: Experiment, cfg: RunConfig, cache_path: Optional[pathlib.Path] = None):
        self.exp = exp                      # bound to rdmalab-model's description
        self.runner = PointRunner(cfg, None, None)  # type: ignore[arg-type]  (model requests only)
        self.model = str(cfg.model_bin or cfg.bin_dir / "rdmalab-model")
        self.cache_path = cache_path
        self.cache: dict[str, Score] = {}
        self.lock = threading.Lock()
        self.processes = 0
        if cache_path is not None and cache_path.is_file():
            doc = json.loads(cache_path.read_text())
            if doc.get("schema_version") == kScoresSchema:
                self.cache = {k: Score(**v) for k, v in doc["scores"].items()}

    def save(self) -> None:
        if self.cache_path is not None:
            atomic_write(self.cache_path, json.dumps({"schema_version": kScoresSchema, "scores": {
                k: dataclasses.asdict(v) for k, v in self.cache.items()}}) + "\n")

    def request(self, params: dict[str, Any]) -> dict[str, Any]:
        return self.runner.model_request(self.exp, design_point(self.exp, params))

    @staticmethod
    def key(request: dict[str, Any]) -> str:
        return json.dumps({k: request[k] for k in ("profile", "mode", "roles", "params")}, sort_keys=True)

    def cached(self, params: dict[str, Any]) -> Optional[Score]:
        return self.cache.get(self.key(self.request(params)))

    def score(self, designs: list[dict[str, Any]], line_dim: Callable[[list[dict[str, Any]]], Optional[str]],
              progress: Optional[Callable[[int], None]] = None) -> list[Score]:
        """Scores of the designs (full parameter sets), in order; lines along the dimension that
        line_dim picks for the group."""
        requests = [self.request(d) for d in designs]
        keys = [self.key(r) for r in requests]
        todo: dict[str, dict[str, Any]] = {}
        for k, r in zip(keys, requests):
            if k not in self.cache:
                todo.setdefault(k, r)
        lines = self._lines(list(todo.values()), line_dim(designs))
        if lines:
            pool = concurrent.futures.ThreadPoolExecutor(kParallel)
            try:
                for done in pool.map(self._score_line, lines):
                    if progress:
                        progress(done)
            finally:
                # Interrupted: the lines not started are dropped, those running finish into the cache.
                pool.shutdown(wait=True, cancel_futures=True)
        return [self.cache[k] for k in keys]

    @staticmethod
    def _lines(requests: list[dict[str, Any]], dim: Optional[str]) -> list[tuple[Optional[str], list[dict[str, Any]]]]:
        groups: dict[str, list[dict[str, Any]]] = {}
        for r in requests:
            if dim is None or dim not in r["params"] or "," in str(r["params"][dim]):
                groups[json.dumps(r, sort_keys=True)] = [r]
                continue
            rest = {**r, "params": {k: v for k, v in r["params"].items() if k != dim}}
            groups.setdefault(json.dumps(rest, sort_keys=True), []).append(r)
        return [(dim if len(g) > 1 else None, g) for g in groups.values()]

    def _run(self, argv: list[str], stdin: Optional[str] = None) -> subprocess.CompletedProcess:
        with self.lock:
            self.processes += 1
        return subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=kModelTimeoutS,
                              stdin=None if stdin is not None else subprocess.DEVNULL)

    def _score_line(self, line: tuple[Optional[str], list[dict[str, Any]]]) -> int:
        dim, requests = line
        scores: Optional[list[Score]] = None
        if dim is not None:
            base = requests[0]
            argv = [self.model, "sweep", "--profile", str(base["profile"]), "--mode", base["mode"]]
            if base["roles"]:
                argv += ["--roles", ",".join(f"{k}={v}" for k, v in base["roles"].items())]
            for k, v in base["params"].items():
                if k != dim:
                    argv += _flag_args(k, v)
            values = ",".join("true" if v is True else "false" if v is False else str(v)
                              for v in (r["params"][dim] for r in requests))
            argv += ["--sweep", f"{dim}={values}", "--json"]
            try:
                r = self._run(argv)
                if r.returncode == 0:
                    rows = json.loads(r.stdout).get("results") or []
                    if len(rows) == len(requests):
                        scores = [score_from_row(row) for row in rows]
            except (subprocess.TimeoutExpired, json.JSONDecodeError):
                scores = None
        if scores is None:
            scores = [self._score_one(r) for r in requests]
        with self.lock:
            for r, s in zip(requests, scores):
                self.cache[self.key(r)] = s
        return len(requests)

    def _score_one(self, request: dict[str, Any]) -> Score:
        try:
            r = self._run([self.model, "predict", "--json"], json.dumps(request))
        except subprocess.TimeoutExpired:
            return Score(error=f"rdmalab-model gave no answer within {kModelTimeoutS} s")
        if r.returncode != 0:
            lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
            return Score(error=lines[-1] if lines else f"rdmalab-model exited {r.returncode}")
        doc = json.loads(r.stdout)
        if isinstance(doc.get("not_modeled"), str):
            return Score(not_modeled=doc["not_modeled"])
        rows = doc.get("results") or []
        return score_from_row(rows[0]) if rows else Score(error="rdmalab-model answered no results row")

    def explain(self, params: dict[str, Any]) -> str:
        """`rdmalab-model explain` of one design: the per-operation breakdown and what limits it."""
        req = self.request(params)
        argv = [self.model, "explain", "--profile", str(req["profile"]), "--mode", req["mode"]]
        if req["roles"]:
            argv += ["--roles", ",".join(f"{k}={v}" for k, v in req["roles"].items())]
        for k, v in req["params"].items():
            argv += _flag_args(k, v)
        try:
            r = self._run(argv)
        except subprocess.TimeoutExpired:
            return f"rdmalab-model explain gave no answer within {kModelTimeoutS} s"
        return r.stdout if r.returncode == 0 else r.stderr.strip()
