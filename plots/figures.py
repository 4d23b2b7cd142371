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
from matplotlib import ticker  # noqa: E402

from harness.conclusions import same  # noqa: E402
from harness.metrics import point_value  # noqa: E402
from harness.store import kNotRun, not_run  # noqa: E402

from . import labels  # noqa: E402

kDpi = 110
kPanelInches = (5.2, 3.6)
kMinWidthInches = 7.0
kTitleCharsPerInch = 13       # at 10 pt
kNoteCharsPerInch = 19        # at 7 pt
kNoteLineInches = 0.16
kLegendLineScale = 1.25       # a legend row is a bit taller than a note line (its marker)
kRightInches = 0.2
# Text sizes for the fixed layout: matplotlib measures text only when it draws, and measuring every
# tick label (tight_layout) took a third of the report's time, so margins are sized from the
# characters of the labels, generously; tests/python/test_figure_text.py checks the real extents.
kCharInches = {10: 0.085, 9: 0.077, 8: 0.068, 7: 0.06}   # widest average character at that size
kLineInches = {10: 0.2, 9: 0.18, 8: 0.16, 7: 0.14}       # one line of text
kTickFont, kLabelFont, kPanelTitleFont, kLegendFont = 9, 9, 9, 7
kTickPadInches = 0.12          # tick marks and their pad
kLabelChars = 40               # a y label longer than this wraps
kTickRotationsDeg = (30, 45, 90)   # x tick labels too wide for their slot turn by the least of these that fits


def _key(v: Any) -> tuple:
    """Sort numbers numerically and before strings."""
    return (0, v, "") if isinstance(v, (int, float)) and not isinstance(v, bool) else (1, 0, str(v))


