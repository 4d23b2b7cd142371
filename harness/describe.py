"""The programs' own descriptions (`BIN --describe`, schema rdmalab-describe/1): every mode,
system and parameter with its type, range or choices, unit and scope.

They are the one source of the names the harness accepts: experiment files are validated
against them (validate.py) and only the parameters they declare are passed on (runner.py).
rdmalab-model's takes the programs' declarations (model/programs.h): a name the two programs
declare apart (keys, cq_mod, ...) is listed once per declaration, each naming its `modes`, and a
parameter where the model departs from its program says so in `departs` (the program's own
values, and why).
A description is cached per build of a binary: the cache file is keyed by the binary's path,
size and modification time, so a rebuilt binary is described again.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import pathlib
import subprocess
from typing import Any, Optional

kSchema = "rdmalab-describe/1"
kDescribeTimeoutS = 20
kCacheEnv = "RDMALAB_CACHE_DIR"     # default: $XDG_CACHE_HOME/rdmalab, else ~/.cache/rdmalab
kScopeExperiment = "experiment"     # an experiment file may set it
kScopeCoordinator = "coordinator"   # the harness sets it from the inventory and the run
kTypes = ("integer", "number", "boolean", "string")


class DescribeError(Exception):
    """A program that cannot be described: missing, not answering --describe, or a bad document."""


@dataclasses.dataclass(frozen=True)
class Param:
    name: str
    type: str
    flag: Optional[str] = None
    list: bool = False
    unit: Optional[str] = None
    min: Optional[float] = None
    max: Optional[float] = None
    choices: Optional[tuple[Any, ...]] = None
    default: Any = None
    scope: str = kScopeExperiment
    effect: Optional[str] = None
    help: str = ""
    roles: Optional[tuple[str, ...]] = None  # the roles whose process reads it; None: not said (the model)
    # The model's: the program's own values of the fields it departs from ({"default": 128, ...}).
    departs_from: Optional[dict[str, Any]] = dataclasses.field(default=None, compare=False, hash=False)


@dataclasses.dataclass(frozen=True)
class Group:
    """A mode or a system: the names of the parameters it takes."""
    name: str
    summary: str
    params: tuple[str, ...]
    display: str = ""   # a system's name in figures; empty: its name


@dataclasses.dataclass(frozen=True)
class Description:
    program: str
    path: str
    backends: tuple[str, ...]
    params: dict[str, Param]
    modes: dict[str, Group]
    systems: dict[str, Group]
    # Per mode, the declarations that replace `params` for it (a name declared apart per mode).
    by_mode: dict[str, dict[str, Param]] = dataclasses.field(default_factory=dict)

    def for_mode(self, mode: Optional[str]) -> "Description":
        """The description as the mode sees it: its own declaration of each name declared apart."""
        own = self.by_mode.get(mode or "")
        return dataclasses.replace(self, params={**self.params, **own}, by_mode={}) if own else self

    def takes(self, mode: str, name: str) -> bool:
        """Whether the mode takes the parameter and an experiment may set it."""
        m = self.modes.get(mode)
        p = self.params.get(name)
        return m is not None and p is not None and name in m.params and p.scope == kScopeExperiment

    def settable(self, mode: str) -> list[str]:
        """The parameters of a mode an experiment file may set, in table order."""
        m = self.modes.get(mode)
        return [n for n in m.params if self.params[n].scope == kScopeExperiment] if m else []


def _group(raw: Any, kind: str, params: dict[str, Param], source: str) -> Group:
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str) or not isinstance(raw.get("params"), list):
        raise DescribeError(f"{source}: a {kind} must be {{name, summary, params: [...]}}, got {raw!r:.80}")
    unknown = [n for n in raw["params"] if n not in params]
    if unknown:
        raise DescribeError(f"{source}: {kind} {raw['name']} names parameters it does not declare: {', '.join(unknown)}")
    return Group(raw["name"], str(raw.get("summary", "")), tuple(raw["params"]), str(raw.get("display", "")))


def from_json(doc: Any, path: str, source: str) -> Description:
    """A description document, checked for what the harness relies on."""
    if not isinstance(doc, dict) or doc.get("schema_version") != kSchema:
        version = doc.get("schema_version") if isinstance(doc, dict) else None
        raise DescribeError(f"{source}: schema_version is {version!r}, expected {kSchema!r}")
    params: dict[str, Param] = {}
    by_mode: dict[str, dict[str, Param]] = {}
    for raw in doc.get("params") or []:
        if not isinstance(raw, dict) or not isinstance(raw.get("name"), str) or raw.get("type") not in kTypes:
            raise DescribeError(f"{source}: a parameter must have a name and a type among {', '.join(kTypes)}, "
                                f"got {raw!r:.120}")
        choices = raw.get("choices")
        departs = raw.get("departs")
        param = Param(
            name=raw["name"], type=raw["type"], flag=raw.get("flag"), list=bool(raw.get("list", False)),
            unit=raw.get("unit"), min=raw.get("min"), max=raw.get("max"),
            choices=tuple(choices) if isinstance(choices, list) else None, default=raw.get("default"),
            scope=raw.get("scope", kScopeExperiment), effect=raw.get("effect"), help=str(raw.get("help", "")),
            roles=tuple(raw["roles"]) if isinstance(raw.get("roles"), list) else None,
            departs_from=departs.get("program") if isinstance(departs, dict) else None)
        params.setdefault(param.name, param)
        for mode in raw.get("modes") or []:
            by_mode.setdefault(mode, {})[param.name] = param
    modes = {g.name: g for g in (_group(m, "mode", params, source) for m in doc.get("modes") or [])}
    if not modes:
        raise DescribeError(f"{source}: the description declares no mode")
    systems = {g.name: g for g in (_group(s, "system", params, source) for s in doc.get("systems") or [])}
    return Description(program=str(doc.get("program", pathlib.Path(path).name)), path=path,
                       backends=tuple(doc.get("backends") or ()), params=params, modes=modes, systems=systems,
                       by_mode=by_mode)


def cache_dir() -> pathlib.Path:
    if os.environ.get(kCacheEnv):
        return pathlib.Path(os.environ[kCacheEnv])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(base) / "rdmalab"


def _cache_file(path: pathlib.Path, st: os.stat_result) -> pathlib.Path:
    key = hashlib.sha256(f"{path}\0{st.st_size}\0{st.st_mtime_ns}".encode()).hexdigest()[:32]
    return cache_dir() / "describe" / f"{path.name}-{key}.json"


def _run_describe(path: pathlib.Path) -> Any:
    try:
        r = subprocess.run([str(path), "--describe"], capture_output=True, text=True, timeout=kDescribeTimeoutS,
                           stdin=subprocess.DEVNULL)
    except OSError as exc:
        raise DescribeError(f"{path} --describe could not start: {exc.strerror}") from None
    except subprocess.TimeoutExpired:
        raise DescribeError(f"{path} --describe gave no answer within {kDescribeTimeoutS} s") from None
    if r.returncode != 0:
        last = [ln for ln in r.stderr.splitlines() if ln.strip()]
        raise DescribeError(f"{path} --describe exited {r.returncode}"
                            + (f": {last[-1].strip()}" if last else "")
                            + f"; every program the harness runs must print its description ({kSchema})")
    try:
        return json.loads(r.stdout)
    except json.JSONDecodeError as exc:
        raise DescribeError(f"{path} --describe printed no JSON document ({exc.msg} at line {exc.lineno}); "
                            f"expected {kSchema}") from None


_memo: dict[tuple[str, int, int], Description] = {}


def describe(binary: str | pathlib.Path) -> Description:
    """The program's description, from the cache when this build of it was described before."""
    path = pathlib.Path(binary).resolve()
    try:
        st = path.stat()
    except OSError:
        raise DescribeError(f"{binary} does not exist") from None
    memo_key = (str(path), st.st_size, st.st_mtime_ns)
    if memo_key in _memo:
        return _memo[memo_key]
    cached = _cache_file(path, st)
    doc = None
    try:
        entry = json.loads(cached.read_text())
        if entry.get("binary") == str(path) and entry.get("size") == st.st_size and entry.get("mtime_ns") == st.st_mtime_ns:
            doc = entry["description"]
    except (OSError, ValueError, KeyError, AttributeError):
        pass
    from_cache = doc is not None
    if doc is None:
        doc = _run_describe(path)
    desc = from_json(doc, str(binary), f"{binary} --describe")
    if not from_cache:
        try:  # best effort: without a writable cache every run describes again
            cached.parent.mkdir(parents=True, exist_ok=True)
            tmp = cached.with_suffix(f".tmp{os.getpid()}")
            tmp.write_text(json.dumps({"binary": str(path), "size": st.st_size, "mtime_ns": st.st_mtime_ns,
                                       "description": doc}))
            os.replace(tmp, cached)
        except OSError:
            pass
    _memo[memo_key] = desc
    return desc
