"""The HTML report: a summary of the papers' conclusions, then per experiment one figure with the
measured, predicted and published values, its conclusions judged on each, its data table and
provenance; from stored results (and the experiment files' current conclusions), viewable offline
(no external resources; images are files next to the page)."""
from __future__ import annotations

import collections
import dataclasses
import html
import json
import math
import os
import pathlib
from typing import Any, Optional

from harness import conclusions as concl
from harness.experiment import parse as parse_experiment
from harness.store import Store, fitted_root, kFinalStatuses, kNotRun, utc_now
from harness.yamlloc import ConfigError

from . import labels
from . import score as score_mod
from .figures import Figure, Table, draw, series_name

# Counts the figures that really loaded, for people (title) and for the headless-browser test (data-*).
kImageCheck = """<script>
window.addEventListener("load", function () {
  var imgs = Array.prototype.slice.call(document.images);
  var ok = imgs.filter(function (i) { return i.complete && i.naturalWidth > 0; });
  document.body.setAttribute("data-images-total", imgs.length);
  document.body.setAttribute("data-images-loaded", ok.length);
  document.body.setAttribute("data-images-broken", imgs.filter(function (i) { return ok.indexOf(i) < 0; })
    .map(function (i) { return i.getAttribute("src"); }).join(" "));
});
</script>"""
kCss = """
body { font-family: sans-serif; margin: 2em; color: #222; max-width: 1200px; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; border-top: 1px solid #ccc; padding-top: 1em; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0; }
td, th { border: 1px solid #ccc; padding: 2px 8px; text-align: right; }
th { background: #f0f0f0; } td.l, th.l { text-align: left; }
.failed { color: #b00; } .ok { color: #070; } .muted { color: #666; font-size: 0.85em; }
.holds { color: #070; } .fails { color: #b00; font-weight: bold; } .unjudged { color: #888; }
img.figure { max-width: 100%; border: 1px solid #ddd; }
details { margin: 0.5em 0; } code { font-size: 0.85em; }
"""


def _e(v: Any) -> str:
    return html.escape("" if v is None else str(v))


def _num(v: Optional[float]) -> str:
    return "" if v is None else f"{v:.4g}"


kModel = "model"
kFittedJudge = "fitted"
kPaperJudge = "paper"
kDisagreementsShown = 3     # per paper, in "what this run says"
kRatioGapShown = 2.0        # judges that agree on the verdict are listed where their ratios are this far apart
kJudgeNames = {kModel: "model (paper's NIC)", kFittedJudge: "model (profile fitted to the run)",
               kPaperJudge: "paper's published values"}
kVerdictClass = {concl.kHolds: "holds", concl.kFails: "fails", concl.kNotEvaluated: "unjudged"}


def _data_table(fig: Figure) -> str:
    p = fig.plot
    names = (p.get("facet"), series_name(p), p.get("x"))
    readers = (labels.noun(p["facet"]) if p.get("facet") else None,
               (labels.noun(p["series"]) if isinstance(p.get("series"), str) else "series") if p.get("series") else None,
               labels.axis(p, "x") if p.get("x") else None)
    head = "".join(f'<th title="{_e(h)}">{_e(r)}</th>' for h, r in zip(names, readers) if h)
    kinds = "".join(f"<th>{_e(t.legend_label())}: mean {_e(labels.axis(p, 'y'))}</th><th>stdev</th><th>n</th>"
                    "<th>failed</th>" for t in fig.tables)
    out = [f"<table><tr>{head}{kinds}<th>paper</th><th class=\"l\">did not run</th></tr>"]
    keys = sorted({(r["facet"], r["series"], r["x"]) for t in fig.tables for r in t.rows},
                  key=lambda k: tuple(figures_key(v) for v in k))
    for k in keys:
        shown = (labels.facet(p, k[0]), labels.series(p, k[1]), labels.category(p.get("x"), k[2]))
        cells = "".join(f'<td title="{_e(h)}={_e(v)}">{_e(r)}</td>' for v, h, r in zip(k, names, shown) if h)
        reason = ""
        for t in fig.tables:
            r = next((r for r in t.rows if (r["facet"], r["series"], r["x"]) == k), None)
            if r is None:
                cells += "<td></td>" * 4
                continue
            failed = f'<td class="failed">{r["failed"]}</td>' if r["failed"] else "<td>0</td>"
            cells += f"<td>{_num(r['mean'])}</td><td>{_num(r['stdev'])}</td><td>{r['n']}</td>{failed}"
            if r["not_run"] and not reason:
                reason = f"{r['not_run'][0]}: {r['not_run'][1]}"
        paper = fig.tables[0].reference_value(*k)
        out.append(f"<tr>{cells}<td>{_num(paper)}</td><td class=\"l muted\">{_e(reason)}</td></tr>")
    out.append("</table>")
    return "".join(out)