class Table:
    """The figure's data: one row per (facet, series, x) with mean, stdev, n and the paper value."""

    def __init__(self, records: list[dict[str, Any]], fitted_to: Optional[str] = None):
        """`fitted_to`: the records are the model's predictions with the profile fitted to that backend."""
        newest = max(records, key=lambda r: r["provenance"].get("started", ""))
        self.experiment = newest["experiment"]
        self.plot: dict[str, Any] = newest["experiment"].get("plot") or {}
        self.reference: list[dict[str, Any]] = newest["experiment"].get("reference") or []
        self.records = records
        self.backend = newest.get("backend", "")
        self.fitted_to = fitted_to
        self.what = "fitted" if fitted_to else "predicted" if self.backend == "model" else "measured"
        profiles = sorted({str(prof) for r in records for role in r.get("roles") or []
                           if (prof := (role.get("document") or {}).get("profile"))})
        self.profiles = profiles
        self.profile = ", ".join(profiles)
        p = self.plot
        # Series parameters that none of the points carries (a measured run's `profile`).
        self.absent = {n for n in labels.series_names(p) if not any(n in r["point"]["params"] for r in records)}
        groups: dict[tuple, list[float]] = collections.defaultdict(list)
        self.failed: dict[tuple, int] = collections.Counter()
        # (facet, series, x) -> (what, reason) of points that did not run: not modeled, unsupported
        self.not_run: dict[tuple, tuple[str, str]] = {}
        for rec in records:
            params = {**rec["point"]["params"], "repeat": rec["point"]["repeat"]}
            k = (params.get(p.get("facet")) if p.get("facet") else None, series_value(p, params), params.get(p.get("x")))
            v = point_value(rec, p.get("y", ""), p.get("role"), p.get("aggregate")) if p else None
            if (skipped := not_run(rec)) is not None:
                self.not_run[k] = skipped
                groups.setdefault(k, [])
            elif v is None:
                if rec.get("status") != "ok":  # an ok point without the plot's metric did not fail
                    self.failed[k] += 1
                groups.setdefault(k, [])
            else:
                groups[k].append(v)
        self.rows = []
        for k in sorted(groups, key=lambda k: tuple(_key(x) for x in k)):
            vals = groups[k]
            ref = self.reference_value(*k)
            self.rows.append({"facet": k[0], "series": k[1], "x": k[2], "n": len(vals), "failed": self.failed[k],
                              "not_run": self.not_run.get(k),
                              "mean": statistics.fmean(vals) if vals else None,
                              "stdev": statistics.stdev(vals) if len(vals) > 1 else (0.0 if vals else None),
                              "paper": ref})

    def reference_value(self, facet: Any, series: Any, x: Any) -> Optional[float]:
        for r in self.reference:
            if same(r.get("x"), x) and same(r.get("series", series), series) and same(r.get("facet", facet), facet):
                return r["y"]
        return None

    def lookup(self, facet: Any, series: Any, x: Any) -> tuple[Optional[float], str]:
        """The mean at one point of the figure, or None with the reason there is none. A series
        parameter none of these points carries (a `profile` label on a measured backend) is not
        part of the match: softnic's "spread" series answers for "cx3/spread"."""
        for r in self.rows:
            if same(r["facet"], facet) and self._same_series(r["series"], series) and same(r["x"], x):
                if r["mean"] is not None:
                    return r["mean"], ""
                if r["not_run"]:
                    return None, f"{r['not_run'][0]} ({r['not_run'][1]})"
                if r["failed"]:
                    return None, f"{r['failed']} failed point(s)"
                return None, (f"its points ran but report no {self.plot.get('y')}"
                              + (f" for role {self.plot['role']}" if self.plot.get("role") else ""))
        return None, f"no {self.backend} point there"

    def _same_series(self, have: Any, want: Any) -> bool:
        names = labels.series_names(self.plot)
        if len(names) < 2 or not self.absent:
            return same(have, want)
        have_parts, want_parts = str(have).split("/"), str(want).split("/")
        return len(have_parts) == len(want_parts) == len(names) and all(
            n in self.absent or same(h, w) for n, h, w in zip(names, have_parts, want_parts))

    def paper_lookup(self, facet: Any, series: Any, x: Any) -> tuple[Optional[float], str]:
        v = self.reference_value(facet, series, x)
        return v, "" if v is not None else "no published value there"

    def label(self) -> str:
        """Who produced the values, for legends and tables: the backend, or the model's profile."""
        if self.fitted_to:
            return f"model fitted to {self.fitted_to}"
        return f"model {self.profile}".strip() if self.backend == "model" else self.backend

    def legend_label(self) -> str:
        """Who produced the values, for a figure's legend: the backend, or the model for the NIC it
        predicts by its display name (left out where the series already name the profile)."""
        if self.backend != "model" or self.fitted_to:
            return self.label()
        if not self.profiles or "profile" in labels.series_names(self.plot):
            return "model"
        return f"model ({labels.profiles(self.profiles)})"

    def not_run_notes(self, readable: bool = False) -> list[str]:
        """One line per reason, naming the series (or points) it removed from the figure: as the
        experiment file spells them (series values, x=value), or readable, for the figure."""
        by_reason: dict[tuple[str, str], list[str]] = collections.defaultdict(list)
        for (_, series, x), why in sorted(self.not_run.items(), key=lambda kv: tuple(_key(v) for v in kv[0])):
            if readable:
                where = (labels.series(self.plot, series) if series is not None else "") \
                    or labels.point(self.plot.get("x"), x)
            else:
                where = str(series) if series is not None else f"{self.plot.get('x')}={x}"
            if where not in by_reason[why]:
                by_reason[why].append(where)
        on = "" if self.backend == "model" else f" on {self.legend_label() if readable else self.label()}"
        return [f"{what}{on}: {', '.join(wheres)}: {reason}" for (what, reason), wheres in by_reason.items()]

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


