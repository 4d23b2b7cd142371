"""`run_all.py import perftest|ucx_perftest|qperf`: real output of the tools, recorded on softnic
(data/imported/README.md), becomes stored points that calibrate fits (`--no-run`: from them
alone), score reads beside the fitted profile's predictions, and the report draws; a file the
importer cannot map is refused with the field named and nothing of it is stored."""
import json

import pytest

from conftest import kRoot, run_all
from test_contract_schemas import problems

kData = kRoot / "tests" / "python" / "data" / "imported"
kModelBin = kRoot / "build" / "bin" / "rdmalab-model"
kPerftest = sorted(kData.glob("perftest-*.json"))
# the calibration points the recorded perftest runs are (see data/imported/README.md)
kCalibrationFields = {"nic.line_ns", "nic.gather_ns", "cpu.post_doorbell_ns", "nic.read_ns", "latency.pcie_rtt_ns"}

pytestmark = pytest.mark.skipif(not kModelBin.exists(), reason=f"{kModelBin} not built")


def points(out, exp_id, backend="softnic"):
    return [json.loads(p.read_text()) for p in sorted((out / backend / exp_id / "points").glob("*.json"))]


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    out = tmp_path_factory.mktemp("import") / "res"
    r = run_all("import", "perftest", *kPerftest, "--backend", "softnic", "--out", out, "--tool-version", "4.5+0.17-1",
                check=0)
    return out, r


def test_perftest_results_become_points_with_their_provenance(imported):
    out, r = imported
    tput, lat = points(out, "imported-perftest-tput"), points(out, "imported-perftest-lat")
    assert len(tput) == 5 and len(lat) == 2
    for rec in tput + lat:
        rec.pop("_path", None)
        assert problems("rdmalab-result-2.json", rec) == []
        src = rec["provenance"]["imported_from"]
        assert src["tool"] == "perftest" and src["version"] == "4.5+0.17-1" and len(src["sha256"]) == 64
        assert rec["status"] == "ok" and rec["headline"]["value"] > 0
    by_size = {(r["point"]["params"]["verb"], r["point"]["params"]["size"]): r for r in tput}
    row = by_size[("write", 4096)]["roles"][0]["document"]["results"][0]
    assert by_size[("write", 4096)]["point"]["params"]["post_list"] == 16
    assert row["gbps"] == pytest.approx(row["mops"] * 4096 * 8 / 1e3)
    latency = {r["point"]["params"]["verb"]: r for r in lat}
    assert latency["read"]["point"]["params"]["lat_method"] == "completion"
    assert latency["write"]["roles"][1]["document"]["results"][0]["lat_us_p50"] > 0
    # the experiment file written for them is a valid experiment: the model predicted it too
    assert (out / "imported" / "imported-perftest-tput.yaml").is_file()
    assert len(points(out, "imported-perftest-tput", "fitted/softnic/model")) == 5


def test_results_that_are_calibration_points_are_stored_as_those(imported):
    out, r = imported
    cal = points(out, "calibrate-tput") + points(out, "calibrate-lat")
    assert {rec["point"]["params"]["fits"] for rec in cal} == kCalibrationFields
    assert all(rec["provenance"]["imported_from"]["tool"] == "perftest" for rec in cal)
    assert "calibrate-tput's point for nic.read_ns, repeat 0" in r.stderr


def test_calibrate_fits_from_imported_points_alone(imported, tmp_path):
    out, _ = imported
    r = run_all("calibrate", "--backend", "softnic", "--no-run", "--out", out, "--profile-dir", tmp_path,
                "--name", "from-perftest", model=True)
    assert r.returncode in (0, 1), r.stderr   # 1: a point outside the fit's tolerance, not a failure to fit
    assert f"fitted {len(kCalibrationFields)} fields" in r.stderr
    import yaml
    prof = yaml.safe_load((tmp_path / "from-perftest.yaml").read_text())
    for field in kCalibrationFields:
        section, name = field.split(".")
        assert "fit" in prof[section][name], field
    # nothing was measured: no point beyond the imported ones, no host micro-benchmark
    assert not (out / "softnic" / "calibrate-atomics").exists() and not (out / "softnic" / "calibrate-host").exists()


def test_score_reads_imported_points(imported):
    out, _ = imported
    run_all("score", "--out", out, check=0)
    doc = json.loads((out / "score" / "score.json").read_text())
    assert {e["experiment"]: e["points"] for e in doc["experiments"]} == {"imported-perftest-tput": 5,
                                                                        "imported-perftest-lat": 2}


