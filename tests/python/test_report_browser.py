"""Acceptance 6: the HTML report, opened offline in headless Chromium (Debian's package),
shows every figure: the page counts images that really decoded, and a screenshot is taken."""
import os
import re
import shutil
import subprocess

import pytest

from conftest import run_all, write_experiment

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
