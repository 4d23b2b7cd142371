"""One declaration (docs/architecture.md): every parameter, mode and system of rdmalab-bench and
rdmalab-kv is declared once, by the program, and rdmalab-model takes the program's --describe at
build time, adding only its effect. This compares the built programs' descriptions with the
model's and fails on any difference the model does not declare: a parameter's `departs` (the
program's own values of the fields the model changes), a mode's `model_adds`, and what the model
declares alone (program rdmalab-model). A program rebuilt without the model, or a model that
states a field of its own, fails here naming the parameter, the field and both values."""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
from typing import Any, Optional

import pytest

kRoot = pathlib.Path(__file__).resolve().parents[2]
kBinDir = pathlib.Path(os.environ.get("RDMALAB_BIN_DIR", kRoot / "build" / "bin"))
kPrograms = ("rdmalab-bench", "rdmalab-kv")
kModel = "rdmalab-model"
# The fields of a parameter's declaration; the model leaves out the command line's (flag, short,
# symmetric, roles), which it has none of.
kDeclared = ("type", "list", "unit", "min", "max", "choices", "default", "scope", "help")


def described(name: str) -> dict[str, Any]:
    path = kBinDir / name
    if not path.is_file():
        pytest.skip(f"{path} is absent (cmake --build build)")
    return json.loads(subprocess.run([str(path), "--describe"], capture_output=True, text=True, check=True,
                                     timeout=30).stdout)


def model_entry(model: dict[str, Any], name: str, mode: str) -> Optional[dict[str, Any]]:
    """The model's declaration of `name` as `mode` takes it: its own where the name is declared apart."""
    entries = [p for p in model["params"] if p["name"] == name]
    own = [p for p in entries if mode in p.get("modes", ())]
    return (own or [p for p in entries if "modes" not in p] or [None])[0]


def param_differences(program: str, entry: dict[str, Any], got: dict[str, Any], mode: str) -> list[str]:
    where = f"{program} mode {mode}: parameter {entry['name']}"
    if got.get("program") not in kPrograms:  # a name both programs declare alike names the first
        return [f"{where}: the model says {got.get('program')!r} declares it"]
    departs = got.get("departs") or {}
    if departs and not departs.get("why"):
        return [f"{where}: the model departs from the program without saying why"]
    restored = {**{k: got.get(k) for k in kDeclared}, **departs.get("program", {})}
    return [f"{where}: {field} is {entry.get(field)!r} in {program}, {restored[field]!r} in {kModel}"
            for field in kDeclared if restored[field] != entry.get(field)]


def differences(model: dict[str, Any], programs: dict[str, dict[str, Any]]) -> list[str]:
    """Every difference between the model's description and the programs' that the model does
    not declare."""
    found: list[str] = []
    model_modes = {m["name"]: m for m in model["modes"]}
    for program, doc in programs.items():
        params = {p["name"]: p for p in doc["params"]}
        for mode in doc["modes"]:
            ours = model_modes.get(mode["name"])
            if ours is None:
                found.append(f"{program} mode {mode['name']}: absent from {kModel}")
                continue
            adds = ours.get("model_adds", [])
            if ours.get("program") != program or ours["summary"] != mode["summary"]:
                found.append(f"{program} mode {mode['name']}: program or summary differ in {kModel}")
            if ours["params"] != mode["params"] + adds:
                found.append(f"{program} mode {mode['name']}: takes {ours['params']} in {kModel}, "
                             f"{mode['params']} + model_adds {adds} expected")
            for name in mode["params"]:
                got = model_entry(model, name, mode["name"])
                if got is None:
                    found.append(f"{program} mode {mode['name']}: parameter {name} absent from {kModel}")
                else:
                    found += param_differences(program, params[name], got, mode["name"])
    for p in model["params"]:
        if p.get("program") not in (*programs, kModel) or (p["program"] != kModel and
                                                           p["name"] not in {q["name"] for q in programs[p["program"]]["params"]}):
            found.append(f"{kModel}: parameter {p['name']} says {p.get('program')!r} declares it, which does not")
    kv_systems = {s["name"]: s for s in programs["rdmalab-kv"]["systems"]}
    for system in model["systems"]:
        theirs = kv_systems.pop(system["name"], None)
        if system.get("program") == kModel:
            continue
        if theirs is None or [system[k] for k in ("display", "summary", "params")] != [
                theirs.get(k) for k in ("display", "summary", "params")]:
            found.append(f"{kModel}: system {system['name']} differs from rdmalab-kv's")
    found += [f"rdmalab-kv system {name}: absent from {kModel}" for name in kv_systems]
    for mode in model["modes"]:
        if mode.get("program") in programs and mode["name"] not in {m["name"] for m in programs[mode["program"]]["modes"]}:
            found.append(f"{kModel}: mode {mode['name']} says {mode['program']} declares it, which does not")
    return found


def test_the_model_takes_every_declaration_of_the_programs_and_states_each_departure():
    programs = {name: described(name) for name in kPrograms}
    model = described(kModel)
    assert differences(model, programs) == []
    departed = {p["name"] for p in model["params"] if "departs" in p}
    assert {"tx_depth", "workers", "window", "system"} <= departed  # the papers' scale, what-if ranges, read-based


def test_a_default_changed_on_one_side_is_a_difference():
    programs = {name: described(name) for name in kPrograms}
    model = described(kModel)
    cq_mod = next(p for p in programs["rdmalab-kv"]["params"] if p["name"] == "cq_mod")
    declared = cq_mod["default"]
    cq_mod["default"] = declared + 1
    assert differences(model, programs) == [
        f"rdmalab-kv mode kv: parameter cq_mod: default is {declared + 1} in rdmalab-kv, {declared} in rdmalab-model"]