def figures_key(v: Any) -> tuple:
    return (0, v, "") if isinstance(v, (int, float)) and not isinstance(v, bool) else (1, 0, str(v))


def current_conclusions(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The experiment file's conclusions when it is still there (statements may be added after a
    run; they are judged on the stored values), else the ones stored with the newest point."""
    newest = max(records, key=lambda r: r["provenance"].get("started", ""))
    path = pathlib.Path(newest["experiment"].get("file", ""))
    if path.is_file():
        try:
            exp = parse_experiment(path)
            if exp.id == newest["experiment"]["id"]:
                return exp.conclusions
        except ConfigError:
            pass  # an experiment file being edited: judge the stored statements
    return newest["experiment"].get("conclusions") or []


def judge(fig: Figure, conclusions: list[dict[str, Any]]) -> list[dict[str, concl.Verdict]]:
    """Every statement judged on the measured run (where the backend can run its points), the
    model, the model with the profile fitted to the backend, and the paper's own values."""
    judges = {}
    if fig.measured is not None:
        judges[fig.measured.backend] = (fig.measured.lookup, fig.measured.backend)
    if fig.model is not None:
        judges[kModel] = (fig.model.lookup, None)
    if fig.fitted is not None:
        judges[kFittedJudge] = (fig.fitted.lookup, None)
    judges[kPaperJudge] = (fig.tables[0].paper_lookup, None)
    return [{name: concl.evaluate(c, look, fig.plot, backend) for name, (look, backend) in judges.items()}
            for c in conclusions]


def _verdict_cell(judge_name: str, v: Optional[concl.Verdict]) -> str:
    if v is None:
        return f'<td class="l unjudged" data-judge="{_e(judge_name)}" data-verdict="not run">not run</td>'
    detail = (f"ratio {v.ratio:.3g} ({_num(v.numerator)} / {_num(v.denominator)}); holds if {v.reason}"
              if v.ratio is not None else v.reason)
    return (f'<td class="l {kVerdictClass[v.status]}" data-judge="{_e(judge_name)}" data-verdict="{_e(v.status)}">'
            f'{_e(v.status)}<br><span class="muted">{_e(detail)}</span></td>')


def _conclusions_table(conclusions: list[dict[str, Any]], verdicts: list[dict[str, concl.Verdict]],
                       judges: list[str]) -> str:
    if not conclusions:
        return '<p class="muted">no conclusions of the paper are written down for this figure</p>'
    head = "".join(f"<th>{_e(kJudgeNames.get(j, j + ' (this run)'))}</th>" for j in judges)
    rows = []
    for i, (c, vs) in enumerate(zip(conclusions, verdicts)):
        src = f' <span class="muted">({_e(c["source"])})</span>' if c.get("source") else ""
        rows.append(f'<tr class="conclusion" data-index="{i}"><td class="l">{_e(c["statement"])}{src}</td>'
                    + "".join(_verdict_cell(j, vs.get(j)) for j in judges) + "</tr>")
    return f'<table class="conclusions"><tr><th class="l">the paper concludes</th>{head}</tr>{"".join(rows)}</table>'