class Figure:
    """One experiment's values of every kind: measured (one backend's run), the model's prediction
    (for the paper's NIC profile), the model's prediction with the profile fitted to the measured
    backend where there is one, and the paper's published values, by (facet, series, x)."""

    def __init__(self, measured: Optional[Table], model: Optional[Table], fitted: Optional[Table] = None):
        primary = measured or model
        assert primary is not None
        self.measured, self.model, self.fitted = measured, model, fitted
        self.plot, self.reference, self.experiment = primary.plot, primary.reference, primary.experiment
        self.tables = [t for t in (measured, model, fitted) if t is not None]

    def facets(self) -> list[Any]:
        return sorted({r["facet"] for t in self.tables for r in t.rows}, key=_key)

    def series(self) -> list[Any]:
        return sorted({r["series"] for t in self.tables for r in t.rows}, key=_key)

    def curves(self, facet: Any) -> list[dict[str, Any]]:
        """Every drawable line of one panel: kind, series, label and (x, mean, stdev) points."""
        out = []
        for s in self.series():
            name = labels.series(self.plot, s)
            for t in self.tables:
                rows = [r for r in t.rows if same(r["facet"], facet) and same(r["series"], s) and r["mean"] is not None]
                if rows:
                    who = t.legend_label()
                    out.append({"kind": t.what, "series": s, "label": f"{who}: {name}" if name else who,
                                "points": [(r["x"], r["mean"], r["stdev"]) for r in rows]})
            refs = [(r["x"], r["y"], None) for r in self.reference  # drawn even where no point was measured
                    if same(r.get("series", s), s) and same(r.get("facet", facet), facet)]
            if refs:
                out.append({"kind": "paper", "series": s, "label": f"paper: {name}" if name else "paper",
                            "points": sorted(refs, key=lambda p: _key(p[0]))})
        return out

    def kinds_drawn(self) -> list[str]:
        return sorted({c["kind"] for f in self.facets() for c in self.curves(f)})


