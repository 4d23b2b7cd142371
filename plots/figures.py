"""Figures from stored results only: one per (backend, experiment), per the plot spec that the
stored points carry (series, facets, log axes, error bars over repeats, paper references)."""
from __future__ import annotations

import collections
import math
import pathlib
import statistics
import textwrap
from typing import Any, Optional

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from harness.metrics import point_value  # noqa: E402

kDpi = 110
kPanelInches = (5.2, 3.6)
kMinWidthInches = 7.0
kTitleCharsPerInch = 13       # at 10 pt


def _key(v: Any) -> tuple:
    """Sort numbers numerically and before strings."""
    return (0, v, "") if isinstance(v, (int, float)) and not isinstance(v, bool) else (1, 0, str(v))


class Table:
    """The figure's data: one row per (facet, series, x) with mean, stdev, n and the paper value."""

    def __init__(self, records: list[dict[str, Any]]):
        newest = max(records, key=lambda r: r["provenance"].get("started", ""))
        self.experiment = newest["experiment"]
        self.plot: dict[str, Any] = newest["experiment"].get("plot") or {}
        self.reference: list[dict[str, Any]] = newest["experiment"].get("reference") or []
        self.records = records
        p = self.plot
        groups: dict[tuple, list[float]] = collections.defaultdict(list)
        self.failed: dict[tuple, int] = collections.Counter()
        for rec in records:
            params = {**rec["point"]["params"], "repeat": rec["point"]["repeat"]}
            k = (params.get(p.get("facet")) if p.get("facet") else None, series_value(p, params), params.get(p.get("x")))
            v = point_value(rec, p.get("y", ""), p.get("role"), p.get("aggregate")) if p else None
            if v is None:
                self.failed[k] += 1
                groups.setdefault(k, [])
            else:
                groups[k].append(v)
        self.rows = []
        for k in sorted(groups, key=lambda k: tuple(_key(x) for x in k)):
            vals = groups[k]
            ref = self.reference_value(*k)
            self.rows.append({"facet": k[0], "series": k[1], "x": k[2], "n": len(vals), "failed": self.failed[k],
                              "mean": statistics.fmean(vals) if vals else None,
                              "stdev": statistics.stdev(vals) if len(vals) > 1 else (0.0 if vals else None),
                              "paper": ref})

    def reference_value(self, facet: Any, series: Any, x: Any) -> Optional[float]:
        for r in self.reference:
            if r.get("x") == x and r.get("series", series) == series and r.get("facet", facet) == facet:
                return r["y"]
        return None

    def facets(self) -> list[Any]:
        return sorted({r["facet"] for r in self.rows}, key=_key)

    def series(self) -> list[Any]:
        return sorted({r["series"] for r in self.rows}, key=_key)


def series_name(p: dict[str, Any]) -> str:
    s = p.get("series")
    return "/".join(s) if isinstance(s, list) else (s or "")


def series_value(p: dict[str, Any], params: dict[str, Any]) -> Any:
    s = p.get("series")
    if not s:
        return None
    if isinstance(s, list):
        return "/".join(str(params.get(n)) for n in s)
    return params.get(s)


def _label(p: dict[str, Any], axis: str) -> str:
    return p.get(f"{axis}label") or p.get(axis, "")


def draw(table: Table, out_dir: pathlib.Path, stem: str) -> Optional[dict[str, pathlib.Path]]:
    p = table.plot
    if not p or all(r["mean"] is None for r in table.rows):
        return None  # nothing measured: the report lists the failures instead
    kind = p.get("kind", "line")
    facets = table.facets()
    ncols = min(len(facets), 3)
    nrows = math.ceil(len(facets) / ncols)
    width = max(kMinWidthInches, kPanelInches[0] * ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(width, kPanelInches[1] * nrows + 0.4), squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    series = table.series()
    for i, facet in enumerate(facets):
        ax = axes[i // ncols][i % ncols]
        if kind == "table":
            _draw_table(ax, [r for r in table.rows if r["facet"] == facet], p)
        for j, s in enumerate(series if kind != "table" else []):
            rows = [r for r in table.rows if r["facet"] == facet and r["series"] == s]
            color = colors[j % len(colors)]
            name = f"{series_name(p)}={s}" if p.get("series") else "measured"
            measured = [r for r in rows if r["mean"] is not None]
            if kind == "bar":
                # Every x category keeps its slot, so a series with a failed point does not shift.
                cats = sorted({r["x"] for r in table.rows if r["facet"] == facet}, key=_key)
                bar_w = 0.8 / max(len(series), 1)
                ax.bar([cats.index(r["x"]) + j * bar_w for r in measured], [r["mean"] for r in measured], bar_w,
                       yerr=[r["stdev"] for r in measured] if p.get("error_bars", True) else None,
                       color=color, label=name, capsize=2)
                ax.set_xticks([k + bar_w * (len(series) - 1) / 2 for k in range(len(cats))], [str(c) for c in cats])
                refs = [(cats.index(r["x"]) + j * bar_w, r["y"]) for r in table.reference
                        if r["x"] in cats and r.get("series", s) == s and r.get("facet", facet) == facet]
            else:
                ax.errorbar([r["x"] for r in measured], [r["mean"] for r in measured],
                            yerr=[r["stdev"] for r in measured] if p.get("error_bars", True) else None,
                            marker="o", markersize=4, capsize=3, color=color, label=name)
                refs = [(r["x"], r["y"]) for r in table.reference  # drawn even where no point was measured
                        if r.get("series", s) == s and r.get("facet", facet) == facet]
            if refs:
                ax.scatter([x for x, _ in refs], [y for _, y in refs], marker="*", s=90, facecolors="none",
                           edgecolors=color, linewidths=1.2, label=f"paper: {name}" if p.get("series") else "paper", zorder=5)
        if kind != "table":
            if p.get("xlog"):
                ax.set_xscale("log", base=2)
            if p.get("ylog"):
                ax.set_yscale("log")
            ax.set_xlabel(_label(p, "x"))
            ax.set_ylabel(_label(p, "y"))
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=7)
        if p.get("facet"):
            ax.set_title(f"{p['facet']}={facet}", fontsize=9)
    for k in range(len(facets), nrows * ncols):
        axes[k // ncols][k % ncols].set_visible(False)
    fig.suptitle(textwrap.fill(table.experiment.get("title", stem), int(width * kTitleCharsPerInch)), fontsize=10)
    fig.tight_layout()
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"png": out_dir / f"{stem}.png", "svg": out_dir / f"{stem}.svg"}
    fig.savefig(paths["png"], dpi=kDpi)
    fig.savefig(paths["svg"])
    plt.close(fig)
    return paths


def _draw_table(ax: Any, rows: list[dict[str, Any]], p: dict[str, Any]) -> None:
    ax.axis("off")
    lead = [series_name(p)] if p.get("series") else []
    cells = [([str(r["series"])] if lead else []) + [str(r["x"]), "failed" if r["mean"] is None else f"{r['mean']:.4g}",
                                                     "" if r["paper"] is None else f"{r['paper']:.4g}"] for r in rows]
    if cells:
        ax.table(cellText=cells, colLabels=lead + [p.get("x", ""), p.get("y", ""), "paper"], loc="center").scale(1, 1.3)