@dataclasses.dataclass
class Judged:
    """One statement of one figure with its verdicts, for "what this run says"."""
    paper: str
    exp_id: str
    stem: str                           # the figure's anchor
    statement: str
    verdicts: dict[str, concl.Verdict]


def disagreement(j: Judged) -> float:
    """How far the judges that could judge the statement are apart: the largest |log ratio|
    between two of their ratios, doubled where one holds and the other does not; 0: they agree."""
    judged = [v for v in j.verdicts.values() if v.ratio is not None and v.ratio > 0]
    worst = 0.0
    for i, a in enumerate(judged):
        for b in judged[i + 1:]:
            gap = abs(math.log(a.ratio / b.ratio))
            worst = max(worst, gap * (2.0 if a.status != b.status else 1.0))
    return worst


def _disagree(j: Judged) -> bool:
    """Two judges differ on the verdict, or their ratios are kRatioGapShown apart."""
    return len({v.status for v in j.verdicts.values() if v.ratio is not None}) > 1 \
        or disagreement(j) >= math.log(kRatioGapShown)


def _verdict_text(name: str, v: concl.Verdict) -> str:
    ratio = f" (ratio {v.ratio:.3g})" if v.ratio is not None else ""
    return f'<span class="{kVerdictClass[v.status]}">{_e(kJudgeNames.get(name, name))}: {_e(v.status)}{ratio}</span>'


def _summary(tally: dict[str, dict[str, collections.Counter]], statements: collections.Counter, judges: list[str],
             judged: list[Judged]) -> str:
    """What this run says: per paper and judge, how many statements hold, do not, or could not
    be judged, then where the run, the model and the paper's numbers disagree most, each linked
    to its figure."""
    if not sum(statements.values()):
        return ""
    names = {kModel: "model", kFittedJudge: "model fitted to the run", kPaperJudge: "paper's values"}
    head = "".join(f"<th>{_e(names.get(j, j))}</th>" for j in judges)
    rows, worst = [], []
    for paper in sorted(statements):
        cells = []
        total = statements[paper]
        for j in judges:
            c = tally[paper].get(j, collections.Counter())
            cells.append(f'<td class="l" data-paper="{_e(paper)}" data-judge="{_e(j)}" data-holds="{c[concl.kHolds]}" '
                         f'data-fails="{c[concl.kFails]}" data-unjudged="{total - c[concl.kHolds] - c[concl.kFails]}">'
                         f'<span class="holds">{c[concl.kHolds]} hold</span>, <span class="{"fails" if c[concl.kFails] else ""}">'
                         f'{c[concl.kFails]} do not</span>, <span class="unjudged">'
                         f'{total - c[concl.kHolds] - c[concl.kFails]} not judged</span></td>')
        rows.append(f'<tr><th class="l">{_e(paper)}</th><td>{total}</td>{"".join(cells)}</tr>')
        ranked = sorted((j for j in judged if j.paper == paper and _disagree(j)), key=disagreement, reverse=True)
        for j in ranked[:kDisagreementsShown]:
            verdicts = "; ".join(_verdict_text(name, v) for name, v in j.verdicts.items() if v.ratio is not None)
            worst.append(f'<li class="disagreement" data-paper="{_e(paper)}"><b>{_e(paper)}</b>: '
                         f'<a href="#{html.escape(j.stem)}">{_e(j.exp_id)}</a>: {_e(j.statement)}<br>{verdicts}</li>')
    disagreements = (f'<h3>Where they disagree most</h3><ul class="disagreements">{"".join(worst)}</ul>' if worst else
                     '<p class="muted">the run, the model and the paper agree on every statement judged by more than one</p>')
    return (f'<h2 id="summary">What this run says</h2><p>Per paper, how many of its conclusions (written down as '
            f'checkable statements under each figure) hold on this run, on the model and in the paper\'s own '
            f'numbers.</p><table class="summary">'
            f'<tr><th class="l">paper</th><th>statements</th>{head}</tr>{"".join(rows)}</table>'
            f'{disagreements}'
            '<p class="muted">measured runs are judged on their own backend (softnic emulates a NIC in software, so '
            'conclusions about a NIC\'s caches, PCIe or ASIC hold only on real hardware); "not judged" there names, '
            'under the figure, why the backend cannot run the points; the model predicts the paper\'s NIC; '
            '"paper\'s values" checks the statement against the published numbers where the paper gives both. '
            'Disagreements are ranked by how far apart the ratios are, most where the verdicts differ.</p>')


