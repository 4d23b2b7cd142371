"""Figures a reader trusts at a glance (issue 34, acceptance 2): in every figure drawn from stored
results, no text says "None" or an internal key=value string, no two pieces of text overlap and no
text runs outside the figure. Checked from matplotlib's own text extents: each figure is drawn with
the Agg renderer and the window extents of every drawn text (titles, axis labels, the tick labels
drawn, legend entries, notes, table cells) are compared.

End to end on a model-backend store of a few experiments (run_all.py, a few seconds) with a softnic
table made from the same points, as a softnic run stores them (no `profile` parameter), and the
model's points again as the predictions with a profile fitted to softnic (drawn dotted).
RDMALAB_FIGURE_STORE=DIR checks every figure of the results in DIR too (e.g. a default run's)."""
import copy
import itertools
import json
import os
import pathlib
import re
import shutil

import matplotlib
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.text import Text  # noqa: E402

from conftest import kRoot, run_all  # noqa: E402
from harness.store import Store  # noqa: E402
from plots import labels  # noqa: E402
from plots.figures import Figure, Table, _figure  # noqa: E402
from plots.report import _fitted_table  # noqa: E402

kModel = kRoot / "build" / "bin" / "rdmalab-model"
# One experiment per kind of figure that went wrong: compound series with a parameter softnic does
# not carry and a log y axis (fig10), bars with facets and kv systems (herd14 fig9), designs (fig7),
# booleans of a series (fig9 batching), a table, base-2 log x axes over many octaves (roce fig4-5,
# appendix A), facets by QPs, request/response pairs on bars (herd14 fig5), notes of points not modeled
# and three rows of facets (nosql figs 9-11).
kExperiments = ["guide16-fig10-drtm", "herd14-fig9-kv", "guide16-fig7-sequencer", "guide16-fig9-herd-batching",
                "guide16-table3", "guide16-fig11-udsend", "nosql-fig20-uniformity", "herd14-fig3-inbound",
                "herd14-fig5-echo", "nosql-fig9-10-11-memory", "roce-fig4-5-rcuc", "guide16-appendixA"]
kKeyValue = re.compile(r"\b[A-Za-z_][A-Za-z0-9_/]*=[^\s=]")
kSlackPx = 1.0  # extents are rounded to pixels
kUnit = re.compile(r"\((Mops|Gb/s|us|ratio|bytes)\)|\b(Mops|Gb/s|bytes|ratio)\b")  # what a value axis counts in


def drawn_texts(fig):
    """(text, window extent, the axes it belongs to or None) of every non-empty text the figure draws."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    tick_texts, drawn_ticks = set(), set()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                tick_texts.update({id(tick.label1), id(tick.label2)})
            if ax.axison and axis.get_visible():
                for tick in axis._update_ticks():  # the ticks within the view, the ones drawn
                    drawn_ticks.update({id(tick.label1), id(tick.label2)})
    out = []
    for t in fig.findobj(Text):
        if not t.get_visible() or not t.get_text().strip():
            continue
        if id(t) in tick_texts and id(t) not in drawn_ticks:
            continue
        out.append((t.get_text(), t.get_window_extent(renderer), t.axes))
    return out


def text_problems(fig):
    """What a reader would trip over: internal names, overlapping text, text cut at the border."""
    problems = []
    width, height = fig.canvas.get_width_height()
    texts = drawn_texts(fig)
    fig.canvas.draw()
    panels = [(ax, ax.get_window_extent()) for ax in fig.axes if ax.axison]
    for text, box, owner in texts:
        if re.search(r"\bNone\b", text):
            problems.append(f"says None: {text!r}")
        if kKeyValue.search(text):
            problems.append(f"internal key=value: {text!r}")
        if box.x0 < -kSlackPx or box.y0 < -kSlackPx or box.x1 > width + kSlackPx or box.y1 > height + kSlackPx:
            problems.append(f"outside the figure ({width}x{height}): {text!r} at {box.bounds}")
        for ax, panel in panels:  # a label of one panel (or of the figure) drawn over another panel
            if ax is not owner and overlap(box, panel):
                problems.append(f"over a panel: {text!r} over the panel titled {ax.get_title()!r}")
    for (a, box_a, _), (b, box_b, _) in itertools.combinations(texts, 2):
        if overlap(box_a, box_b):
            problems.append(f"overlap: {a!r} and {b!r}")
    return problems


def overlap(a, b):
    w = min(a.x1, b.x1) - max(a.x0, b.x0)
    h = min(a.y1, b.y1) - max(a.y0, b.y0)
    return w > kSlackPx and h > kSlackPx


def figures(store):
    """(stem, matplotlib figure) of every stored experiment, as the report draws them."""
    runs = {}
    for backend, exp_id in store.experiments():
        records = list(store.points(backend, exp_id))
        if records:
            runs.setdefault(exp_id, {})[backend] = records
    for exp_id, by_backend in sorted(runs.items()):
        model = Table(by_backend["model"]) if "model" in by_backend else None
        for backend in [b for b in sorted(by_backend) if b != "model"] or [None]:
            fitted = _fitted_table(store, backend, exp_id) if backend else None
            fig = _figure(Figure(Table(by_backend[backend]) if backend else None, model, fitted), exp_id)
            if fig is not None:
                yield f"{backend or 'model'}--{exp_id}", fig


def as_softnic(records):
    """The model's points as a softnic run stores them: no NIC profile among the parameters, and
    throughputs within one decade (3 to 9 Mops), where a log axis used to print "9 x 10^0"; fig10's
    Connect-IB points stand for softnic's same-bits lock placement."""
    out = []
    for rec in records:
        rec = copy.deepcopy(rec)
        rec["backend"] = "softnic"
        if rec["point"]["params"].pop("profile", None) == "cib" and "lock_placement" in rec["point"]["params"]:
            rec["point"]["params"]["lock_placement"] = "same-bits"  # softnic sweeps both placements
        for role in rec.get("roles") or []:
            for res in (role.get("document") or {}).get("results") or []:
                if isinstance(res.get("mops"), (int, float)):
                    res["mops"] = 3 + 6 * min(res["mops"], 100) / 100
        out.append(rec)
    return out


