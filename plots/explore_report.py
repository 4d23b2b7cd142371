"""The explore report: results/explore/<id>/report/index.html, from the explore's summary.json
(rdmalab-explore/2) and the anomalies' files only. Sections: what matters (per dimension, the
objective's range when it alone moves, predicted and measured), the best designs with ties
collapsed, the model's bottleneck and `explain` folded under each, measured vs predicted, the
Pareto front drawn, the anomalies with their minimal experiment files. Offline; images are
files next to the page."""
from __future__ import annotations

import html
import json
import os
import pathlib
from typing import Any, Optional

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from .report import kCss, kImageCheck  # noqa: E402

kSummarySchema = "rdmalab-explore/2"
kSections = ("matters", "best", "measured", "pareto", "anomalies")
kFigureInches = (6.4, 4.0)
kDpi = 110
# Marks every section present once the page has loaded, for people and the headless-browser test.
kSectionCheck = """<script>
window.addEventListener("load", function () {
  var ids = Array.prototype.map.call(document.querySelectorAll("section[id]"), function (s) { return s.id; });
  document.body.setAttribute("data-sections", ids.join(" "));
});
</script>"""


class ReportError(RuntimeError):
    pass


def _esc(value: Any) -> str:
    return html.escape(str(value))


def _num(value: Optional[float]) -> str:
    return "" if value is None else f"{value:.4g}"


def _design(design: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in design.items())


def _table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th class=\"l\">{_esc(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td class=\"l\">{c}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _figure(path: pathlib.Path, draw) -> str:
    fig, ax = plt.subplots(figsize=kFigureInches)
    draw(ax)
    fig.tight_layout()
    fig.savefig(path, dpi=kDpi)
    plt.close(fig)
    return f"<img class=\"figure\" src=\"{_esc(path.name)}\" alt=\"{_esc(path.stem)}\">"


def _metric_label(summary: dict[str, Any]) -> str:
    o = summary["space"]["objective"]
    return f"{o['metric']}{' per ' + o['per'] if o.get('per') else ''}"


def _range(r: Optional[list[float]]) -> str:
    return "" if not r else f"{_num(r[0])} - {_num(r[1])}"


def _matters(summary: dict[str, Any], out_dir: pathlib.Path) -> str:
    rows = summary.get("what_matters") or []
    if not rows:
        return "<p class=\"muted\">no dimension</p>"
    metric = summary["space"]["objective"]["metric"]

    def draw(ax) -> None:
        names = [m["dimension"] for m in rows][::-1]
        ax.barh([i + 0.2 for i in range(len(names))], [(m["predicted_spread"] or 1) for m in rows][::-1], 0.4,
                label=f"model ({summary.get('profile')})", color="C0")
        ax.barh([i - 0.2 for i in range(len(names))], [(m["measured_spread"] or 1) for m in rows][::-1], 0.4,
                label=f"measured ({summary.get('backend')})", color="C1")
        ax.set_yticks(range(len(names)), names)
        ax.set_xscale("log")
        ax.set_xlabel(f"{metric}: highest / lowest when the dimension alone moves")
        ax.legend()
    img = _figure(out_dir / "what-matters.png", draw)
    table = _table(["dimension", "values", f"model {metric} (baseline's line)", "spread",
                    f"measured {metric}", "spread", "measured along"],
                   [[_esc(m["dimension"]), str(m["values"]), _range(m["predicted"]), _num(m["predicted_spread"]),
                     _range(m["measured"]), _num(m["measured_spread"]),
                     _esc(f"{m['measured_designs']} designs at {_design(m['measured_at'])}" if m["measured_at"] else
                          "no two measured designs differ only in it")] for m in rows])
    return ("<p>The objective's range when one dimension alone moves: on the model along the baseline's line "
            "(the other dimensions at the baseline), as measured along the line of measured designs that differ only "
            f"in it and hold most of its values. A spread of 1 is a dimension without effect.</p>{img}{table}")