def normalized(curves: list[dict[str, Any]], plot: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
    """Each kind divided by its own value at one reference point, so that shapes compare across
    absolute scales (softnic vs a ConnectX) while ratios between series of one kind are kept. The
    reference point is the (series, x) that the most kinds have; a kind without it uses its maximum."""
    have: dict[tuple, set[str]] = collections.defaultdict(set)
    for c in curves:
        for x, y, _ in c["points"]:
            if y:
                have[(c["series"], x)].add(c["kind"])
    if not have:
        return [], ""
    ref = min(have, key=lambda k: (-len(have[k]), _key(k[0]), _key(k[1])))
    divisors = {}
    for kind in {c["kind"] for c in curves}:
        at_ref = [y for c in curves if c["kind"] == kind and same(c["series"], ref[0])
                  for x, y, _ in c["points"] if same(x, ref[1]) and y]
        peak = max((abs(y) for c in curves if c["kind"] == kind for _, y, _ in c["points"]), default=0.0)
        divisors[kind] = (at_ref[0], "") if at_ref else (peak or 1.0, " (÷ own max)")
    out = []
    for c in curves:
        d, how = divisors[c["kind"]]
        out.append({**c, "label": c["label"] + how,
                    "points": [(x, y / d, None if sd is None else sd / d) for x, y, sd in c["points"]]})
    series = labels.series(plot, ref[0]) if ref[0] is not None else ""
    x = labels.point(plot.get("x"), ref[1])
    return out, f"{series}, {x}" if series else x


kStyles = {  # kind -> matplotlib style; the legend names the kind in every label too
    "measured": {"linestyle": "-", "marker": "o", "markersize": 4},
    "predicted": {"linestyle": "--", "marker": "s", "markersize": 4, "markerfacecolor": "none"},
    "fitted": {"linestyle": ":", "marker": "^", "markersize": 4, "markerfacecolor": "none"},
}
kBarHatch = {"predicted": "//", "fitted": "xx"}


class _Gids:
    """SVG ids naming the kind of every drawn series (rdl-measured-N, rdl-predicted-N, rdl-fitted-N, rdl-paper-N):
    the report's browser test counts them in the SVG, which draws text as paths."""

    def __init__(self) -> None:
        self.n = 0

    def __call__(self, kind: str) -> str:
        self.n += 1
        return f"rdl-{kind}-{self.n}"


def _draw_panel(ax: Any, curves: list[dict[str, Any]], p: dict[str, Any], colors: dict[Any, str],
                cats: list[Any], gid: _Gids) -> None:
    bar_kinds = sorted({(c["series"], c["kind"]) for c in curves if c["kind"] != "paper"},
                       key=lambda k: (_key(k[0]), k[1]))
    bar_w = 0.8 / max(len(bar_kinds), 1)
    for c in curves:
        color = colors[c["series"]]
        xs = [x for x, _, _ in c["points"]]
        ys = [y for _, y, _ in c["points"]]
        if p.get("kind") == "bar":
            if c["kind"] == "paper":
                slots = [k for k, sk in enumerate(bar_kinds) if same(sk[0], c["series"])] or [0]
                off = bar_w * (sum(slots) / len(slots))
            else:
                off = bar_w * bar_kinds.index((c["series"], c["kind"]))
            xs = [cats.index(x) + off if x in cats else None for x in xs]
            keep = [i for i, x in enumerate(xs) if x is not None]
            xs, ys = [xs[i] for i in keep], [ys[i] for i in keep]
            errs = [c["points"][i][2] for i in keep]
        else:
            errs = [sd for _, _, sd in c["points"]]
        if c["kind"] == "paper":
            ax.scatter(xs, ys, marker="*", s=90, facecolors="none", edgecolors=color, linewidths=1.2,
                       label=c["label"], zorder=5, gid=gid("paper"))
        elif p.get("kind") == "bar":
            ax.bar(xs, ys, bar_w, yerr=errs if p.get("error_bars", True) else None, color=color, capsize=2,
                   label=c["label"], hatch=kBarHatch.get(c["kind"]),
                   alpha=0.55 if c["kind"] in kBarHatch else 1.0, gid=gid(c["kind"]))
        else:
            cont = ax.errorbar(xs, ys, yerr=errs if p.get("error_bars", True) and any(errs) else None, capsize=3,
                               color=color, label=c["label"], **kStyles[c["kind"]])
            cont.lines[0].set_gid(gid(c["kind"]))
    if p.get("kind") == "bar":
        ax.set_xticks([k + bar_w * (len(bar_kinds) - 1) / 2 for k in range(len(cats))],
                      [labels.category(p.get("x"), c) for c in cats])
    elif p.get("xlog"):
        ax.set_xscale("log", base=2)
    if p.get("ylog"):
        ax.set_yscale("log")
    ax.set_xlabel(labels.axis(p, "x"), fontsize=kLabelFont)
    ax.tick_params(labelsize=kTickFont)
    ax.grid(True, alpha=0.3)


def _plain(v: float, _pos: Any = None) -> str:
    """A tick of a linear or decimal log axis: a plain number, SI prefixes from 10^4 (no "9 x 10^0")."""
    if v == 0:
        return "0"
    if abs(v) >= labels.kSiFromAbs:
        return labels.si(v)
    return f"{v:.4g}" if abs(v) >= 1e-3 else f"{v:.1e}"


def _binary(v: float, _pos: Any = None) -> str:
    """A tick of a base-2 log axis: plain up to 8192, then binary prefixes (16Ki, 1Mi)."""
    if v >= 10_000 and float(v).is_integer():
        for div, prefix in ((1 << 30, "Gi"), (1 << 20, "Mi"), (1 << 10, "Ki")):
            if v >= div and v % div == 0:
                return f"{int(v // div)}{prefix}"
    return _plain(v)


def _log_subs(lo: float, hi: float) -> tuple[float, ...]:
    """Labelled ticks within each decade of a log axis, more where the axis spans few decades."""
    decades = math.log10(hi / lo) if lo > 0 and hi > lo else 0.0
    if decades < 1.2:
        return (1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0)
    if decades < 3.5:
        return (1.0, 2.0, 5.0)
    return (1.0,)


def _format_axes(ax: Any, p: dict[str, Any], bar: bool) -> None:
    """Readable ticks, once the data set the limits: plain numbers or SI prefixes, never offsets or
    scientific notation; log axes labelled at round values only."""
    if ax.get_yscale() == "log":
        lo, hi = ax.get_ylim()
        ax.yaxis.set_major_locator(ticker.LogLocator(base=10, subs=_log_subs(lo, hi), numticks=12))
        ax.yaxis.set_minor_formatter(ticker.NullFormatter())
        ax.set_ylim(lo, hi)
    else:
        ax.yaxis.set_major_locator(ticker.MaxNLocator(nbins=6))
    ax.yaxis.set_major_formatter(ticker.FuncFormatter(_plain))
    if bar:
        return
    if ax.get_xscale() == "log":
        lo, hi = ax.get_xlim()
        ax.xaxis.set_major_locator(ticker.LogLocator(base=2, numticks=9))
        ax.xaxis.set_minor_formatter(ticker.NullFormatter())
        ax.xaxis.set_major_formatter(ticker.FuncFormatter(_binary))
        ax.set_xlim(lo, hi)
    else:
        ax.xaxis.set_major_locator(ticker.MaxNLocator(nbins=7))
        ax.xaxis.set_major_formatter(ticker.FuncFormatter(_plain))


def _tick_texts(axis: Any, lim: tuple[float, float]) -> list[str]:
    """The labels a formatted axis will draw within its limits, without drawing."""
    lo, hi = sorted(lim)
    locs = [v for v in axis.get_major_locator()() if lo - 1e-12 * abs(lo) <= v <= hi + 1e-12 * abs(hi)]
    fmt = axis.get_major_formatter()
    return [t for t in fmt.format_ticks(locs) if t] if locs else []


def _text_inches(texts: list[str], size: int) -> float:
    return max((len(t) for t in texts), default=0) * kCharInches[size]


def _wrap(text: str, inches: float, size: int) -> str:
    return textwrap.fill(text, max(12, int(inches / kCharInches[size])), break_on_hyphens=False)  # FaRM-em stays whole


def _lines(text: str) -> int:
    return text.count("\n") + 1 if text else 0


def _y_margin(ax: Any) -> float:
    """Inches left of an axes for its y tick labels and its y label."""
    ticks = _text_inches(_tick_texts(ax.yaxis, ax.get_ylim()), kTickFont)
    return kTickPadInches + ticks + 0.08 + _lines(ax.get_ylabel()) * kLineInches[kLabelFont] + 0.05


def _x_margin(ax: Any, panel_inches: float, bar: bool) -> float:
    """Inches under an axes for its x tick labels and its x label; rotates tick labels too wide
    for their share of the panel."""
    texts = [t.get_text() for t in ax.get_xticklabels()] if bar else _tick_texts(ax.xaxis, ax.get_xlim())
    widest = _text_inches(texts, kTickFont)
    slot_inches = panel_inches / max(len(texts), 1)
    line = kLineInches[kTickFont]
    tick_h = line
    if texts and widest > slot_inches * 0.9:
        # A rotated label takes the width of its projection (and its box is what the layout test
        # measures): the least rotation that keeps neighbours apart.
        angle = next((a for a in kTickRotationsDeg
                      if widest * math.cos(math.radians(a)) + line * math.sin(math.radians(a)) <= slot_inches * 0.95),
                     kTickRotationsDeg[-1])
        ax.tick_params(axis="x", labelrotation=angle)
        for t in ax.get_xticklabels():
            t.set_horizontalalignment("right")
            t.set_rotation_mode("anchor")
            if angle == 90:
                t.set_verticalalignment("center")  # upright labels centred under their ticks
        tick_h = widest * math.sin(math.radians(angle)) + line * math.cos(math.radians(angle))
    return kTickPadInches + tick_h + 0.05 + _lines(ax.get_xlabel()) * kLineInches[kLabelFont] + 0.05


def _figure(fig_data: Figure, stem: str) -> Optional[Any]:
    """The matplotlib figure of one experiment, laid out; None when nothing is drawable."""
    p = fig_data.plot
    facets = fig_data.facets()
    rows_all = [r for t in fig_data.tables for r in t.rows]
    if not p or all(r["mean"] is None and r["not_run"] is None for r in rows_all):
        return None  # nothing measured: the report lists the failures instead
    table_kind = p.get("kind") == "table"
    ncols = 1 if table_kind else 2
    width = max(kMinWidthInches, kPanelInches[0] * ncols)
    fig, axes = plt.subplots(len(facets), ncols, figsize=(width, kPanelInches[1] * len(facets) + 0.4), squeeze=False)
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    colors = {s: palette[j % len(palette)] for j, s in enumerate(fig_data.series())}
    gid = _Gids()
    legend: dict[str, Any] = {}  # label -> handle, over every facet: one legend under the panels
    panel_in = (width - 1.6 * ncols) / ncols  # a panel's width, less its margins, for wrapping titles
    title_lines, x_margin, y_margin = 0, 0.0, [0.0] * ncols
    for i, facet in enumerate(facets):
        curves = fig_data.curves(facet)
        for c in curves:
            colors.setdefault(c["series"], palette[len(colors) % len(palette)])
        if table_kind:
            _draw_table(axes[i][0], fig_data, facet)
            title_lines = max(title_lines, _lines(axes[i][0].get_title()))
            continue
        cats = sorted({x for c in curves for x, _, _ in c["points"]}, key=_key)
        ax, ax_n = axes[i]
        _draw_panel(ax, curves, p, colors, cats, gid)
        ax.set_ylabel(_wrap(labels.axis(p, "y"), kLabelChars * kCharInches[kLabelFont], kLabelFont), fontsize=kLabelFont)
        norm, where = normalized(curves, p)
        _draw_panel(ax_n, norm, {**p, "error_bars": False}, colors, cats, gid)
        ax_n.set_ylabel("relative value (ratio)", fontsize=kLabelFont)
        facet_title = f"{labels.facet(p, facet)}: " if p.get("facet") else ""
        ax.set_title(_wrap(f"{facet_title}absolute", panel_in, kPanelTitleFont), fontsize=kPanelTitleFont)
        ax_n.set_title(_wrap(f"{facet_title}each kind ÷ its value at {where}" if where else f"{facet_title}normalized",
                             panel_in, kPanelTitleFont), fontsize=kPanelTitleFont)
        title_lines = max(title_lines, _lines(ax.get_title()), _lines(ax_n.get_title()))
        for h, label in zip(*ax.get_legend_handles_labels()):
            legend.setdefault(label, h)
        for j, a in enumerate((ax, ax_n)):
            _format_axes(a, p, p.get("kind") == "bar")
            y_margin[j] = max(y_margin[j], _y_margin(a))
            x_margin = max(x_margin, _x_margin(a, panel_in, p.get("kind") == "bar"))
    suptitle = textwrap.fill(fig_data.experiment.get("title", stem), int(width * kTitleCharsPerInch))
    notes = [n for t in fig_data.tables for n in t.not_run_notes(readable=True)]
    # The points that did not run (not modeled, unsupported on this host) are named with the
    # reason, never drawn as values.
    text = "\n".join(textwrap.fill(n, int(width * kNoteCharsPerInch)) for n in notes)
    note_lines = text.count("\n") + 1 if notes else 0
    widest = max((len(label) for label in legend), default=0) * kCharInches[kLegendFont] + 0.55
    legend_cols = max(1, min(3 if ncols == 2 else 2, int((width - 0.3) / widest)))
    legend_lines = math.ceil(len(legend) / legend_cols)
    bottom_in = kNoteLineInches * (note_lines + legend_lines * kLegendLineScale) + 0.05
    if table_kind:
        x_margin = 0.1
    top_in = 0.12 + _lines(suptitle) * kLineInches[10] + 0.08 + title_lines * kLineInches[kPanelTitleFont] + 0.05
    row_gap = x_margin + title_lines * kLineInches[kPanelTitleFont] + 0.2
    left_in = max(0.3, y_margin[0])
    gap_in = y_margin[1] + 0.25 if ncols == 2 else 0.0
    panel_h = kPanelInches[1] - 0.9
    fig.set_figheight(top_in + bottom_in + x_margin + len(facets) * panel_h + (len(facets) - 1) * row_gap)
    fig.suptitle(suptitle, fontsize=10, y=1 - 0.1 / fig.get_figheight())
    if notes:
        fig.text(0.01, 0.01, text, fontsize=7, color="#a05000", va="bottom")
    if legend:
        fig.legend(list(legend.values()), list(legend), loc="lower center", ncol=legend_cols, fontsize=kLegendFont,
                   frameon=False, bbox_to_anchor=(0.5, (kNoteLineInches * note_lines + 0.02) / fig.get_figheight()))
    w, h = fig.get_figwidth(), fig.get_figheight()
    panel_w = (w - left_in - kRightInches - gap_in * (ncols - 1)) / ncols
    fig.subplots_adjust(left=left_in / w, right=1 - kRightInches / w, top=1 - top_in / h,
                        bottom=(bottom_in + x_margin) / h, wspace=gap_in / panel_w, hspace=row_gap / panel_h)
    return fig


def draw(fig_data: Figure, out_dir: pathlib.Path, stem: str) -> Optional[dict[str, pathlib.Path]]:
    """Per facet, two panels: absolute values of every kind, and each kind normalized to its own
    reference point. A table plot is one table with a column per kind."""
    fig = _figure(fig_data, stem)
    if fig is None:
        return None
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"png": out_dir / f"{stem}.png", "svg": out_dir / f"{stem}.svg"}
    fig.savefig(paths["png"], dpi=kDpi)
    fig.savefig(paths["svg"])
    plt.close(fig)
    return paths


