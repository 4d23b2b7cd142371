"""The `model` suite end to end (acceptance 5): every experiment of the spec is evaluated by
the real rdmalab-model, every point is a prediction or explicitly not modeled, and every
experiment gets a figure. RDMALAB_MODEL_BIN overrides the model executable (default
build/bin/rdmalab-model)."""
import json
import os
import pathlib
import time

import pytest

from conftest import described_bin_dir, kRoot, run_all

kModelBin = pathlib.Path(os.environ.get("RDMALAB_MODEL_BIN", kRoot / "build" / "bin" / "rdmalab-model"))
kSuiteBudgetS = 60    # acceptance: under 2 minutes on this machine; the suite takes ~20 s
# The experiment ids of the four papers' figures and tables, one YAML each under experiments/.
kSpecIds = [
    "herd14-fig2-latency", "herd14-fig3-inbound", "herd14-fig4-outbound", "herd14-fig5-echo",
    "herd14-fig6-alltoall", "herd14-fig7-prefetch", "herd14-fig9-kv", "herd14-fig10-valuesize",
    "herd14-fig11-latency", "herd14-fig12-clients", "herd14-fig13-cores", "herd14-fig14-skew",
    "guide16-fig7-sequencer", "guide16-fig8-spec-latency", "guide16-fig9-herd-batching", "guide16-fig10-drtm",
    "guide16-fig11-udsend", "guide16-fig12-inbound", "guide16-fig13-wqe-cache", "guide16-fig14-atomics",
    "guide16-table3", "guide16-table4", "guide16-table5", "guide16-fig2b", "guide16-table1", "guide16-appendixA",
    "nosql-fig12-uniform", "nosql-fig13-rwratio", "nosql-fig14-distribution", "nosql-fig15-zipf",
    "nosql-fig16-17-latency", "nosql-fig18-payload", "nosql-fig19-valuesize", "nosql-fig20-uniformity",
    "nosql-fig9-10-11-memory",
    "roce-fig4-5-rcuc", "roce-fig6-7-ethernet", "roce-fig8-batch-latency", "roce-fig9-10-sgbatch",
]


def test_every_spec_experiment_has_a_file():
    files = sorted(p.stem for p in (kRoot / "experiments").glob("*.yaml") if p.name != "suites.yaml")
    assert files == sorted(kSpecIds)


@pytest.mark.skipif(not kModelBin.exists(), reason=f"{kModelBin} not built")
def test_model_suite_predicts_every_point_and_draws_every_figure(tmp_path):
    out = tmp_path / "res"
    t0 = time.monotonic()
    r = run_all("model", "--model-bin", kModelBin, "--out", out, check=0)
    elapsed = time.monotonic() - t0
    assert elapsed < kSuiteBudgetS, f"model suite took {elapsed:.0f} s"
    statuses = {}
    for exp_id in kSpecIds:
        points = [json.loads(p.read_text()) for p in (out / "model" / exp_id / "points").glob("*.json")]
        assert points, f"{exp_id}: no point stored\n{r.stderr[-2000:]}"
        for rec in points:
            statuses[rec["status"]] = statuses.get(rec["status"], 0) + 1
            assert rec["status"] in ("ok", "not_modeled"), f"{exp_id} {rec['point']['params']}: {rec['error']}"
            assert rec["roles"][0]["document"]["prediction"] is True
            if rec["status"] == "not_modeled":
                assert rec["not_modeled"] and rec["roles"][0]["document"]["results"] == []
            else:
                assert rec["headline"]["value"] is not None, f"{exp_id} {rec['point']['params']}: no {rec['headline']}"
        assert (out / "report" / "figures" / f"model--{exp_id}.png").stat().st_size > 0, exp_id
    assert statuses["ok"] > 500 and statuses["not_modeled"] > 0
    index = json.loads((out / "index.json").read_text())
    assert {e["status"] for e in index["points"]} == {"ok", "not_modeled"}


@pytest.mark.skipif(not kModelBin.exists(), reason=f"{kModelBin} not built")
def test_published_formula_values_come_out_of_the_model(tmp_path):
    out = tmp_path / "res"
    run_all("guide16-appendixA", "guide16-table1", "--backend", "model", "--model-bin", kModelBin, "--out", out,
            "--no-report", check=0)
    for exp_id in ("guide16-appendixA", "guide16-table1"):
        for rec in (json.loads(p.read_text()) for p in (out / "model" / exp_id / "points").glob("*.json")):
            for ref in rec["experiment"]["reference"]:
                params = rec["point"]["params"]
                plot = rec["experiment"]["plot"]
                if (params[plot["x"]] == ref["x"] and params.get(plot.get("series"), ref.get("series")) == ref.get("series")
                        and params.get(plot.get("facet"), ref.get("facet")) == ref.get("facet")):
                    assert rec["headline"]["value"] == ref["y"], (exp_id, params)


def test_a_model_only_experiment_on_softnic_is_a_one_line_error_and_suites_skip_it(tmp_path):
    r = run_all("guide16-fig2b", "--backend", "softnic", "--out", tmp_path / "res", "--dry-run", check=2)
    assert "experiment guide16-fig2b does not run on backend softnic; its backends: model" in r.stderr
    bin_dir = described_bin_dir(tmp_path / "bin")  # a dry run needs the programs' descriptions only
    for suite in ("default", "smoke", "quick", "full"):
        r = run_all(suite, "--dry-run", "--bin-dir", bin_dir, "--out", tmp_path / "res", check=0)
        if suite != "smoke":  # smoke lists verb-level experiments only
            assert "skipped on backend softnic (not among their backends): " in r.stderr, suite
            assert "guide16-fig2b (model)" in r.stderr, suite
        assert "guide16-fig8-spec-latency" in r.stderr or suite == "smoke", suite
