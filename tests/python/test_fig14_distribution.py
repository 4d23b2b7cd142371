"""nosql-fig14-distribution measured (issue 19, acceptance 1): the experiment file as shipped,
at a quick resolution (2 B and 64 B values, 0.2 s a point), runs rdmalab-bench's keyed READs
on softnic; every point is stored with what its READs touched, and the report draws the
figure and judges the paper's three conclusions on the run and on the model (where built)."""
import html
import json
import re
import shutil

import pytest

from conftest import kRoot, run_all

kBench = kRoot / "build" / "bin" / "rdmalab-bench"
kModelBin = kRoot / "build" / "bin" / "rdmalab-model"
kExpId = "nosql-fig14-distribution"

pytestmark = pytest.mark.skipif(not kBench.exists(), reason="rdmalab-bench not built")


def verdicts(page, judge):
    rows = re.findall(r'<tr class="conclusion" data-index="\d+">(.*?)</tr>', page)
    return [html.unescape(re.search(rf'data-judge="{judge}" data-verdict="([^"]*)"', r).group(1)) for r in rows]


def test_fig14_runs_keyed_reads_on_softnic_and_the_report_judges_its_conclusions(tmp_path, exp_dir):
    shutil.copy(kRoot / "experiments" / f"{kExpId}.yaml", exp_dir)
    (exp_dir / "suites.yaml").write_text(
        "fig14quick:\n  description: two value sizes, short points\n  experiments: [nosql-fig14-distribution]\n"
        "  reduce: {max_values: 2, repeats: 1, params: {duration: 0.2, warmup: 0.05}, timeout_s: 30}\n")
    out = tmp_path / "res"
    run_all("fig14quick", "--experiments-dir", exp_dir, "--out", out, "--no-report", check=0)
    points = [json.loads(p.read_text()) for p in (out / "softnic" / kExpId / "points").glob("*.json")]
    assert len(points) == 8  # 2 distributions x 2 placements x sizes 2 and 64
    for rec in points:
        assert rec["status"] == "ok", rec["error"]
        params = rec["point"]["params"]
        clients = [r["document"] for r in rec["roles"] if r["role"] == "client"]
        assert len(clients) == 2
        for doc in clients:
            reads = doc["results"][0]["key_reads"]
            assert (reads["distribution"], reads["placement"]) == (params["distribution"], params["placement"])
            assert reads["keys"] == params["keys"] == 4194304
            assert reads["highest_offset_bytes"] < reads["region_bytes"] == params["keys"] * params["size"]
    if kModelBin.exists():
        run_all("fig14quick", "--experiments-dir", exp_dir, "--backend", "model", "--model-bin", kModelBin,
                "--out", out, "--no-report", check=0)
    run_all("report", "--out", out, check=0)
    page = (out / "report" / "index.html").read_text()
    assert (out / "report" / "figures" / f"softnic--{kExpId}.png").stat().st_size > 0
    # Each statement judged on the run: holds or not with its ratio, never left unjudged.
    assert len(verdicts(page, "softnic")) == 3
    assert all(v in ("holds", "does not hold") for v in verdicts(page, "softnic")), verdicts(page, "softnic")
    if kModelBin.exists():  # the model's translation cache predicts every point
        assert all(v in ("holds", "does not hold") for v in verdicts(page, "model")), verdicts(page, "model")