def _section(fig: Figure, stem: str, store: Store, out_dir: pathlib.Path,
             fig_dir: pathlib.Path, conclusions: list[dict[str, Any]], verdicts: list[dict[str, concl.Verdict]],
             judges: list[str]) -> str:
    exp_id = fig.experiment["id"]
    paths = draw(fig, fig_dir, stem)
    paper = fig.experiment.get("paper") or {}
    cite = f" — {_e(paper.get('id'))} {_e(paper.get('figure'))}" if paper else ""
    fig_html = '<p class="failed">no figure: no point of this experiment succeeded</p>' if fig.plot else ""
    if paths:
        png = os.path.relpath(paths["png"], out_dir)
        svg = os.path.relpath(paths["svg"], out_dir)
        csvs = " ".join(f'<a href="{_e(os.path.relpath(_csv(store, t, exp_id), out_dir))}">{_e(t.label())} CSV</a>'
                        for t in fig.tables)
        fig_html = (f'<figure data-experiment="{_e(exp_id)}" data-svg="{_e(svg)}" '
                    f'data-kinds-expected="{_e(" ".join(expected_kinds(fig)))}">'
                    f'<img class="figure" src="{_e(png)}" alt="{_e(exp_id)}"></figure>'
                    f'<p class="muted"><a href="{_e(svg)}">SVG</a> · data: {csvs}</p>')
    what = " + ".join(t.label() for t in fig.tables)
    return (f'<h2 id="{html.escape(stem)}">{_e(exp_id)} <span class="muted">[{_e(what)}]{cite}</span></h2>'
            f"<p>{_e(fig.experiment.get('title'))}</p><p class=\"muted\">{_e(fig.experiment.get('description'))}</p>"
            f"{fig_html}{_conclusions_table(conclusions, verdicts, judges)}{_data_table(fig) if fig.plot else ''}"
            + "".join(_provenance(t.label(), t.records) for t in fig.tables))


def _csv(store: Store, t: Table, exp_id: str) -> pathlib.Path:
    root = fitted_root(store.root, t.fitted_to) if t.fitted_to else store.root
    return Store(root).experiment_dir(t.backend, exp_id) / "results.csv"


def expected_kinds(fig: Figure) -> list[str]:
    """The kinds of series the stored values call for: a kind with at least one value in this figure."""
    kinds = [t.what for t in fig.tables if any(r["mean"] is not None for r in t.rows)]
    return sorted(kinds + (["paper"] if fig.reference else []))


