"""Every run also predicts its experiments on the model (issue 34, item 1 and acceptance 3): after a
run on softnic, the same experiments on the model for the paper's NIC, drawn dashed; with a profile
fitted to softnic in the model's profile directory, a second prediction with it, in its own store,
drawn dotted; `--no-model` leaves both out. The report opens with "what this run says", whose
table has the model judged for every paper, in headless Chromium as a reader sees it.

fake_bench stands in for rdmalab-bench (the model predicts its lat points as rdmalab-bench's);
the model is the built rdmalab-model. About 10 s on an idle machine."""
import re
import shutil
import statistics

import pytest

from conftest import kRoot, run_all, write_experiment
from test_report_browser import chromium, kChromium

kModelBin = kRoot / "build" / "bin" / "rdmalab-model"
kSoftnic = kRoot / "build" / "bin" / "softnic"

kBody = """
        title: {title}
        mode: lat
        paper: {{id: {paper}, figure: "Figure 1"}}
        roles: {{server: {{}}, client: {{}}}}
        sweep: {{grid: {{size: [8, 512], verb: [read, write]}}}}
        plot: {{x: size, y: lat_us_mean, series: verb, role: client, xlog: true, ylabel: latency (us)}}
        reference: [{{x: 8, series: read, y: 2.0}}, {{x: 512, series: read, y: 3.5}}]
        conclusions:
          - statement: READ latency grows from 8 B to 512 B
            trend: {{series: read, from: 8, to: 512}}
            ratio_at_least: 1.0
          - statement: WRITE is faster than READ at 512 B
            compare: {{a: {{series: read, x: 512}}, b: {{series: write, x: 512}}}}
            ratio_at_least: 1.0
        """

pytestmark = [pytest.mark.skipif(not kModelBin.exists(), reason=f"{kModelBin} not built"),
              pytest.mark.skipif(not kSoftnic.exists(), reason=f"{kSoftnic} not built")]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """One run of two papers' experiments on softnic, with a profile 'fitted to softnic' (a copy of
    cx3's, for the test) in a profile directory of its own."""
    root = tmp_path_factory.mktemp("modelpass")
    exp_dir = root / "experiments"
    exp_dir.mkdir()
    profiles = root / "profiles"
    shutil.copytree(kRoot / "model" / "profiles", profiles)
    (profiles / "softnic.yaml").write_text((profiles / "cx3.yaml").read_text().replace("name: cx3", "name: softnic", 1))
    files = [write_experiment(exp_dir, f"{paper}-lat", kBody.format(title=f"{paper}'s latency", paper=paper))
             for paper in ("herd14", "roce")]
    out = root / "res"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RDMALAB_MODEL_PROFILES", str(profiles))  # rdmalab-model's and the harness's profile directory
        r = run_all(*files, "--out", out, check=0, model=True)
    return out, r, profiles


def test_a_run_stores_the_models_predictions_and_the_fitted_profiles_beside_its_own(run):
    out, r, _ = run
    for exp_id in ("herd14-lat", "roce-lat"):
        assert len(list((out / "softnic" / exp_id / "points").glob("*.json"))) == 4
        assert len(list((out / "model" / exp_id / "points").glob("*.json"))) == 4
        assert len(list((out / "fitted" / "softnic" / "model" / exp_id / "points").glob("*.json"))) == 4
    assert "predicting 2 experiment(s) on the model for the papers' NICs" in r.stderr
    assert "the profile fitted to softnic" in r.stderr
    page = (out / "report" / "index.html").read_text()
    assert 'How well the model knows this NIC (softnic)' in page and 'class="score" data-backend="softnic"' in page
    svg = (out / "report" / "figures" / "softnic--herd14-lat.svg").read_text()
    for kind in ("measured", "predicted", "fitted", "paper"):
        assert f'id="rdl-{kind}-' in svg, kind


def summary_cells(dom):
    """{(paper, judge): (holds, fails, unjudged)} of the top table, as Chromium parsed the page."""
    cells = re.findall(r'data-paper="([^"]+)" data-judge="([^"]+)" data-holds="(\d+)" data-fails="(\d+)" '
                       r'data-unjudged="(\d+)"', dom)
    return {(p, j): tuple(map(int, n)) for p, j, *n in cells}


@pytest.mark.skipif(kChromium is None, reason="chromium not installed (scripts/install-deps.sh installs it)")
def test_the_report_opens_with_what_the_run_says_and_the_model_judged_for_every_paper(run):
    out, _, _ = run
    dom = chromium("--dump-dom", (out / "report" / "index.html").as_uri()).stdout
    assert dom.index('id="summary">What this run says') < dom.index("<figure")
    cells = summary_cells(dom)
    for paper in ("herd14", "roce"):
        for judge in ("softnic", "model", "fitted"):
            holds, fails, unjudged = cells[(paper, judge)]
            assert holds + fails == 2 and unjudged == 0, (paper, judge, cells[(paper, judge)])
    # The disagreements, if any, link to their figures.
    for link in re.findall(r'<li class="disagreement"[^>]*>.*?<a href="#([^"]+)"', dom):
        assert f'id="{link}"' in dom


