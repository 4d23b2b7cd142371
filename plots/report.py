"""The HTML report: every figure with its data table and provenance, from stored results
only, viewable offline (no external resources; images are files next to the page)."""
from __future__ import annotations

import collections
import html
import os
import pathlib
from typing import Any, Optional

from harness.store import Store, kFinalStatuses, kNotModeled, utc_now

from .figures import Table, draw, series_name

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
img.figure { max-width: 100%; border: 1px solid #ddd; }
details { margin: 0.5em 0; } code { font-size: 0.85em; }
"""


def _e(v: Any) -> str:
    return html.escape("" if v is None else str(v))


def _num(v: Optional[float]) -> str:
    return "" if v is None else f"{v:.4g}"


def _data_table(t: Table) -> str:
    p = t.plot
    head = "".join(f"<th>{_e(h)}</th>" for h in (p.get("facet"), series_name(p), p.get("x")) if h)
    out = [f"<table><tr>{head}<th>{_e(p.get('y'))} (mean)</th><th>stdev</th><th>n</th><th>failed</th>"
           "<th>paper</th><th class=\"l\">not modeled</th></tr>"]
    for r in t.rows:
        cells = "".join(f"<td>{_e(r[k])}</td>" for k, h in (("facet", p.get("facet")), ("series", series_name(p)),
                                                                ("x", p.get("x"))) if h)
        failed = f'<td class="failed">{r["failed"]}</td>' if r["failed"] else "<td>0</td>"
        out.append(f"<tr>{cells}<td>{_num(r['mean'])}</td><td>{_num(r['stdev'])}</td><td>{r['n']}</td>"
                   f"{failed}<td>{_num(r['paper'])}</td><td class=\"l muted\">{_e(r['not_modeled'])}</td></tr>")
    out.append("</table>")
    return "".join(out)


def _provenance(records: list[dict[str, Any]]) -> str:
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
    return f"<details><summary>provenance</summary><table>{rows}</table></details>{fail_html}"


def write_report(store: Store, out_dir: Optional[pathlib.Path] = None) -> Optional[pathlib.Path]:
    out_dir = out_dir or store.root / "report"
    fig_dir = out_dir / "figures"
    sections, toc = [], []
    for backend, exp_id in store.experiments():
        records = list(store.points(backend, exp_id))
        if not records:
            continue
        t = Table(records)
        stem = f"{backend}--{exp_id}"
        paths = draw(t, fig_dir, stem)
        ok = sum(1 for r in records if r["status"] == "ok")
        not_modeled = sum(1 for r in records if r["status"] == kNotModeled)
        anchor = html.escape(stem)
        counts = f"{ok}/{len(records)} ok" + (f", {not_modeled} not modeled" if not_modeled else "")
        toc.append(f'<li><a href="#{anchor}">{_e(exp_id)}</a> <span class="muted">({_e(backend)}, {counts})</span></li>')
        paper = t.experiment.get("paper") or {}
        cite = f" — {_e(paper.get('id'))} {_e(paper.get('figure'))}" if paper else ""
        fig_html = '<p class="failed">no figure: no point of this experiment succeeded</p>' if t.plot else ""
        if paths:
            png = os.path.relpath(paths["png"], out_dir)
            svg = os.path.relpath(paths["svg"], out_dir)
            fig_html = (f'<p><img class="figure" src="{_e(png)}" alt="{_e(exp_id)}"></p>'
                        f'<p class="muted"><a href="{_e(svg)}">SVG</a> · data: '
                        f'<a href="{_e(os.path.relpath(store.experiment_dir(backend, exp_id) / "results.csv", out_dir))}">CSV</a></p>')
        sections.append(
            f'<h2 id="{anchor}">{_e(exp_id)} <span class="muted">[{_e(backend)}]{cite}</span></h2>'
            f"<p>{_e(t.experiment.get('title'))}</p><p class=\"muted\">{_e(t.experiment.get('description'))}</p>"
            f"{fig_html}{_data_table(t) if t.plot else ''}{_provenance(records)}")
    if not sections:
        return None
    page = (f"<!doctype html><html><head><meta charset=\"utf-8\"><title>rdmalab report</title><style>{kCss}</style>"
            f"{kImageCheck}</head><body><h1>rdmalab report</h1><p class=\"muted\">generated {utc_now()} from {_e(store.root)}; "
            f"stars mark the papers' published values</p><ul>{''.join(toc)}</ul>{''.join(sections)}</body></html>")
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "index.html"
    tmp = out_dir / ".index.html.tmp"
    tmp.write_text(page)
    os.replace(tmp, path)
    return path