def write_report(store: Store, out_dir: Optional[pathlib.Path] = None,
                 papers: Optional[list[str]] = None) -> Optional[pathlib.Path]:
    """The report of every stored experiment, or of the experiments of `papers` only."""
    out_dir = out_dir or store.root / "report"
    fig_dir = out_dir / "figures"
    by_id: dict[str, dict[str, list[dict[str, Any]]]] = collections.defaultdict(dict)
    for backend, exp_id in store.experiments():
        records = list(store.points(backend, exp_id))
        if records:
            by_id[exp_id][backend] = records
    sections, toc = [], []
    tally: dict[str, dict[str, collections.Counter]] = collections.defaultdict(
        lambda: collections.defaultdict(collections.Counter))
    statements: collections.Counter = collections.Counter()
    measured_judges: set[str] = set()
    judged: list[Judged] = []
    fitted_any = False
    for exp_id in sorted(by_id):
        runs = by_id[exp_id]
        any_rec = next(iter(runs.values()))[0]
        paper = (any_rec["experiment"].get("paper") or {}).get("id") or "none"
        if papers and paper not in papers:
            continue
        model = Table(runs[kModel]) if kModel in runs else None
        measured = [b for b in sorted(runs) if b != kModel] or [None]
        conclusions = current_conclusions([r for rs in runs.values() for r in rs])
        statements[paper] += len(conclusions)
        for backend in measured:
            fitted = _fitted_table(store, backend, exp_id) if backend else None
            fitted_any = fitted_any or fitted is not None
            fig = Figure(Table(runs[backend]) if backend else None, model, fitted)
            stem = f"{backend or kModel}--{exp_id}"
            verdicts = judge(fig, conclusions)
            judges = ([backend] if backend else []) + [kModel] + ([kFittedJudge] if fitted else []) + [kPaperJudge]
            judged += [Judged(paper, exp_id, stem, c["statement"], vs) for c, vs in zip(conclusions, verdicts)]
            for vs in verdicts:
                for j, v in vs.items():
                    if j == backend or backend == measured[0]:  # the model and the paper once per experiment
                        tally[paper][j][v.status] += 1
            if backend:
                measured_judges.add(backend)
            counts = ", ".join(f"{t.label()}: {_status_counts(t.records)}" for t in fig.tables)
            toc.append(f'<li><a href="#{html.escape(stem)}">{_e(exp_id)}</a> <span class="muted">({_e(counts)})</span></li>')
            sections.append(_section(fig, stem, store, out_dir, fig_dir, conclusions, verdicts, judges))
    if not sections:
        return None
    summary = _summary(tally, statements, sorted(measured_judges) + [kModel] + ([kFittedJudge] if fitted_any else [])
                       + [kPaperJudge], judged)
    if fitted_any and not papers:
        summary += "".join(_score_section(store, b) for b in sorted(measured_judges))
    page = (f"<!doctype html><html><head><meta charset=\"utf-8\"><title>rdmalab report</title><style>{kCss}</style>"
            f"{kImageCheck}</head><body><h1>rdmalab report</h1><p class=\"muted\">generated {utc_now()} from {_e(store.root)}; "
            f"solid lines: measured; dashed: the model's prediction for the paper's NIC; dotted: the model with the "
            f"profile fitted to the measured backend, where one exists; stars: the papers' published "
            f"values; right panels: each kind divided by its own value at one point, so shapes compare</p>"
            f"{summary}<ul>{''.join(toc)}</ul>{''.join(sections)}</body></html>")
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "index.html"
    tmp = out_dir / ".index.html.tmp"
    tmp.write_text(page)
    os.replace(tmp, path)
    return path


