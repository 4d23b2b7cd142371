"""Acceptance 6: the HTML report, opened offline in headless Chromium (Debian's package),
shows every figure: the page counts images that really decoded, and a screenshot is taken."""
import json
import os
import re
import shutil
import subprocess

import pytest

from conftest import kRoot, run_all, write_experiment

kChromium = shutil.which("chromium")
kBrowserTimeoutS = 90


def chromium(*args):
    # --no-sandbox: the tests run as root, where Chromium's sandbox refuses to start.
    return subprocess.run([kChromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           "--virtual-time-budget=5000", *args], capture_output=True, text=True,
                          timeout=kBrowserTimeoutS)


def loaded_images(page):
    dom = chromium("--dump-dom", page.as_uri()).stdout
    body = re.search(r"<body[^>]*>", dom)
    assert body, dom[:2000]
    attrs = dict(re.findall(r'(data-images-\w+)="([^"]*)"', body.group(0)))
    return int(attrs["data-images-total"]), int(attrs["data-images-loaded"]), attrs["data-images-broken"]


@pytest.mark.skipif(kChromium is None, reason="chromium not installed (scripts/install-deps.sh installs it)")
def test_report_figures_load_in_headless_chromium(tmp_path, exp_dir):
    line = write_experiment(exp_dir, "lines", """
        title: a line figure with repeats and a paper reference
        mode: lat
        roles: {server: {}, client: {count: 2}}
        sweep: {grid: {size: [8, 64, 512], verb: [read, write]}}
        repeats: 2
        plot: {x: size, y: mops, series: verb, role: client, xlog: true}
        reference: [{x: 64, series: read, y: 25}]
        """)
    bars = write_experiment(exp_dir, "bars", """
        title: a bar figure with facets
        mode: tput
        labels: [step]
        roles: {server: {}, client: {}}
        sweep: {grid: {step: [basic, tuned], size: [32], threads: [1, 2]}}
        plot: {kind: bar, x: step, y: mops, facet: threads}
        """)
    table = write_experiment(exp_dir, "table", """
        title: a table figure
        mode: tput
        roles: {server: {}, client: {}}
        sweep: {grid: {size: [16, 32]}}
        plot: {kind: table, x: size, y: gbps}
        """)
    out = tmp_path / "res"
    run_all(line, bars, table, "--out", out, check=0)
    page = out / "report" / "index.html"
    total, loaded, broken = loaded_images(page)
    assert (total, loaded, broken) == (3, 3, "")
    shot = tmp_path / "report.png"
    r = chromium(f"--screenshot={shot}", "--window-size=1280,2400", page.as_uri())
    assert shot.exists() and shot.read_bytes()[:4] == b"\x89PNG", r.stderr[-2000:]
    assert shot.stat().st_size > 20_000  # a blank page is a few kB
    if os.environ.get("RDMALAB_SCREENSHOT"):
        shutil.copy(shot, os.environ["RDMALAB_SCREENSHOT"])
    # The check itself can fail: a missing figure file is reported as broken.
    (out / "report" / "figures" / "softnic--bars.png").unlink()
    total, loaded, broken = loaded_images(page)
    assert (total, loaded, broken) == (3, 2, "figures/softnic--bars.png")


kModelBin = kRoot / "build" / "bin" / "rdmalab-model"
kKindIds = {"measured": "rdl-measured-", "predicted": "rdl-predicted-", "paper": "rdl-paper-"}


def stored_kinds(out, backend, exp_id, has_reference):
    """The kinds of series a figure must show, from the stored points alone (not from the report)."""
    kinds = set()
    for b, kind in ((backend, "measured"), ("model", "predicted")):
        for p in (out / b / exp_id / "points").glob("*.json"):
            rec = json.loads(p.read_text())
            if rec["status"] == "ok" and rec["headline"] and rec["headline"]["value"] is not None:
                kinds.add(kind)
    return kinds | ({"paper"} if has_reference else set())


@pytest.mark.skipif(kChromium is None, reason="chromium not installed (scripts/install-deps.sh installs it)")
@pytest.mark.skipif(not kModelBin.exists(), reason=f"{kModelBin} not built")
def test_every_figure_shows_measured_predicted_and_published_series(tmp_path, exp_dir):
    """Acceptance 3 of issue 19: in headless Chromium every figure loads, and its SVG holds a series of
    each kind the stored results call for: this run's, the model's and the paper's."""
    both = write_experiment(exp_dir, "both", """
        title: measured, predicted and published
        mode: lat
        params: {verb: write}
        roles: {server: {}, client: {}}
        sweep: {grid: {size: [8, 64, 512]}}
        plot: {x: size, y: lat_us_mean, role: client, xlog: true}
        reference: [{x: 64, y: 1.6}]
        """)
    measured_only = write_experiment(exp_dir, "nopaper", """
        title: no published values
        mode: lat
        roles: {server: {}, client: {}}
        sweep: {grid: {size: [16, 32], verb: [read, write]}}
        plot: {x: size, y: mops, series: verb, role: client}
        """)
    out = tmp_path / "res"
    run_all(both, measured_only, "--out", out, "--no-report", check=0)
    run_all(both, "--backend", "model", "--model-bin", kModelBin, "--out", out, check=0)
    page = out / "report" / "index.html"
    total, loaded, broken = loaded_images(page)
    assert (total, loaded, broken) == (2, 2, "")
    figures = re.findall(r'<figure data-experiment="([^"]+)" data-svg="([^"]+)"', page.read_text())
    assert sorted(e for e, _ in figures) == ["both", "nopaper"]
    for exp_id, svg in figures:
        expected = stored_kinds(out, "softnic", exp_id, exp_id == "both")
        # Chromium parses the SVG as the browser shows it; the ids name the kind of every drawn series.
        dom = chromium("--dump-dom", (page.parent / svg).as_uri()).stdout
        drawn = {kind for kind, prefix in kKindIds.items() if f'id="{prefix}' in dom}
        assert drawn == expected, (exp_id, drawn, expected)
    assert stored_kinds(out, "softnic", "both", True) == {"measured", "predicted", "paper"}
    # The check can fail: a figure drawn without the model's series is caught.
    (out / "model").rename(out / "model-hidden")
    run_all("report", "--out", out, check=0)
    dom = chromium("--dump-dom", (page.parent / "figures" / "softnic--both.svg").as_uri()).stdout
    assert 'id="rdl-predicted-' not in dom and 'id="rdl-measured-' in dom