def test_a_second_import_of_the_same_run_is_another_repeat(imported, tmp_path):
    out = tmp_path / "res"
    for _ in range(2):
        run_all("import", "perftest", kData / "perftest-read_bw-s32.json", "--backend", "softnic", "--out", out,
                "--no-model", check=0)
    recs = points(out, "imported-perftest-tput")
    assert sorted(r["point"]["repeat"] for r in recs) == [0, 1]
    assert "repeats: 2" in (out / "imported" / "imported-perftest-tput.yaml").read_text()


def test_ucx_perftest_results_become_points_under_their_command_line(tmp_path):
    out = tmp_path / "res"
    run_all("import", "ucx_perftest", *sorted(kData.glob("ucx_perftest-*.txt")), "--backend", "softnic", "--out", out,
            "--no-model", check=0)
    tput = {r["point"]["params"]["verb"]: r for r in points(out, "imported-ucx_perftest-tput")}
    (lat,) = points(out, "imported-ucx_perftest-lat")
    assert tput["write"]["point"]["params"]["size"] == 64 and tput["write"]["headline"]["value"] == pytest.approx(7.922042)
    assert tput["send"]["headline"]["value"] == pytest.approx(4.564879)   # from -v's CSV
    assert lat["point"]["params"] == {"verb": "write", "connection": "RC", "size": 8, "lat_method": "pingpong"}
    assert lat["roles"][1]["document"]["results"][0]["lat_us_p50"] == pytest.approx(0.116)


def test_qperf_results_become_points(tmp_path):
    out = tmp_path / "res"
    run_all("import", "qperf", kData / "qperf-rc-v.txt", "--backend", "softnic", "--out", out, "--no-model", check=0)
    tput = {r["point"]["params"]["verb"]: r for r in points(out, "imported-qperf-tput")}
    lat = {(r["point"]["params"]["verb"], r["point"]["params"]["connection"]): r for r in points(out, "imported-qperf-lat")}
    assert set(tput) == {"send", "write", "read"} and set(lat) == {("send", "RC"), ("write", "RC"), ("send", "UD")}
    assert tput["read"]["headline"]["value"] == pytest.approx(15.4)
    assert lat[("send", "RC")]["roles"][1]["document"]["results"][0]["lat_us_mean"] == pytest.approx(2.81)


@pytest.mark.parametrize("tool,text,field", [
    ("perftest", "{\ntest_info: {\ntest: RDMA_Atomic_BW_Test,\n},\nresults: {\n},\n}\n", "test_info.test"),
    ("perftest", (kData / "perftest-read_bw-s32.json").read_text().replace("MsgRate", "Rate"), "MsgRate"),
    ("perftest", "not json at all\n", "expected 'key: value'"),
    ("qperf", "rc_bw:\n    bw  =  288 MB/sec\n", "msg_size is missing (run qperf with -v)"),
    ("ucx_perftest", (kData / "ucx_perftest-put_bw.txt").read_text().split("\n", 1)[1], "put the client's command line"),
    ("ucx_perftest", "# ucx_perftest -t put_bw -x dc_mlx5 -s 64\nFinal: 1 1 1 1 1 1 1 1\n", "transport 'dc_mlx5'"),
    ("qperf", "rc_bw:\n    msg_rate = 4.5 M/sec\n    msg_size = 64 parsecs\n", "unit 'parsecs'"),
])
def test_a_file_that_cannot_be_mapped_is_refused_and_nothing_is_stored(tmp_path, tool, text, field):
    good = kData / {"perftest": "perftest-read_bw-s32.json", "qperf": "qperf-rc-v.txt",
                    "ucx_perftest": "ucx_perftest-put_bw.txt"}[tool]
    bad = tmp_path / "bad"
    bad.write_text(text)
    out = tmp_path / "res"
    r = run_all("import", tool, good, bad, "--backend", "softnic", "--out", out, check=2)
    assert field in r.stderr and str(bad) in r.stderr and "nothing stored" in r.stderr
    assert not out.exists()


def test_perftest_commands_reproduce_calibration_points():
    r = run_all("import", "perftest", "--commands", check=0)
    lines = r.stdout.splitlines()
    assert "ib_read_bw -c RC -s 32 --out_json -t 32 -Q 16 -q 1 -D 1    # calibrate-tput: nic.read_ns" in lines
    assert any(ln.startswith("ib_read_lat ") for ln in lines)