@pytest.fixture(scope="module")
def model_store(tmp_path_factory):
    if not kModel.exists():
        pytest.skip("rdmalab-model not built")
    out = tmp_path_factory.mktemp("figtext") / "res"
    run_all(*kExperiments, "--backend", "model", "--out", out, "--no-report", check=0)
    # A softnic run of fig10 beside the model's: its series carry no profile.
    src = out / "model" / "guide16-fig10-drtm" / "points"
    dst = out / "softnic" / "guide16-fig10-drtm" / "points"
    dst.mkdir(parents=True)
    fitted = out / "fitted" / "softnic" / "model" / "guide16-fig10-drtm" / "points"
    fitted.mkdir(parents=True)
    for path in src.glob("*.json"):
        rec = as_softnic([json.loads(path.read_text())])[0]
        (dst / path.name).write_text(json.dumps(rec))
        shutil.copy(path, fitted / path.name)
    return Store(out)


def test_every_figure_has_human_labels_no_overlap_and_nothing_cut(model_store):
    problems, stems = [], []
    for stem, fig in figures(model_store):
        stems.append(stem)
        problems += [f"{stem}: {p}" for p in text_problems(fig)]
        for ax in fig.axes:  # units on every value axis
            if ax.axison and not kUnit.search(ax.get_ylabel()):
                problems.append(f"{stem}: y label without a unit: {ax.get_ylabel()!r}")
            if not ax.axison and not kUnit.search(ax.get_title()):
                problems.append(f"{stem}: table title without a unit: {ax.get_title()!r}")
        plt.close(fig)
    assert "softnic--guide16-fig10-drtm" in stems and len(stems) == len(kExperiments), stems
    assert not problems, "\n".join(problems)


def test_series_labels_name_systems_verbs_and_designs_by_their_display_names(model_store):
    legends = {}
    for stem, fig in figures(model_store):
        legends[stem] = [t.get_text() for leg in fig.legends for t in leg.get_texts()]
        plt.close(fig)
    legend = legends.__getitem__
    assert "softnic: locks 4 KiB apart" in legend("softnic--guide16-fig10-drtm")
    assert "model fitted to softnic: ConnectX-3, locks 8 B apart" in legend("softnic--guide16-fig10-drtm")
    assert "model: ConnectX-3, locks 8 B apart" in legend("softnic--guide16-fig10-drtm")
    kv = legend("model--herd14-fig9-kv")
    assert any(t.endswith(": FaRM-em-VAR") for t in kv) and any(t.endswith(": Pilaf-em-OPT") for t in kv), kv
    seq = legend("model--guide16-fig7-sequencer")
    assert {"model (ConnectX-3): HERD-RPC + batching", "model (ConnectX-3): Spec-S0"} <= set(seq) or \
        any(t.endswith(": HERD-RPC + multi-queue") for t in seq), seq
    batching = legend("model--guide16-fig9-herd-batching")
    assert any(t.endswith(": HERD, batching") for t in batching) and any(t.endswith(": HERD, no batching") for t in batching)
    assert any(t.endswith(": READ-based bound") for t in batching), batching
    assert any(t.endswith(": UC WRITE") for t in legend("model--herd14-fig3-inbound"))


