"""The papers' conclusions as checkable statements (issue 19, acceptance 2): the schema refuses
malformed statements with file:line, a statement is judged by the ratio of its two values, a
statement that does not hold is reported as not holding (never hidden), suite reductions keep the
x values statements need, and every experiment file of the four papers lists its conclusions."""
import html
import os
import pathlib
import re

import pytest

from conftest import kFake, kRoot, run_all, write_experiment
from harness import conclusions, experiment, sweep
from harness.yamlloc import ConfigError

kModelBin = pathlib.Path(os.environ.get("RDMALAB_MODEL_BIN", kRoot / "build" / "bin" / "rdmalab-model"))

kExperiment = f"""id: stmt
title: statements on a fake run
binary: {kFake}
mode: lat
paper: {{id: herd14, figure: "Figure 0"}}
roles: {{server: {{}}, client: {{}}}}
sweep: {{grid: {{size: [8, 16, 32, 64, 128, 256, 512], verb: [read, write]}}}}
plot: {{x: size, y: mops, series: verb, role: client}}
reference: [{{x: 8, series: read, y: 20}}, {{x: 512, series: read, y: 7}}]
conclusions:
  - statement: throughput falls from 8 B to 512 B
    trend: {{series: read, from: 8, to: 512}}
    ratio_at_most: 0.9
  - statement: throughput rises from 8 B to 512 B
    trend: {{series: read, from: 8, to: 512}}
    ratio_at_least: 1.0
  - statement: READ beats WRITE by half at 64 B
    compare: {{a: {{series: read, x: 64}}, b: {{series: write, x: 64}}}}
    ratio_at_least: 1.5
"""

# (what is wrong, (old, new) replacement in kExperiment, expected message parts)
kMistakes = [
    ("unknown key", ("    ratio_at_most: 0.9", "    ratio_below: 0.9"), ["unknown key 'ratio_below'", "valid keys:"]),
    ("no bound", ("    ratio_at_most: 0.9\n", ""), ["give ratio_at_least and/or ratio_at_most"]),
    ("both kinds", ("    ratio_at_most: 0.9", "    ratio_at_most: 0.9\n    compare: {a: {series: read, x: 8}, b: {series: read, x: 16}}"),
     ["give exactly one of compare"]),
    ("x not swept", ("from: 8, to: 512", "from: 8, to: 1024"), ["to 1024: size=1024 is not a value of the experiment; valid: 8, 16"]),
    ("series missing", ("trend: {series: read, from: 8, to: 512}\n    ratio_at_most", "trend: {from: 8, to: 512}\n    ratio_at_most"),
     ["missing series: the plot has series verb"]),
    ("series unknown", ("a: {series: read, x: 64}", "a: {series: send, x: 64}"), ["verb=send is not a value of the experiment"]),
    ("empty band", ("    ratio_at_most: 0.9", "    ratio_at_most: 0.9\n    ratio_at_least: 2"), ["nothing could hold"]),
]


@pytest.mark.parametrize("what,change,parts", kMistakes, ids=[m[0] for m in kMistakes])
def test_each_malformed_statement_is_reported_with_file_and_line(tmp_path, what, change, parts):
    old, new = change
    assert old in kExperiment
    path = tmp_path / "stmt.yaml"
    path.write_text(kExperiment.replace(old, new, 1))
    with pytest.raises(ConfigError) as err:
        experiment.parse(path)
    msg = "\n".join(err.value.messages)
    assert re.search(rf"{re.escape(str(path))}:\d+: conclusions\[\d\]", msg), msg
    for part in parts:
        assert part in msg


def test_a_statement_is_judged_by_its_ratio_and_missing_values_are_not_judged():
    values = {(None, "read", 8): 20.0, (None, "read", 512): 5.0, (None, "write", 64): 10.0}

    def lookup(facet, series, x):
        v = values.get((facet, series, x))
        return v, "" if v is not None else "no point there"

    plot = {"x": "size", "series": "verb"}
    falls = {"statement": "falls", "trend": {"series": "read", "from": 8, "to": 512}, "ratio_at_most": 0.5}
    v = conclusions.evaluate(falls, lookup, plot)
    assert (v.status, v.ratio, v.numerator, v.denominator) == (conclusions.kHolds, 0.25, 5.0, 20.0)
    rises = {**falls, "ratio_at_most": None, "ratio_at_least": 1.0}
    assert conclusions.evaluate(rises, lookup, plot).status == conclusions.kFails
    band = {**falls, "ratio_at_least": 0.3, "ratio_at_most": 2.0}
    assert conclusions.evaluate(band, lookup, plot).status == conclusions.kFails
    missing = {"statement": "m", "compare": {"a": {"series": "read", "x": 64}, "b": {"series": "write", "x": 64}},
               "ratio_at_least": 1.0}
    v = conclusions.evaluate(missing, lookup, plot)
    assert v.status == conclusions.kNotEvaluated and v.ratio is None
    assert "verb=read, size=64: no point there" in v.reason