def _score_section(store: Store, backend: str) -> str:
    """How well the model knows this NIC: `run_all.py score`'s table. A second run scored with
    `score --against DIR` beside it where the stored score names one that still exists."""
    stored = store.root / "score" / score_mod.kFileName
    against = None
    if stored.is_file():
        try:
            named = json.loads(stored.read_text()).get("against", {}).get("results")
        except (OSError, json.JSONDecodeError, AttributeError):
            named = None
        if named and (pathlib.Path(named) / backend).is_dir():
            against = pathlib.Path(named)
    doc = score_mod.score(store.root, backend, against)
    if not doc["experiments"]:
        return ""
    head = "".join(f'<th class="{"l" if c == "experiment" else ""}">{_e(c)}</th>' for c in score_mod.kColumns)
    body = "".join("<tr>" + "".join(f'<td class="{"l" if i == 0 else ""}">{_e(v)}</td>' for i, v in enumerate(r))
                   + "</tr>" for r in score_mod.rows(doc))
    warn = "".join(f'<p class="failed">warning: {_e(w)}</p>' for w in doc["warnings"])
    floor = ("a second run of the same suite scored against this one" if against else
             "no second run given (<code>./run_all.py score --against DIR</code> adds one)")
    return (f'<h2 id="score-{_e(backend)}">How well the model knows this NIC ({_e(backend)})</h2>'
            f'<p>The model with the profile fitted to {_e(backend)} ({_e(doc["profile"].get("name"))}) against what '
            f'{_e(backend)} measured, point by point as the figures pair them: the median |error|, the share within '
            f'+-30%, the rank agreement (Spearman) per experiment, beside the measurement\'s own spread (its '
            f'repeats\' coefficient of variation; {floor}). <code>./run_all.py score</code> prints the same and writes '
            f'it as JSON.</p>{warn}<table class="score" data-backend="{_e(backend)}"><tr>{head}</tr>{body}</table>')


def _fitted_table(store: Store, backend: str, exp_id: str) -> Optional[Table]:
    """The model's predictions of the experiment with the profile fitted to `backend`, if made."""
    root = fitted_root(store.root, backend)
    records = list(Store(root).points(kModel, exp_id)) if root.is_dir() else []
    return Table(records, fitted_to=backend) if records else None


def _status_counts(records: list[dict[str, Any]]) -> str:
    ok = sum(1 for r in records if r["status"] == "ok")
    skipped = collections.Counter(r["status"] for r in records if r["status"] in kNotRun)
    return f"{ok}/{len(records)} ok" + "".join(f", {n} {kNotRun[status]}" for status, n in sorted(skipped.items()))


def _provenance(label: str, records: list[dict[str, Any]]) -> str:
    revs = collections.Counter(
        f"{(r['provenance'].get('git') or {}).get('revision') or 'unknown'}"
        f"{' (dirty)' if (r['provenance'].get('git') or {}).get('dirty') else ''}" for r in records)
    hosts = sorted({f"{h['name']} ({h.get('launcher')}, {h.get('device')})" for r in records
                    for h in r["provenance"].get("hosts", [])})
    binaries = sorted({v for r in records for v in (r["provenance"].get("binary") or {}).get("versions", [])})
    providers = sorted({v for r in records for v in r["provenance"].get("provider_library", [])})
    runs = sorted({r["provenance"].get("run_id", "") for r in records})
    started = min(r["provenance"].get("started", "") for r in records)
    ended = max(r["provenance"].get("ended", "") for r in records)
    files = sorted({f"{r['experiment']['file']} (sha256 {r['experiment']['sha256'][:12]})" for r in records})
    pcie = sorted({str(v.get("reason") if isinstance(v, dict) and "reason" in v else v)
                   for r in records for v in [r["provenance"].get("pcie_measured")] if v})
    items = [("experiment file", "; ".join(files)), ("git revision", ", ".join(f"{k} ({n} points)" for k, n in revs.items())),
             ("runs", ", ".join(runs)), ("time", f"{started} .. {ended}"), ("hosts", ", ".join(hosts)),
             ("binary", ", ".join(binaries)), ("provider library", ", ".join(providers)),
             ("PCIe counters", "; ".join(pcie)[:400])]
    rows = "".join(f'<tr><th class="l">{_e(k)}</th><td class="l">{_e(v)}</td></tr>' for k, v in items)
    fails = [r for r in records if r["status"] not in kFinalStatuses]
    fail_html = ""
    if fails:
        lis = "".join(f"<li><code>{_e(r['point']['params'])}</code> #{r['point']['repeat']}: {_e(r['error'])}</li>"
                      for r in fails[:50])
        fail_html = f'<p class="failed">{len(fails)} failed point(s):</p><ul>{lis}</ul>'
    return f"<details><summary>provenance: {_e(label)}</summary><table>{rows}</table></details>{fail_html}"


