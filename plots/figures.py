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
from harness.store import kNotModeled  # noqa: E402

kDpi = 110
kPanelInches = (5.2, 3.6)
kMinWidthInches = 7.0
kTitleCharsPerInch = 13       # at 10 pt
kNoteCharsPerInch = 19        # at 7 pt
kNoteLineInches = 0.16


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
        self.what = "predicted" if all(r.get("backend") == "model" for r in records) else "measured"
        p = self.plot
        groups: dict[tuple, list[float]] = collections.defaultdict(list)
        self.failed: dict[tuple, int] = collections.Counter()
        self.not_modeled: dict[tuple, str] = {}   # (facet, series, x) -> the model's reason
        for rec in records:
            params = {**rec["point"]["params"], "repeat": rec["point"]["repeat"]}
            k = (params.get(p.get("facet")) if p.get("facet") else None, series_value(p, params), params.get(p.get("x")))
            v = point_value(rec, p.get("y", ""), p.get("role"), p.get("aggregate")) if p else None
            if rec.get("status") == kNotModeled:
                self.not_modeled[k] = rec.get("not_modeled") or "not modeled"
                groups.setdefault(k, [])
            elif v is None:
                self.failed[k] += 1
                groups.setdefault(k, [])
            else:
                groups[k].append(v)
        self.rows = []
        for k in sorted(groups, key=lambda k: tuple(_key(x) for x in k)):
            vals = groups[k]
            ref = self.reference_value(*k)
            self.rows.append({"facet": k[0], "series": k[1], "x": k[2], "n": len(vals), "failed": self.failed[k],
                              "not_modeled": self.not_modeled.get(k),
                              "mean": statistics.fmean(vals) if vals else None,
                              "stdev": statistics.stdev(vals) if len(vals) > 1 else (0.0 if vals else None),
                              "paper": ref})

    def reference_value(self, facet: Any, series: Any, x: Any) -> Optional[float]:
        for r in self.reference:
            if r.get("x") == x and r.get("series", series) == series and r.get("facet", facet) == facet:
                return r["y"]
        return None

    def not_modeled_notes(self) -> list[str]:
        """One line per reason, naming the series (or points) it removed from the figure."""
        by_reason: dict[str, list[str]] = collections.defaultdict(list)
        for (_, series, x), reason in sorted(self.not_modeled.items(), key=lambda kv: tuple(_key(v) for v in kv[0])):
            what = str(series) if series is not None else f"{self.plot.get('x')}={x}"
            if what not in by_reason[reason]:
                by_reason[reason].append(what)
        return [f"not modeled: {', '.join(whats)}: {reason}" for reason, whats in by_reason.items()]

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
    if not p or all(r["mean"] is None and r["not_modeled"] is None for r in table.rows):
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
            name = f"{series_name(p)}={s}" if p.get("series") else table.what
            measured = [r for r in rows if r["mean"] is not None]
            if not measured and all(r["not_modeled"] for r in rows):
                continue  # a series the model cannot predict: named in the note, not drawn
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
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=7)
        if p.get("facet"):
            ax.set_title(f"{p['facet']}={facet}", fontsize=9)
    for k in range(len(facets), nrows * ncols):
        axes[k // ncols][k % ncols].set_visible(False)
    fig.suptitle(textwrap.fill(table.experiment.get("title", stem), int(width * kTitleCharsPerInch)), fontsize=10)
    notes = table.not_modeled_notes()
    if notes:
        # The series the model cannot predict are named with the reason, never drawn as guesses.
        text = "\n".join(textwrap.fill(n, int(width * kNoteCharsPerInch)) for n in notes)
        lines = text.count("\n") + 1
        fig.set_figheight(fig.get_figheight() + kNoteLineInches * lines)
        fig.text(0.01, 0.01, text, fontsize=7, color="#a05000", va="bottom")
        fig.tight_layout(rect=(0, kNoteLineInches * lines / fig.get_figheight(), 1, 1))
    else:
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
    cells = [([str(r["series"])] if lead else []) + [str(r["x"]), _cell(r),
                                                     "" if r["paper"] is None else f"{r['paper']:.4g}"] for r in rows]
    if cells:
        ax.table(cellText=cells, colLabels=lead + [p.get("x", ""), p.get("y", ""), "paper"], loc="center").scale(1, 1.3)


def _cell(row: dict[str, Any]) -> str:
    if row["mean"] is not None:
        return f"{row['mean']:.4g}"
    return "not modeled" if row["not_modeled"] else "failed"