def test_suite_reductions_keep_the_x_values_statements_need(tmp_path):
    path = tmp_path / "stmt.yaml"
    path.write_text(kExperiment)
    exp = experiment.parse(path)
    sizes = sorted({p.params["size"] for p in sweep.expand(exp, sweep.Reduction(max_values=2))})
    assert sizes == [8, 64, 512]  # first and last, plus 64 for the compare statement


def verdicts(page, judge):
    """Each conclusion row's verdict from one judge, in order."""
    rows = re.findall(r'<tr class="conclusion" data-index="\d+">(.*?)</tr>', page)
    return [html.unescape(re.search(rf'data-judge="{judge}" data-verdict="([^"]*)"', r).group(1)) for r in rows]


def test_a_statement_that_does_not_hold_is_reported_as_not_holding(tmp_path, exp_dir):
    path = exp_dir / "stmt.yaml"
    path.write_text(kExperiment.replace("size: [8, 16, 32, 64, 128, 256, 512]", "size: [8, 64, 512]"))
    out = tmp_path / "res"
    run_all(path, "--out", out, check=0)
    page = (out / "report" / "index.html").read_text()
    assert verdicts(page, "softnic") == ["holds", "does not hold", "does not hold"]
    # The paper's own values judge the trend statements; they give nothing at 64 B.
    assert verdicts(page, "paper") == ["holds", "does not hold", "not evaluated"]
    summary = re.search(r'data-paper="herd14" data-judge="softnic" data-holds="(\d+)" data-fails="(\d+)" '
                        r'data-unjudged="(\d+)"', page)
    assert summary and summary.groups() == ("1", "2", "0")
    assert "ratio 1 (" in page  # the fake bench gives READ and WRITE the same rate: ratio 1 decides the compare


@pytest.mark.skipif(not kModelBin.exists(), reason=f"{kModelBin} not built")
def test_paper_command_runs_the_backend_and_the_model_and_writes_that_papers_report(tmp_path, exp_dir):
    # Suites pick a paper's experiments by their id's prefix.
    (exp_dir / "herd14-stmt.yaml").write_text(kExperiment.replace("size: [8, 16, 32, 64, 128, 256, 512]", "size: [8, 64, 512]")
                                              .replace("id: stmt", "id: herd14-stmt"))
    write_experiment(exp_dir, "roce-other", """
        title: an experiment of another paper
        mode: lat
        paper: {id: roce}
        roles: {server: {}, client: {}}
        sweep: {grid: {size: [8]}}
        plot: {x: size, y: mops}
        """)
    (exp_dir / "suites.yaml").write_text("herd14: {description: the paper, papers: [herd14]}\n"
                                        "roce: {description: the other, papers: [roce]}\n")
    out = tmp_path / "res"
    run_all("paper", "herd14", "--experiments-dir", exp_dir, "--model-bin", kModelBin, "--out", out, check=0)
    assert list((out / "softnic").iterdir()) == [out / "softnic" / "herd14-stmt"]
    assert (out / "model" / "herd14-stmt" / "points").is_dir()
    page = (out / "report" / "herd14" / "index.html").read_text()
    assert verdicts(page, "softnic") == ["holds", "does not hold", "does not hold"]
    assert len(verdicts(page, "model")) == 3
    assert re.findall(r'data-experiment="([^"]+)"', page) == ["herd14-stmt"]
    # Run again: the stored points are kept, nothing re-runs.
    r = run_all("paper", "herd14", "--experiments-dir", exp_dir, "--model-bin", kModelBin, "--out", out, check=0)
    assert "replace" not in r.stderr


kPaperIds = ("herd14", "guide16", "nosql", "roce")


def test_every_experiment_of_the_four_papers_lists_its_conclusions():
    files = [p for p in sorted((kRoot / "experiments").glob("*.yaml")) if p.stem.split("-")[0] in kPaperIds]
    assert len(files) == 39
    missing = [p.stem for p in files if not experiment.parse(p).conclusions]
    assert not missing, f"experiments without conclusions: {missing}"
