"""run_all.py calibrate (harness/calibrate.py): the wall between fit and validation, and the
fit's input built from stored points. Fast: no run, no binary."""
import dataclasses

import pytest

from conftest import kRoot
from harness import calibrate, experiment

kModelBin = kRoot / "build" / "bin" / "rdmalab-model"

kCalDir = kRoot / "experiments" / "calibrate"


def measured(exp_file, params, values=(10.0, 12.0, 11.0)):
    exp = experiment.parse(kCalDir / exp_file)
    files = [f"softnic/{exp.id}/points/{i:016x}.json" for i in range(len(values))]
    return calibrate.Measured(exp, params, {"server": 1, "client": 1}, list(values), files)


def calibration_ids():
    return {experiment.parse(f).id for f in kCalDir.glob(calibrate.kCalibrationGlob)}


def test_the_fit_refuses_application_level_points():
    kv = measured("validate-kv.yaml", {"system": "herd", "batching": True, "put_fraction": 0.05})
    with pytest.raises(calibrate.CalibrationWallError, match="not a calibration experiment"):
        calibrate.fit_points([kv], calibration_ids())
    # an application-level mode is refused even under a calibration experiment's id
    tput = measured("calibrate-tput.yaml", {"fits": "nic.write_ns"})
    disguised = dataclasses.replace(tput, experiment=dataclasses.replace(tput.experiment, mode="sequencer"))
    with pytest.raises(calibrate.CalibrationWallError, match="application level"):
        calibrate.fit_points([disguised], calibration_ids())


def test_every_validation_experiment_is_application_level_and_every_calibration_one_verb_level():
    for f in kCalDir.glob(calibrate.kValidationGlob):
        assert experiment.parse(f).mode not in calibrate.kVerbLevelModes, f.name
    for f in kCalDir.glob(calibrate.kCalibrationGlob):
        assert experiment.parse(f).mode in calibrate.kVerbLevelModes, f.name


def test_the_suite_runs_its_points_round_by_round():
    # each point's best repeat then samples the shared host's load as the others' do
    from harness.sweep import expand
    for f in list(kCalDir.glob(calibrate.kCalibrationGlob)) + list(kCalDir.glob(calibrate.kValidationGlob)):
        exp = experiment.parse(f)
        points = expand(exp)
        rows = len(points) // exp.repeats
        assert exp.repeats > 1 and [p.repeat for p in points] == [r for r in range(exp.repeats) for _ in range(rows)], f.name
        assert len({p.id for p in points}) == len(points)


def test_a_fit_point_is_the_best_of_its_repeats_with_its_field_and_files():
    params = {"fits": "nic.write_ns", "direction": "outbound", "verb": "write", "connection": "RC", "size": 32,
              "inline_size": 64, "post_list": 16, "header_only": False, "qp": 1, "clients": 1}
    (point,) = calibrate.fit_points([measured("calibrate-tput.yaml", params)], calibration_ids())
    assert point["field"] == "nic.write_ns" and point["metric"] == "mops"
    assert point["measured"] == 12.0 and point["spread"] == pytest.approx(2 / 12)   # the best repeat
    assert len(point["files"]) == 3
    # the model's point: no label (fits) and no role count (clients) among the parameters
    assert point["point"]["mode"] == "tput"
    assert "fits" not in point["point"]["params"] and "clients" not in point["point"]["params"]
    assert point["point"]["params"]["post_list"] == 16


def test_a_check_point_determines_no_field():
    params = {"fits": "-", "direction": "inbound", "verb": "write", "connection": "RC", "size": 32, "clients": 2}
    (point,) = calibrate.fit_points([measured("calibrate-tput.yaml", params)], calibration_ids())
    assert point["field"] == ""


def test_an_unknown_extends_profile_stops_before_anything_runs():
    import io
    from rich.console import Console

    ran = []
    out = io.StringIO()
    rc = calibrate.main(["--extends", "cx9"], Console(file=out, width=200), kRoot, lambda argv, c: ran.append(argv) or 0)
    assert rc == 2 and not ran
    assert "--extends cx9 is not a profile" in out.getvalue() and "host-engine" in out.getvalue()


@pytest.mark.skipif(not kModelBin.exists(), reason=f"{kModelBin} not built")
def test_the_fit_finds_a_profile_again_from_its_own_predictions(tmp_path):
    """calibrate on the model backend: the suite predicted with softnic.yaml stands in for a
    measurement; the harness's points, the model's fit and the written profile must give back
    softnic's values, every calibration point exact."""
    import io
    import json

    import yaml
    from rich.console import Console

    from harness import cli

    out = io.StringIO()
    rc = calibrate.main(["--backend", "model", "--profile", "softnic", "--extends", "softnic", "--name", "again",
                         "--out", str(tmp_path / "res"), "--profile-dir", str(tmp_path), "--model-bin", str(kModelBin)],
                        Console(file=out, width=250), kRoot, lambda argv, c: cli.main(argv, c).rc)
    assert rc == 0, out.getvalue()
    fit = json.loads((tmp_path / "res" / "calibrate" / "again" / "fit.json").read_text())
    assert len(fit["rows"]) >= 20 and all(abs(r["error"]) < 1e-3 for r in fit["rows"]), fit["rows"]
    again = yaml.safe_load((tmp_path / "again.yaml").read_text())
    original = yaml.safe_load((kRoot / "model" / "profiles" / "softnic.yaml").read_text())
    for section, field in (("nic", "write_ns"), ("nic", "read_in_ns"), ("cpu", "available_cores")):
        assert again[section][field]["value"] == pytest.approx(original[section][field]["value"], rel=1e-3)
        assert again[section][field]["points"]   # the stored point files it came from
    assert again["provenance"]["backend"] == "model"


kMicro = kRoot / "build" / "bin" / "rdmalab-micro-kv-store"
kPingpong = kRoot / "build" / "bin" / "rdmalab-cacheline-pingpong"
kMicroCore = kRoot / "build" / "bin" / "rdmalab-micro-bench-core"


@pytest.mark.skipif(not (kMicro.exists() and kPingpong.exists() and kMicroCore.exists()),
                    reason="micro benchmarks not built")
def test_the_host_facts_are_measured_by_micro_benchmarks_that_run_no_system(tmp_path):
    """A kv client's own CPU per request, a sequencer's and an ECHO client's per answer and a
    cross-core line move: measured (about 4 s), kept as files, named by their sources; never fitted."""
    facts = calibrate.host_measurements(kMicro.parent, tmp_path)
    assert set(facts) == {"cpu.client_request_ns", "cpu.sequencer_client_answer_ns", "cpu.echo_client_answer_ns",
                          "cpu.line_transfer_ns"}
    assert all(1 < f["value"] < 10_000 for f in facts.values()), facts
    assert all(f["source"].startswith("measured:") and str(tmp_path) in f["source"] for f in facts.values())
    assert all((tmp_path / f"{name}.json").is_file()
               for name in ("client_request", "sequencer_client_answer", "echo_client_answer"))
    assert len(list(tmp_path.glob("line_transfer.*.json"))) == 5


def test_a_missing_micro_benchmark_names_the_target_to_build(tmp_path):
    with pytest.raises(calibrate.ConfigError, match="--target micro_kv_store"):
        calibrate.host_measurements(tmp_path, tmp_path / "out")
