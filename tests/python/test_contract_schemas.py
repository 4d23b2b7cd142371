"""The JSON Schemas of docs/schemas/ (docs/contracts.md) are valid schemas, and real documents match them.

Real documents: the recorded rendezvous exchanges (tests/python/data/rendezvous/, every request
and reply), stored point records with their model point and prediction or participant
documents (tests/python/data/contracts/), and the programs' descriptions (the recorded ones in
tests/python/data/describe/, and `BIN --describe` of the built programs when they exist). A few
broken documents must fail, so that no schema accepts everything.
"""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
from typing import Any

import jsonschema
import pytest

kRoot = pathlib.Path(__file__).resolve().parents[2]
kData = pathlib.Path(__file__).resolve().parent / "data"
kSchemaDirs = (kRoot / "docs" / "schemas", kRoot / "benchmarks" / "schema", kRoot / "kv" / "schema")
kBinDir = pathlib.Path(os.environ.get("RDMALAB_BIN_DIR", kRoot / "build" / "bin"))
kDescribeTimeoutS = 20
kId = "https://rdmalab.invalid/schema/"


def schemas() -> dict[str, dict[str, Any]]:
    """$id -> schema, for every schema file of the repository."""
    out = {}
    for d in kSchemaDirs:
        for path in sorted(d.glob("*.schema.json")):
            s = json.loads(path.read_text())
            assert s.get("$id", "").startswith(kId), f"{path}: $id must start with {kId}"
            out[s["$id"]] = s
    return out


kSchemas = schemas()


def validator(name: str) -> jsonschema.protocols.Validator:
    schema = kSchemas[kId + name]
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema, resolver=jsonschema.RefResolver.from_schema(schema, store=kSchemas))


def problems(name: str, doc: Any) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}"
            for e in validator(name).iter_errors(doc)]


def exchange_steps() -> list[tuple[str, dict[str, Any]]]:
    steps = []
    for path in sorted((kData / "rendezvous").glob("*.jsonl")):
        for n, line in enumerate(path.read_text().splitlines()[1:], 2):
            steps.append((f"{path.name}:{n}", json.loads(line)))
    return steps


def point_records() -> list[pathlib.Path]:
    return sorted((kData / "contracts").glob("point-*.json"))


@pytest.mark.parametrize("schema_id", sorted(kSchemas), ids=lambda i: i.removeprefix(kId))
def test_schema_is_valid(schema_id):
    schema = kSchemas[schema_id]
    jsonschema.validators.validator_for(schema).check_schema(schema)


def test_every_contract_has_a_schema():
    names = {i.removeprefix(kId) for i in kSchemas}
    assert {"rendezvous-request-1.json", "rendezvous-reply-1.json", "rdmalab-result-2.json", "model-point-1.json",
            "model-prediction-1.json", "rdmalab-describe-1.json", "participant-document-1.json",
            "rdmalab-bench-1.json", "rdmalab-kv-1.json"} <= names


def test_recorded_rendezvous_messages():
    steps = exchange_steps()
    assert sum("send" in s for _, s in steps) > 20, "the recorded exchanges are missing"
    for where, step in steps:
        if "send" in step:
            found = problems("rendezvous-request-1.json", step["send"])
            if step.get("malformed"):
                assert found, f"{where}: a malformed request matches the request schema"
            else:
                assert not found, f"{where}: {found}"
        elif "recv" in step:
            assert not (found := problems("rendezvous-reply-1.json", step["recv"])), f"{where}: {found}"


def test_stored_point_records():
    records = point_records()
    assert records, f"no point-*.json under {kData / 'contracts'}"
    for path in records:
        rec = json.loads(path.read_text())
        assert not (found := problems("rdmalab-result-2.json", rec)), f"{path.name}: {found}"
        for role in rec["roles"]:
            if rec["backend"] == "model":
                assert not (found := problems("model-point-1.json", role["request"])), f"{path.name}: {found}"
                assert not (found := problems("model-prediction-1.json", role["document"])), f"{path.name}: {found}"
            elif rec["status"] == "ok":
                assert not (found := problems("participant-document-1.json", role["document"])), f"{path.name}: {found}"


def test_recorded_descriptions():
    paths = sorted((kData / "describe").glob("*.json"))
    if not paths:
        pytest.skip("no recorded descriptions under tests/python/data/describe")
    for path in paths:
        assert not (found := problems("rdmalab-describe-1.json", json.loads(path.read_text()))), f"{path.name}: {found}"


@pytest.mark.parametrize("program", ["rdmalab-bench", "rdmalab-kv", "rdmalab-model"])
def test_built_program_describes_itself(program):
    binary = kBinDir / program
    if not binary.exists():
        pytest.skip(f"{binary} is not built")
    r = subprocess.run([str(binary), "--describe"], capture_output=True, text=True, timeout=kDescribeTimeoutS)
    if r.returncode != 0 and "unknown" in r.stderr and "describe" in r.stderr:   # built before --describe existed
        pytest.skip(f"{binary} has no --describe yet: {r.stderr.strip()[:200]}")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["program"] == program
    assert not (found := problems("rdmalab-describe-1.json", doc)), found
    names = {p["name"] for p in doc["params"]}
    for group in doc["modes"] + doc.get("systems", []):
        assert set(group["params"]) <= names, f"{group['name']} takes undeclared {set(group['params']) - names}"


@pytest.mark.parametrize("schema,doc", [
    ("rendezvous-request-1.json", {"op": "hello", "role": "server", "index": 0}),             # no token
    ("rendezvous-request-1.json", {"op": "barrier", "name": "go", "count": 0}),               # count < 1
    ("rendezvous-request-1.json", {"op": "put", "key": "k"}),                                 # no value
    ("rendezvous-reply-1.json", {"ok": False}),                                               # refusal without error
    ("rendezvous-reply-1.json", {"ok": True, "error": "x"}),
    ("model-point-1.json", {"profile": "cib", "mode": "tput", "windw": 4}),                   # unknown field
    ("model-point-1.json", {"profile": "cib", "mode": "tput", "params": {"tx-depth": 4}}),    # the other spelling
    ("model-prediction-1.json", {"schema_version": "rdmalab-bench/1", "tool": {"name": "rdmalab-model", "version": "x"},
                                 "backend": "model", "prediction": True, "profile": "cib", "mode": "tput",
                                 "config": {}, "results": []}),                              # no rows, no reason
    ("rdmalab-describe-1.json", {"schema_version": "rdmalab-describe/1", "program": "rdmalab-model",
                                 "backends": ["model"], "modes": [{"name": "tput", "summary": "s", "params": []}],
                                 "systems": [], "params": [{"name": "tx-depth", "type": "integer", "list": False,
                                                            "unit": None, "default": 1, "scope": "experiment",
                                                            "effect": "modeled", "help": ""}]}),
    ("rdmalab-result-2.json", {"schema_version": "rdmalab-result/2", "status": "failed", "error": None}),
])
def test_broken_documents_fail(schema, doc):
    assert problems(schema, doc), f"{schema} accepts {doc}"
