"""`run_all.py check --profile P`: softnic measured against a profile, once as it is and once with a
fault planted in its WRITEs of 1-4 KiB (SOFTNIC_PLANTED_FAULT); the faulted run fails naming the
verb, the sizes and the resource, the JSON matches its schema and the JUnit XML has a failure per
short point. The suite is a small calibration experiment of the test's own (3 points, 2 repeats,
0.1 s each), so the whole module takes ~15 s. The band is wide (400%) so that a loaded test
machine raises no false alarm; the fault makes its points ~100x slower."""
import json
import os
import subprocess
import xml.etree.ElementTree as ET

import pytest

from conftest import kRoot, kRunAll, run_all
from test_contract_schemas import problems

kModelBin = kRoot / "build" / "bin" / "rdmalab-model"
kSoftnic = kRoot / "build" / "bin" / "softnic"
kFault = "verb=write,size=1024-4096,delay_ns=20000"

kSuite = """\
id: calibrate-small
title: three calibration points
paper: {id: none, figure: calibration}
mode: tput
roles: {server: {count: 1}, client: {count: 1}}
params: {threads: 1, tx_depth: 32, duration: 0.1, warmup: 0.02, direction: outbound, connection: RC, cq_mod: 16,
         post_list: 16, inline_size: 0, qp: 1}
labels: [fits]
sweep:
  zip:
    fits: [nic.gather_ns, nic.line_ns, nic.line_ns]
    verb: [write, write, write]
    size: [32, 1024, 4096]
repeats: 2
plot: {kind: bar, x: fits, y: mops, series: size, role: server, aggregate: sum}
"""

pytestmark = [pytest.mark.skipif(not kModelBin.exists(), reason=f"{kModelBin} not built"),
              pytest.mark.skipif(not kSoftnic.exists(), reason=f"{kSoftnic} not built")]


def check(tmp_path, name, fault=None):
    exp_dir = tmp_path / "experiments"
    (exp_dir / "calibrate").mkdir(parents=True, exist_ok=True)
    (exp_dir / "calibrate" / "calibrate-small.yaml").write_text(kSuite)
    out = tmp_path / name
    env = {k: v for k, v in os.environ.items() if k != "SOFTNIC_PLANTED_FAULT"}
    if fault:
        env["SOFTNIC_PLANTED_FAULT"] = fault
    r = subprocess.run(["/usr/bin/python3", str(kRunAll), "check", "--profile", "softnic", "--tolerance", "400",
                        "--experiments-dir", exp_dir, "--out", out], capture_output=True, text=True, timeout=180,
                       env={**env, "COLUMNS": "200"})
    return r, out


def test_an_unchanged_nic_passes_and_a_faulted_one_fails_naming_what(tmp_path):
    r, out = check(tmp_path, "as-is")
    assert r.returncode == 0, r.stderr
    assert "all 3 points meet profile softnic" in r.stderr
    r, out = check(tmp_path, "faulted", kFault)
    assert r.returncode == 1, r.stderr
    doc = json.loads((out / "check.json").read_text())
    assert problems("rdmalab-check-1.json", doc) == []
    failed = [p for p in doc["points"] if p["status"] == "fail"]
    assert sorted(p["params"]["size"] for p in failed) == [1024, 4096]
    assert doc["region"] == {"size": "1024-4096"}   # the verb is every point's here: not what sets them apart
    assert all(p["resource"] and "ns more there" in p["explanation"] for p in failed)
    assert "2 of 3 points fall short of profile softnic; what they share: size=1024-4096" in r.stderr
    suite = ET.fromstring((out / "check.xml").read_text())
    assert suite.get("failures") == "2" and len(suite.findall("testcase/failure")) == 2


def test_bad_arguments_are_refused_by_name(tmp_path):
    r = run_all("check", "--profile", "nosuch", "--no-run", "--out", tmp_path, check=2)
    assert "--profile nosuch: not a profile" in r.stderr
    r = run_all("check", "--profile", "softnic", "--suite", "calibrate-nosuch", "--no-run", "--out", tmp_path, check=2)
    assert "calibrate-nosuch: not a calibration experiment" in r.stderr
    r = run_all("check", "--profile", "softnic", "--tolerance", "lots", "--no-run", "--out", tmp_path, check=2)
    assert "expected auto or a percentage" in r.stderr