@pytest.mark.parametrize("plot, key, label", [
    ({"series": ["profile", "lock_placement"]}, "None/same-bits", "locks 4 KiB apart"),
    ({"series": "system"}, "farm-var", "FaRM-em-VAR"),
    ({"series": ["verb", "connection"]}, "write/UC", "UC WRITE"),
    ({"series": ["verb", "connection"]}, "read/RC", "RC READ"),
    ({"series": ["system", "batching"]}, "herd/False", "HERD, no batching"),
    ({"series": ["system", "batching"]}, "read-based/None", "READ-based bound"),
    ({"series": "design"}, "herd-rpc-batch", "HERD-RPC + batching"),
    ({"series": "post_list"}, 16, "Doorbell batch 16"),
    ({"series": ["system", "put_fraction"]}, "pilaf/1.0", "Pilaf-em-OPT, 100% PUTs"),
])
def test_series_label(plot, key, label):
    assert labels.series(plot, key) == label


def descriptions():
    """The programs' descriptions: the stored fixtures, and the built programs' where built."""
    docs = {p.stem: json.loads(p.read_text()) for p in (kRoot / "tests" / "python" / "data" / "describe").glob("*.json")}
    for prog in labels.kPrograms:
        if (kRoot / "build" / "bin" / prog).exists():
            from harness.describe import describe
            d = describe(kRoot / "build" / "bin" / prog)
            docs[f"built {prog}"] = {"systems": [{"name": s.name, "display": s.display, "summary": s.summary}
                                                 for s in d.systems.values()],
                                     "params": [{"name": p.name, "choices": list(p.choices or [])}
                                                for p in d.params.values()]}
    return docs


def test_every_described_system_design_and_verb_has_a_display_name():
    """A system, design or verb added to a program's table without a display name fails here."""
    missing = []
    for prog, doc in descriptions().items():
        for s in doc.get("systems") or []:
            if not s.get("display"):
                missing.append(f"{prog}: system {s['name']} ({s.get('summary')}) has no display in its row")
        for p in doc.get("params") or []:
            table = labels.kChoices.get(p["name"]) if p["name"] in ("design", "verb", "request", "response") else None
            for choice in (p.get("choices") or []) if table is not None else []:
                if choice not in table:
                    missing.append(f"{prog}: {p['name']} {choice}")
    assert not missing, "add a display name (a system's in its row, else in plots/labels.py) for: " + "; ".join(missing)


def test_display_names_are_the_ones_the_kv_programs_summaries_use():
    """The kv systems' display names come from their tables: each summary names the system so."""
    for prog, doc in descriptions().items():
        for s in doc.get("systems") or []:
            display = s["display"]
            base = display.split(" (")[0].split(" ")[0]
            if s["name"] in ("memcached", "redis", "read-based"):
                base = {"memcached": "memcached", "redis": "red", "read-based": "READ-based"}[s["name"]]
            assert base.lower() in s["summary"].lower(), (prog, s["name"], display, s["summary"])


def test_every_model_profile_has_a_display_name():
    names = [re.search(r"^name:\s*(\S+)", p.read_text(), re.M).group(1) for p in (kRoot / "model" / "profiles").glob("*.yaml")]
    assert names and not [n for n in names if n not in labels.kProfiles], names


@pytest.mark.parametrize("v, text", [(9, "9"), (0.5, "0.5"), (100, "100"), (16384, "16.4k"), (2e6, "2M")])
def test_plain_ticks(v, text):
    from plots.figures import _plain
    assert _plain(v) == text


@pytest.mark.parametrize("v, text", [(4, "4"), (1024, "1024"), (8192, "8192"), (16384, "16Ki"), (65536, "64Ki"),
                                     (1 << 20, "1Mi")])
def test_binary_ticks(v, text):
    from plots.figures import _binary
    assert _binary(v) == text


def test_the_report_of_the_store_writes_every_figure(model_store, tmp_path):
    from plots.report import write_report
    out = tmp_path / "report"
    shutil.rmtree(out, ignore_errors=True)
    page = write_report(model_store, out)
    assert page is not None
    assert len(list((out / "figures").glob("*.svg"))) == len(kExperiments)
    # The data tables name series by their labels; the experiment file's spelling is in the title.
    html = page.read_text()
    assert '<td title="profile/lock_placement=None/same-bits">locks 4 KiB apart</td>' in html
    tables = re.findall(r'<table><tr><th title=.*?</table>', html)
    assert len(tables) == len(kExperiments)
    assert not [t for t in tables if re.search(r">[^<]*\bNone\b[^<]*<", t)]