def _draw_table(ax: Any, fig_data: Figure, facet: Any) -> None:
    p = fig_data.plot
    ax.axis("off")
    lead = [labels.noun(labels.series_names(p)[0]) if len(labels.series_names(p)) == 1 else "series"] \
        if p.get("series") else []
    keys = sorted({(r["series"], r["x"]) for t in fig_data.tables for r in t.rows if same(r["facet"], facet)},
                  key=lambda k: (_key(k[0]), _key(k[1])))
    cells = []
    for s, x in keys:
        values = [_cell(t, facet, s, x) for t in fig_data.tables]
        paper = fig_data.tables[0].reference_value(facet, s, x)
        cells.append(([labels.series(p, s)] if lead else [])
                     + [labels.category(p.get("x"), x), *values, "" if paper is None else f"{paper:.4g}"])
    if cells:
        heads = [t.legend_label() for t in fig_data.tables]
        tab = ax.table(cellText=cells, colLabels=lead + [labels.axis(p, "x"), *heads, "paper"], loc="center")
        tab.auto_set_font_size(False)
        tab.set_fontsize(8)
        tab.auto_set_column_width(list(range(len(cells[0]))))
        tab.scale(1, 1.3)
        tab.set_gid(f"rdl-table-{'-'.join(t.what for t in fig_data.tables)}{'-paper' if fig_data.reference else ''}")
    title = labels.axis(p, "y")
    ax.set_title(f"{labels.facet(p, facet)}: {title}" if p.get("facet") else title, fontsize=kPanelTitleFont)


def _cell(t: Table, facet: Any, series: Any, x: Any) -> str:
    v, why = t.lookup(facet, series, x)
    if v is not None:
        return f"{v:.4g}"
    return next((what for what in kNotRun.values() if why.startswith(what)), "failed" if "failed" in why else "")