def test_no_model_leaves_the_predictions_out(tmp_path, exp_dir):
    path = write_experiment(exp_dir, "herd14-lat", kBody.format(title="latency", paper="herd14")
                            .replace("size: [8, 512], verb: [read, write]", "size: [8, 512], verb: [read]")
                            .replace("a: {series: read, x: 512}, b: {series: write, x: 512}",
                                     "a: {series: read, x: 512}, b: {series: read, x: 8}"))
    out = tmp_path / "res"
    run_all(path, "--out", out, "--no-model", "--no-report", check=0, model=True)
    assert (out / "softnic" / "herd14-lat").is_dir() and not (out / "model").exists() and not (out / "fitted").exists()


def test_score_pairs_the_fitted_predictions_with_the_run_and_a_second_run_is_its_floor(run):
    import json

    import jsonschema
    out, _, profiles = run
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RDMALAB_MODEL_PROFILES", str(profiles))  # score reads the fitted profile the run predicted with
        r = run_all("score", "--out", out, "--against", out, check=0)
    doc = json.loads((out / "score" / "score.json").read_text())
    jsonschema.validate(doc, json.loads((kRoot / "docs" / "schemas" / "rdmalab-score.schema.json").read_text()))
    assert doc["backend"] == "softnic" and doc["profile"]["name"] == "softnic"
    assert sorted(e["experiment"] for e in doc["experiments"]) == ["herd14-lat", "roce-lat"]
    assert all(e["points"] == 4 for e in doc["experiments"]) and doc["overall"]["points"] == 8
    # The run against itself: no difference, the same order.
    assert doc["against"]["median_abs_error"] == 0 and doc["against"]["rank_agreement"] == 1
    for e in doc["experiments"]:
        errors = [abs(p["predicted"] / p["measured"] - 1) for p in e["points_detail"]]
        assert e["median_abs_error"] == pytest.approx(statistics.median(errors))
    assert "how well the model knows softnic" in r.stdout and "overall" in r.stdout
    # cx3's copy says nothing of where it was fitted: said so.
    assert any("records no provenance" in w for w in doc["warnings"])


def test_score_without_a_run_names_what_is_missing(tmp_path):
    r = run_all("score", "--out", tmp_path, check=2)
    assert f"{tmp_path / 'softnic'} does not exist" in r.stderr


def test_spearman_ranks_ties_and_refuses_too_few_points():
    from plots.score import spearman
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1)
    assert spearman([1, 2, 2, 3], [1, 2, 2, 3]) == pytest.approx(1)
    assert spearman([1, 2], [1, 2]) is None and spearman([1, 2, 3], [5, 5, 5]) is None


kTestbedBody = kBody.replace("        sweep: {{grid: {{size: [8, 512], verb: [read, write]}}}}\n", """\
        paper_testbed: {{profile: cx3, {testbed}}}
        sweep:
          - backends: [model]
            grid: {{size: [8], verb: [read, write]}}
          - backends: [softnic]
            grid: {{size: [64, 512], verb: [read, write]}}
""")


def test_the_fitted_pass_predicts_what_ran_and_leaves_the_papers_testbed_out(tmp_path):
    """The paper's pass expands the model's sweep with paper_testbed; the fitted pass the measured
    backend's sweep, without it."""
    import json
    exp_dir = tmp_path / "experiments"
    exp_dir.mkdir()
    profiles = tmp_path / "profiles"
    shutil.copytree(kRoot / "model" / "profiles", profiles)
    (profiles / "softnic.yaml").write_text((profiles / "cx3.yaml").read_text().replace("name: cx3", "name: softnic", 1))
    path = write_experiment(exp_dir, "herd14-lat", kTestbedBody.format(title="latency", paper="herd14",
                                                                       testbed="sge: 3"))
    out = tmp_path / "res"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RDMALAB_MODEL_PROFILES", str(profiles))
        run_all(path, "--out", out, "--no-report", check=0, model=True)

    def requests(store):
        return [json.loads(p.read_text()) for p in (store / "herd14-lat" / "points").glob("*.json")]
    paper = requests(out / "model")
    fitted = requests(out / "fitted" / "softnic" / "model")
    measured = requests(out / "softnic")
    # (8 and 512: the conclusions are judged there, so every backend's sweep holds them)
    assert {r["point"]["params"]["size"] for r in paper} == {8, 512}
    assert {r["point"]["id"] for r in fitted} == {r["point"]["id"] for r in measured}
    assert {r["point"]["params"]["size"] for r in fitted} == {8, 64, 512}
    assert all(r["roles"][0]["document"]["config"]["sge"] == 3 for r in paper)
    assert all(r["roles"][0]["document"]["config"].get("sge") != 3 for r in fitted)


def test_a_paper_testbed_parameter_the_model_does_not_take_is_refused(tmp_path, exp_dir):
    path = write_experiment(exp_dir, "herd14-lat", kTestbedBody.format(title="latency", paper="herd14",
                                                                       testbed="windw_bound: false"))
    r = run_all(path, "--backend", "model", "--out", tmp_path / "res", check=2)
    assert "paper_testbed" in r.stderr and "windw_bound" in r.stderr


def test_score_warns_where_the_run_is_not_on_the_profiles_host():
    from plots.score import host_warnings
    prof = {"provenance": {"host": "lab1", "kernel": "6.1.0", "cores": 16}}
    assert host_warnings(prof, {("lab1", "6.1.0")}, {16}) == []
    warnings = host_warnings(prof, {("vm", "6.18.44")}, {2})
    assert len(warnings) == 2 and "vm (kernel 6.18.44) is not the host" in warnings[0] and "2 cores" in warnings[1]