def _best(summary: dict[str, Any]) -> str:
    rows = [[str(i), _esc(b["shown"]) + (f" <span class=\"muted\">({b['tied']} designs within 1%)</span>"
                                         if b["tied"] > 1 else ""),
             _num(b["predicted"]), _esc(b.get("bottleneck_label") or b.get("bottleneck") or "")]
            for i, b in enumerate(summary["best"], 1)]
    out = _table(["#", "design (values a tie spans: LO..HI or A|B)", f"predicted {_metric_label(summary)}",
                  "bottleneck (model)"], rows)
    for i, b in enumerate(summary["best"], 1):
        out += (f"<details><summary>#{i} explain: {_esc(_design(b['design']))}</summary>"
                f"<pre>{_esc(b['explain'])}</pre></details>")
    return out


def _measured(summary: dict[str, Any], out_dir: pathlib.Path) -> str:
    measured = summary.get("measured") or []
    if not measured:
        return "<p class=\"muted\">nothing measured (--model-only, or the budget allowed none)</p>"
    metric = summary["space"]["objective"]["metric"]
    pairs = [m for m in measured if m["measured"] is not None and m["predicted"] is not None]

    def draw(ax) -> None:
        ax.scatter([m["predicted"] for m in pairs], [m["measured"] for m in pairs], s=18)
        if pairs and summary.get("typical_ratio"):
            hi = max(m["predicted"] for m in pairs)
            ax.plot([0, hi], [0, hi * summary["typical_ratio"]], "--", color="gray", label="typical ratio")
            ax.legend()
        ax.set_xlabel(f"predicted {metric} ({summary.get('profile')})")
        ax.set_ylabel(f"measured {metric} ({summary.get('backend')})")
    img = _figure(out_dir / "measured-vs-predicted.png", draw) if pairs else ""
    rows = [[_esc(_design(m["design"])), _esc(", ".join(m["why"])), _num(m["measured"]), _num(m["predicted"]),
             _num(m["ratio"]), _esc(m.get("bottleneck") or ""), _esc(m.get("point") or "")] for m in measured]
    typical = summary.get("typical_ratio")
    coverage = summary.get("coverage")
    covered = (f"; value pairs measured: {coverage['pairs'] - coverage['missing']} of {coverage['pairs']}"
               if coverage else "")
    return (f"<p>model profile {_esc(summary.get('profile'))} ({_esc(summary.get('profile_source'))}); strategy "
            f"{_esc(summary.get('strategy'))}; stopped: {_esc(summary.get('stopped'))}{covered}</p>"
            f"<p>typical measured/predicted: {_num(typical)} (geometric median); {summary.get('points_run', 0)} points "
            f"run by this explore, the others were stored already</p>{img}"
            + _table(["design", "why", "measured", "predicted", "ratio", "bottleneck (model)", "point"], rows))


def _pareto(summary: dict[str, Any], out_dir: pathlib.Path) -> str:
    front = summary.get("pareto") or []
    costs = list(summary["space"]["costs"])
    if not costs:
        return "<p class=\"muted\">the space names no cost, so there is no front</p>"
    cost = costs[0]
    cloud = summary.get("cloud") or []

    def draw(ax) -> None:
        if cloud:
            ax.scatter([c["costs"][cost] for c in cloud], [c["value"] for c in cloud], s=6, color="#bbb",
                       label="designs scored")
        ax.plot([f["costs"][cost] for f in front], [f["predicted"] for f in front], "o-", color="C1",
                label="Pareto front")
        ax.set_xlabel(cost)
        ax.set_ylabel(f"predicted {_metric_label(summary)}")
        ax.legend()
    img = _figure(out_dir / "pareto.png", draw) if front else ""
    rows = [[_esc(", ".join(f"{k}={_num(v)}" for k, v in f["costs"].items())), _num(f["predicted"]),
             _esc(_design(f["design"])), _esc(f.get("bottleneck") or "")] for f in front]
    return img + _table(["cost", f"predicted {_metric_label(summary)}", "design", "bottleneck (model)"], rows)


