"""Every #include and import against the dependency table of docs/architecture.md.

The table is the fenced ```layers block there: one line per layer, top to bottom,
`LAYER -> LAYERS IT MAY DEPEND ON`. A layer is a top-level folder (or run_all.py). Every
tracked (or new, not ignored) C/C++ file's `#include "..."` and every Python file's import is
resolved to the file it names, that file to its layer, and the arrow checked: within a layer
always; across layers only as the table allows. The table itself may only point down.
"""
from __future__ import annotations

import ast
import pathlib
import re
import subprocess
import sys
from typing import Iterator, Optional

kRoot = pathlib.Path(__file__).resolve().parents[2]
kArchitecture = kRoot / "docs" / "architecture.md"
kCppSuffixes = (".c", ".cc", ".cpp", ".h", ".hpp")
kInclude = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
kTopFiles = {"run_all.py": "run_all.py"}   # a top-level file that is a layer of its own


def table(root: pathlib.Path = kRoot) -> list[tuple[str, set[str]]]:
    """[(layer, allowed targets)] top to bottom, from docs/architecture.md's ```layers block."""
    text = (root / kArchitecture.relative_to(kRoot)).read_text()
    m = re.search(r"^```layers\n(.*?)^```", text, re.S | re.M)
    assert m, f"{kArchitecture}: no ```layers block"
    rows = []
    for line in m.group(1).splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        layer, arrow, targets = line.partition("->")
        assert arrow, f"{kArchitecture}: layers line {line!r} is not 'LAYER -> TARGETS'"
        rows.append((layer.strip(), set(targets.split())))
    return rows


def tracked_files(root: pathlib.Path = kRoot) -> list[str]:
    """The repository's files: git's tracked and new unignored ones; without git, the tree less build outputs."""
    try:
        out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=root,
                             capture_output=True, text=True, check=True).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        skip = re.compile(r"^(build[^/]*|results|\.git|.*__pycache__.*)(/|$)")
        out = [str(p.relative_to(root)) for p in root.rglob("*") if not skip.match(str(p.relative_to(root)))]
    return sorted(f for f in set(out) if (root / f).is_file())


def layer_of(path: str) -> Optional[str]:
    if path in kTopFiles:
        return kTopFiles[path]
    return path.split("/", 1)[0] if "/" in path else None


def cpp_edges(root: pathlib.Path, path: str, files: set[str]) -> Iterator[tuple[int, str, str]]:
    """(line, include, resolved file) of each quoted include: beside the file, from the root, else by its ending."""
    here = pathlib.PurePosixPath(path).parent
    for n, line in enumerate((root / path).read_text(errors="replace").splitlines(), 1):
        m = kInclude.match(line)
        if not m:
            continue
        name = m.group(1)
        for candidate in (str(here / name), name):
            normal = str(pathlib.PurePosixPath(*pathlib.PurePosixPath(candidate).parts))
            if normal in files:
                yield n, name, normal
                break
        else:
            # Found through an include directory of the build (e.g. tests/safety uses
            # tests/conformance's headers): the one file of the repository with that ending.
            found = [f for f in files if f.endswith("/" + name)]
            yield n, name, found[0] if len(found) == 1 else ""   # "": reported as unresolved


def python_modules(files: set[str]) -> dict[str, list[str]]:
    """Top-level module name -> the repository files that define it (module or package)."""
    mods: dict[str, list[str]] = {}
    for f in files:
        if not f.endswith(".py"):
            continue
        p = pathlib.PurePosixPath(f)
        name = p.parent.name if p.name == "__init__.py" else p.stem
        mods.setdefault(name, []).append(f)
    return mods