def test_the_check_finds_overlap_cut_text_and_internal_names():
    """The checker is not vacuous: what the old figures had, it reports."""
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.set_ylabel("relative to None/spread, put_fraction=0.0")
    ax.text(0.5, 0.5, "one label", transform=ax.transAxes)
    ax.text(0.52, 0.5, "another label", transform=ax.transAxes)
    fig.text(0.9, 0.5, "runs past the right border")
    problems = text_problems(fig)
    plt.close(fig)
    assert any(p.startswith("says None") for p in problems), problems
    assert any(p.startswith("internal key=value") for p in problems), problems
    assert any(p.startswith("overlap: 'one label' and 'another label'") for p in problems), problems
    assert any(p.startswith("outside the figure") and "runs past" in p for p in problems), problems


def test_the_check_finds_a_label_over_the_next_panel():
    """The old fig10: the right panel's long y label ran over the left panel."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(6, 3))
    fig.subplots_adjust(wspace=0.05)
    right.set_ylabel("relative to None/same-bits, put_fraction=0.0")
    problems = text_problems(fig)
    plt.close(fig)
    assert any(p.startswith("over a panel:") for p in problems), problems


def test_a_log_axis_within_one_decade_reads_plain_numbers(model_store):
    """softnic alone (3 to 9 Mops on fig10's log y axis): ticks such as 4, 5, 6, 8, never 9 x 10^0."""
    fig = _figure(Figure(Table(list(model_store.points("softnic", "guide16-fig10-drtm"))), None), "fig10")
    problems = text_problems(fig)
    ax = fig.axes[0]
    ticks = [t.get_text() for t in ax.yaxis.get_ticklabels() if t.get_text()]
    plt.close(fig)
    assert not problems, problems
    assert len(ticks) >= 3 and all(re.fullmatch(r"[0-9.]+", t) for t in ticks), ticks


def test_figures_of_a_small_fake_bench_store_read_cleanly(tmp_path, exp_dir):
    """Without any built program: the fake bench's points (a log y axis within one decade, compound
    verb/connection series, facets, bars of a boolean series) draw with readable labels only."""
    from conftest import write_experiment
    lines = write_experiment(exp_dir, "lines", """
        title: inbound throughput by verb and transport
        mode: tput
        roles: {server: {}, client: {}}
        sweep: {grid: {threads: [1, 2], size: [8, 64, 512]}, zip: {verb: [read, write], connection: [RC, UC]}}
        plot: {x: size, y: mops, series: [verb, connection], facet: threads, role: client, xlog: true, ylog: true,
               xlabel: payload (bytes), ylabel: throughput (Mops)}
        """)
    bars = write_experiment(exp_dir, "bars", """
        title: header-only SENDs
        mode: tput
        roles: {server: {}, client: {}}
        params: {verb: send, connection: UD}
        sweep: {grid: {direction: [inbound, outbound], header_only: [false, true]}}
        plot: {kind: bar, x: direction, y: mops, series: header_only, role: client, ylabel: throughput (Mops)}
        """)
    out = tmp_path / "res"
    run_all(lines, bars, "--out", out, "--no-report", check=0)
    drawn = dict(figures(Store(out)))
    assert sorted(drawn) == ["softnic--bars", "softnic--lines"]
    legends = {stem: [t.get_text() for leg in fig.legends for t in leg.get_texts()] for stem, fig in drawn.items()}
    problems = [f"{stem}: {p}" for stem, fig in drawn.items() for p in text_problems(fig)]
    titles = [ax.get_title() for ax in drawn["softnic--lines"].axes]
    plt.close("all")
    assert not problems, "\n".join(problems)
    assert legends["softnic--lines"] == ["softnic: RC READ", "softnic: UC WRITE"], legends
    assert legends["softnic--bars"] == ["softnic: with payload", "softnic: header only"], legends
    assert "1 thread: absolute" in titles and "2 threads: absolute" in titles, titles


@pytest.mark.skipif(not os.environ.get("RDMALAB_FIGURE_STORE"), reason="RDMALAB_FIGURE_STORE=DIR names a results directory")
def test_every_figure_of_a_stored_run_reads_cleanly():
    """Acceptance 2 on a real run: RDMALAB_FIGURE_STORE=results/ after scripts/run checks every
    figure of the default report (minutes: it draws them all)."""
    store = Store(pathlib.Path(os.environ["RDMALAB_FIGURE_STORE"]))
    problems, stems = [], []
    for stem, fig in figures(store):
        stems.append(stem)
        problems += [f"{stem}: {p}" for p in text_problems(fig)]
        plt.close(fig)
    print(f"{len(stems)} figures checked")
    assert stems and not problems, "\n".join(problems)