def _anomalies(summary: dict[str, Any], report_dir: pathlib.Path) -> str:
    found = summary.get("anomalies") or []
    if summary.get("backend") is None:
        return "<p class=\"muted\">model only: anomalies need measured designs</p>"
    limit = (f"a ratio more than {_num(summary['ratio_limit'])}x off the typical one either way"
             if summary.get("ratio_limit") else "")
    others = "".join(f"<p class=\"muted\">{what}: " + "; ".join(_esc(_design(x["design"])) for x in xs) + "</p>"
                     for what, xs in (("found with no point left to shrink them", summary.get("not_shrunk") or []),
                                      ("not seen again when measured a second time (not reported)",
                                       summary.get("unconfirmed") or [])) if xs)
    if not found:
        return (f"<p>no anomaly ({_esc(limit)}, or a collapse against a measured neighbour)</p>{others}")
    out = f"<p>anomalous: {_esc(limit)}, or a collapse against a measured neighbour</p>{others}"
    for i, a in enumerate(found, 1):
        path = pathlib.Path(a["file"]) if a.get("file") else None
        text = path.read_text() if path is not None and path.is_file() else "(file missing)"
        link = os.path.relpath(path, report_dir) if path is not None else ""
        steps = _table(["dimension", "to", "result"], [[_esc(s["dimension"]), _esc(s["to"]), _esc(s["result"])]
                                                       for s in a.get("steps") or []])
        found_text = ", ".join(f"{k}={_num(v) if isinstance(v, float) else _esc(v)}" for k, v in a["found"].items())
        also = (f"<p>the same cause at: {'; '.join(_esc(_design(d)) for d in a['also'])}</p>" if a.get("also") else "")
        out += (f"<h3>anomaly {i}: {_esc(a['kind'])}</h3><p>found at {_esc(_design(a['design']))}: {found_text}</p>{also}"
                f"<p>shrunk: {_esc(a['shrunk'])}; needs: <b>{_esc(', '.join(a['kept']) or 'nothing beyond the baseline')}"
                f"</b>; minimal file: <a href=\"{_esc(link)}\">{_esc(path.name if path else '')}</a> "
                f"(<code>./run_all.py {_esc(a.get('file') or '')}</code>)</p>{steps}"
                f"<details><summary>{_esc(path.name if path else 'file')}</summary><pre>{_esc(text)}</pre></details>")
    return out


def write_explore_report(summary_path: pathlib.Path) -> pathlib.Path:
    summary = json.loads(pathlib.Path(summary_path).read_text())
    if summary.get("schema_version") != kSummarySchema:
        raise ReportError(f"{summary_path}: schema_version {summary.get('schema_version')!r}, expected {kSummarySchema}")
    out_dir = pathlib.Path(summary_path).parent / "report"
    out_dir.mkdir(parents=True, exist_ok=True)
    space, search = summary["space"], summary["search"]
    head = (f"<h1>explore: {_esc(space['title'])}</h1><p>{_esc(space.get('description') or '')}</p>"
            f"<p>{_esc(space['file'])}: mode {_esc(space.get('mode'))}, objective {_esc(_metric_label(summary))} "
            f"({'maximize' if space['objective']['maximize'] else 'minimize'}), costs "
            f"{_esc(', '.join(f'{k} = {v}' for k, v in space['costs'].items()) or 'none')}, constraints "
            f"{_esc('; '.join(space['constraints']) or 'none')}; model profile {_esc(summary.get('profile'))}; "
            f"measured on {_esc(summary.get('backend') or 'nothing (model only)')}</p>"
            f"<p>search: {_esc(search['method'])}, {search['scored']} of {search['grid_designs']} designs scored "
            f"({search['valued']} with a value) in {search['seconds']} s by {search['model_processes']} model "
            f"processes</p>")
    sections = {"matters": ("What matters", _matters(summary, out_dir)),
                "best": ("Best designs (model; ties collapsed)", _best(summary)),
                "measured": ("Measured vs predicted", _measured(summary, out_dir)),
                "pareto": ("Pareto front", _pareto(summary, out_dir)),
                "anomalies": ("Anomalies and their minimal files", _anomalies(summary, out_dir))}
    body = "".join(f"<section id=\"{k}\"><h2>{_esc(title)}</h2>{content}</section>"
                   for k, (title, content) in sections.items())
    page = (f"<!doctype html><html><head><meta charset=\"utf-8\"><title>explore {_esc(space['id'])}</title>"
            f"<style>{kCss}</style></head><body>{head}{body}{kImageCheck}{kSectionCheck}</body></html>\n")
    path = out_dir / "index.html"
    path.write_text(page)
    return path