def python_edges(root: pathlib.Path, path: str, files: set[str],
                 mods: dict[str, list[str]]) -> Iterator[tuple[int, str, str]]:
    """(line, module, resolved file) of each import naming a repository module.

    A name resolves, in order, to a module beside the importing file, a package or module at
    the repository root, then the one file of that name anywhere in the repository (modules
    found through sys.path entries the file adds). Standard and Debian modules resolve to nothing."""
    here = str(pathlib.PurePosixPath(path).parent)
    tree = ast.parse((root / path).read_text(), path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                continue   # relative: the importing file's own package
            names = [node.module or ""]
        else:
            continue
        for full in names:
            top = full.split(".")[0]
            if top in sys.stdlib_module_names or top not in mods:
                continue
            found = mods[top]
            beside = [f for f in found if f in (f"{here}/{top}.py", f"{here}/{top}/__init__.py")]
            at_root = [f for f in found if f in (f"{top}.py", f"{top}/__init__.py")]
            pick = beside or at_root or (found if len(found) == 1 else [])
            yield node.lineno, full, pick[0] if pick else ""


def violations(root: pathlib.Path = kRoot) -> list[str]:
    rows = table(root)
    allowed = {layer: targets for layer, targets in rows}
    files = tracked_files(root)
    fileset = set(files)
    mods = python_modules(fileset)
    problems = []
    for f in files:
        if f.endswith(kCppSuffixes):
            edges = cpp_edges(root, f, fileset)
        elif f.endswith(".py"):
            edges = python_edges(root, f, fileset, mods)
        else:
            continue
        src = layer_of(f)
        if src not in allowed:
            problems.append(f"{f}: in no layer of the table in docs/architecture.md ({src})")
            continue
        for line, name, target in edges:
            if not target:
                if f.endswith(kCppSuffixes):
                    problems.append(f"{f}:{line}: #include \"{name}\" names no file of the repository")
                continue
            dst = layer_of(target)
            if dst != src and dst not in allowed[src]:
                problems.append(f"{f}:{line}: {src} -> {dst} ({name}) is not in the table "
                                f"({src} may depend on: {', '.join(sorted(allowed[src])) or 'nothing'})")
    return problems


def test_table_points_down_only():
    rows = table()
    order = [layer for layer, _ in rows]
    assert len(set(order)) == len(order), f"a layer appears twice: {order}"
    for i, (layer, targets) in enumerate(rows):
        for t in targets:
            assert t in order, f"{layer} -> {t}: {t} is not a layer of the table"
            assert order.index(t) > i, f"{layer} -> {t} points up: {t} is listed above {layer}"


def test_every_layer_is_a_folder():
    for layer, _ in table():
        assert (kRoot / layer).exists(), f"layer {layer} of docs/architecture.md does not exist"


def test_includes_and_imports_follow_the_table():
    problems = violations()
    assert not problems, "arrows outside docs/architecture.md's dependency table:\n" + "\n".join(problems)


def test_an_upward_arrow_fails_naming_file_line_and_arrow(tmp_path):
    """The check itself, on a small tree of its own (no git there: the file walk is used)."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "architecture.md").write_text(kArchitecture.read_text())
    for layer in ("harness", "plots", "rdma", "benchmarks/bench", "model"):
        (tmp_path / layer).mkdir(parents=True)
    (tmp_path / "plots" / "__init__.py").write_text("")
    (tmp_path / "harness" / "__init__.py").write_text("")
    (tmp_path / "harness" / "cli.py").write_text("import json\n\ndef report():\n    from plots import report\n")
    (tmp_path / "plots" / "figures.py").write_text("from harness import cli\n")
    (tmp_path / "benchmarks" / "bench" / "modes.h").write_text("#pragma once\n")
    (tmp_path / "rdma" / "session.cc").write_text('#include "rdma/session.h"\n#include "benchmarks/bench/modes.h"\n')
    (tmp_path / "rdma" / "session.h").write_text('#include "model/cost.h"\n')
    (tmp_path / "model" / "cost.h").write_text("#pragma once\n")
    found = violations(tmp_path)
    assert sorted(found) == sorted([
        "harness/cli.py:4: harness -> plots (plots) is not in the table (harness may depend on: nothing)",
        "rdma/session.cc:2: rdma -> benchmarks (benchmarks/bench/modes.h) is not in the table "
        "(rdma may depend on: nothing)",
        "rdma/session.h:1: rdma -> model (model/cost.h) is not in the table (rdma may depend on: nothing)",
    ]), found
