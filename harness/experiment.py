"""The experiment file: schema, strict validation and the in-memory form.

The reference of every key is KEYS below (the README's schema table is made from it), so
the documentation and the validator cannot drift apart.
"""
from __future__ import annotations

import dataclasses
import hashlib
import pathlib
import re
from typing import Any, Optional

from . import conclusions as conclusions_mod
from . import yamlloc
from .checker import Checker, type_name
from .yamlloc import ConfigError, LocDict

kSchemaVersion = 1
kBackends = ("softnic", "verbs", "model")
kPapers = ("herd14", "guide16", "nosql", "roce", "none")
kLinks = ("ib", "roce")
kRepeatOrders = ("point", "round")
kPlotKinds = ("line", "bar", "table")
kAggregates = ("sum", "mean", "max", "min")
# Metrics of a results row of rdmalab-bench/1 (contract 1) and of the model's rows (contract 3).
kMetrics = ("mops", "gbps", "lat_us_mean", "lat_us_stdev", "lat_us_min", "lat_us_p50", "lat_us_p90",
            "lat_us_p99", "lat_us_p999", "lat_us_p9999", "lat_us_max", "uniformity_ratio", "ops",
            "duration_s", "size_bytes", "pcie_bytes_per_op", "wire_bytes_per_op", "pcie_h2d_bytes", "wqe_bytes")
kIdPattern = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")  # spec ids such as guide16-appendixA
kRoleCountRef = re.compile(r"^\$([a-z][a-z0-9_]*)$")

# key -> (type text, required, meaning). Nested tables have their own dicts.
KEYS = {
    "schema": ("integer", False, f"experiment schema version; {kSchemaVersion} if given"),
    "id": ("string", True, "experiment id, equal to the file name without .yaml"),
    "title": ("string", True, "one-line title (figure caption)"),
    "description": ("string", False, "what is measured and how it relates to the paper"),
    "paper": ("mapping", False, "paper reference: id (herd14|guide16|nosql|roce|none), figure, notes"),
    "binary": ("string", False, "program run by every role; default: rdmalab-bench or rdmalab-kv, whichever declares "
                                "the mode in its --describe (looked up in --bin-dir, and in the host's bin_dir to run); "
                                "a path with / is relative to the experiment file and must answer --describe too"),
    "mode": ("string", False, "the program's mode, one its --describe declares (rdmalab-bench: `rdmalab-bench --describe`; "
                              "the model backend: rdmalab-model's); required unless the program has one mode"),
    "roles": ("mapping", True, "role name -> {count, placement, params}"),
    "params": ("mapping", False, "fixed parameters, each one the program declares for the mode; passed to every role "
                                "with the program's flag spelling, --flag=value (true: --flag; false: omitted unless "
                                "its default is true)"),
    "sweep": ("mapping or list", False, "{grid: {param: [values]}, zip: {param: [values]}, backends: [...]}, or a list "
                                       "of such blocks (their union); grid is a cross product, zip pairs values by "
                                       "position; a block with `backends` is left out on other backends (e.g. systems "
                                       "only the model represents yet, or a sweep a single softnic host cannot hold)"),
    "labels": ("list", False, "parameters that only label points (plot axes, tables); not checked against a program, "
                              "not passed to it nor to the model"),
    "model_params": ("mapping", False, "parameters sent only to the model backend, over the point's, on every model "
                                       "pass (e.g. simulate: true for latency under load), checked against "
                                       "rdmalab-model's description there; not part of the point id"),
    "paper_testbed": ("mapping", False, "model parameters that describe the paper's testbed, not what runs here (its "
                                        "NIC profile, window_bound: false for its many client machines, its cores): "
                                        "sent to the model only when it predicts the paper's NIC, over model_params; "
                                        "the prediction with a profile fitted to a measured backend leaves them out "
                                        "and predicts the configuration that ran; checked like model_params"),
    "repeats": ("integer", False, "runs of every point (default 1); plots draw error bars over them"),
    "repeat_order": ("string", False, "point (default: a point's repeats one after another) or round: every "
                                      "point once per round, so on a shared host each point's repeats sample "
                                      "the same stretches of load as the others' (calibration)"),
    "timeout_s": ("number", False, "deadline of one point, all roles (default 60); passed as --timeout"),
    "backends": ("list", False, f"backends the experiment supports (default all: {', '.join(kBackends)})"),
    "link": ("string", False, "softnic link layer: ib (default) or roce"),
    "plot": ("mapping", False, "figure specification (see plot keys)"),
    "reference": ("list", False, "paper's published values: [{x, y, series?, facet?, source?}]"),
    "conclusions": ("list", False, "the paper's conclusions for this figure as checkable statements "
                                   "(see conclusion keys); the report judges them on every run and on the model"),
}
ROLE_KEYS = {
    "count": ("integer or $param", False, "processes of the role (default 1); $name takes a parameter's value"),
    "placement": ("list of integers", False, "inventory host index per process (cycled); default: each process "
                                           "on the next host, servers first"),
    "params": ("mapping", False, "parameters for this role only (override params)"),
}
PLOT_KEYS = {
    "kind": ("string", False, f"{'|'.join(kPlotKinds)} (default line)"),
    "x": ("string", True, "parameter on the x axis"),
    "y": ("string", True, f"metric on the y axis: {', '.join(kMetrics)}"),
    "series": ("string or list", False, "parameter(s) whose values become separate lines (a list joins them)"),
    "facet": ("string", False, "parameter whose values become separate panels"),
    "role": ("string", False, "role whose documents give the metric (default: the first role that reports it)"),
    "aggregate": ("string", False, f"how processes of the role combine: {'|'.join(kAggregates)} "
                                   "(default sum for mops/gbps, else mean)"),
    "xlog": ("boolean", False, "logarithmic x axis"),
    "ylog": ("boolean", False, "logarithmic y axis"),
    "error_bars": ("boolean", False, "standard deviation over repeats (default true)"),
    "xlabel": ("string", False, "x axis label"),
    "ylabel": ("string", False, "y axis label"),
}
REFERENCE_KEYS = {
    "x": ("scalar", True, "x value (same parameter as plot.x)"),
    "y": ("number", True, "published value in the unit of plot.y"),
    "series": ("scalar", False, "series value it belongs to"),
    "facet": ("scalar", False, "facet value it belongs to"),
    "source": ("string", False, "where in the paper (e.g. 'Fig. 2, text')"),
}
PAPER_KEYS = {"id": ("string", True, "paper id"), "figure": ("string", False, "figure/table"),
              "notes": ("string", False, "free text")}
kScalarTypes = (str, int, float, bool)


@dataclasses.dataclass
class Role:
    name: str
    count: int | str            # an int, or the name of the parameter that gives it
    placement: Optional[list[int]]
    params: dict[str, Any]


@dataclasses.dataclass
class Experiment:
    path: pathlib.Path
    sha256: str
    id: str
    title: str
    description: str
    paper: dict[str, Any]
    binary: Optional[str]       # None: chosen by mode at load time (validate.py)
    mode: Optional[str]
    roles: list[Role]
    params: dict[str, Any]
    sweep: list[dict[str, Any]]
    repeats: int
    timeout_s: float
    backends: list[str]
    link: str
    plot: dict[str, Any]
    reference: list[dict[str, Any]]
    labels: list[str] = dataclasses.field(default_factory=list)
    repeat_order: str = "point"
    model_params: dict[str, Any] = dataclasses.field(default_factory=dict)
    paper_testbed: dict[str, Any] = dataclasses.field(default_factory=dict)
    conclusions: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    node: LocDict = dataclasses.field(repr=False, default=None)  # type: ignore[assignment]
    # The description of the program that runs it on the loaded backend (describe.Description),
    # set by validate.load; the runner passes on only the parameters it declares.
    program: Any = dataclasses.field(repr=False, default=None)

    def parameter_names(self) -> set[str]:
        names = set(self.params)
        for block in self.sweep:
            for table in (block.get("grid", {}), block.get("zip", {})):
                names |= set(table)
        return names

    def binary_line(self) -> int:
        return self.node.line_of("binary") if "binary" in self.node else self.node.line


def _check_scalar_map(ck: Checker, node: LocDict, where: str) -> dict[str, Any]:
    out = {}
    for key, value in node.items():
        if not ck.name(node, key, where, key):
            continue
        if not isinstance(value, kScalarTypes):
            ck.error(node.line_of(key), where, f"parameter {key} must be a string, number or boolean, "
                                               f"got {type_name(value)} {value!r}")
            continue
        out[key] = value
    return out


def _check_sweep_block(ck: Checker, node: Any, line: int, where: str) -> dict[str, Any]:
    if not isinstance(node, dict):
        ck.error(line, where, f"a sweep block must be a mapping with grid and/or zip, got {type_name(node)}")
        return {}
    ck.keys(node, where, ("grid", "zip", "backends"))
    block: dict[str, Any] = {}
    if "backends" in node:
        only = node["backends"]
        if not isinstance(only, list) or not only or any(b not in kBackends for b in only):
            ck.error(node.line_of("backends"), where, f"backends must be a non-empty list of {', '.join(kBackends)}, "
                                                      f"got {only!r}")
        else:
            block["backends"] = list(only)
    for kind in ("grid", "zip"):
        table = ck.mapping(node, kind, where)
        if table is None:
            continue
        block[kind] = {}
        lengths = set()
        for key, values in table.items():
            if not ck.name(table, key, f"{where}.{kind}", key):
                continue
            if not isinstance(values, list) or not values:
                ck.error(table.line_of(key), f"{where}.{kind}", f"{key} must be a non-empty list of values, "
                                                                 f"got {type_name(values)} {values!r}")
                continue
            for i, v in enumerate(values):
                if not isinstance(v, kScalarTypes):
                    ck.error(values.line_of(i), f"{where}.{kind}.{key}",
                             f"value must be a string, number or boolean, got {type_name(v)}")
            if kind == "grid" and len(set(map(repr, values))) != len(values):
                ck.error(table.line_of(key), f"{where}.{kind}", f"{key} lists a value twice: {list(values)}")
            block[kind][key] = list(values)
            lengths.add(len(values))
        if kind == "zip" and len(lengths) > 1:
            ck.error(node.line_of("zip"), where, "zip lists must have equal lengths, got "
                     + ", ".join(f"{k}: {len(v)}" for k, v in block[kind].items()))
        elif kind == "zip" and block[kind]:
            rows = list(zip(*(map(repr, v) for v in block[kind].values())))
            if len(set(rows)) != len(rows):
                ck.error(node.line_of("zip"), where, "zip has the same row twice: "
                         + ", ".join(f"{k}={v[rows.index(r)]}" for r in rows if rows.count(r) > 1 for k, v in block[kind].items()))
    both = set(block.get("grid", {})) & set(block.get("zip", {}))
    if both:
        ck.error(node.line, where, f"parameter(s) {', '.join(sorted(both))} in both grid and zip")
    return block


def parse(path: str | pathlib.Path) -> Experiment:
    path = pathlib.Path(path)
    return parse_node(path, yamlloc.load(path))


def parse_node(path: pathlib.Path, data: Any) -> Experiment:
    """An experiment from a mapping loaded by yamlloc, its errors at the lines it carries (the
    explorer builds one from a space file, whose lines it keeps)."""
    ck = Checker(str(path))
    if not isinstance(data, dict):
        raise ConfigError(f"{path}:1: an experiment file must be a mapping, got {type_name(data)}")
    ck.keys(data, "experiment", KEYS, [k for k, v in KEYS.items() if v[1]])
    str_keys = ("id", "title", "description", "binary", "mode", "link")
    for key in str_keys:
        if key in data:
            ck.typed(data, key, "experiment", (str,), "a string")
    if "schema" in data and data["schema"] != kSchemaVersion:
        ck.error(data.line_of("schema"), "experiment", f"schema {data['schema']!r} is not supported; valid: {kSchemaVersion}")
    exp_id = data.get("id", "")
    if isinstance(exp_id, str) and "id" in data:
        if not kIdPattern.match(exp_id):
            ck.error(data.line_of("id"), "experiment", f"id {exp_id!r} must match [A-Za-z0-9][A-Za-z0-9._-]*")
        elif exp_id != path.stem:
            ck.error(data.line_of("id"), "experiment", f"id {exp_id!r} differs from the file name {path.stem!r}")
    mode = data.get("mode")
    binary = data.get("binary")
    if isinstance(binary, str) and "/" in binary:
        resolved = (path.parent / binary).resolve()
        if not resolved.is_file():
            ck.error(data.line_of("binary"), "experiment", f"binary {binary!r} does not exist (looked for {resolved})")
        binary = str(resolved)
    paper = {}
    if (pnode := ck.mapping(data, "paper", "experiment")) is not None:
        ck.keys(pnode, "paper", PAPER_KEYS, ("id",))
        if "id" in pnode:
            ck.choice(pnode, "id", "paper", kPapers)
        for key in ("figure", "notes"):
            if key in pnode:
                ck.typed(pnode, key, "paper", (str,), "a string")
        paper = yamlloc.plain(pnode)
    params = {}
    if (pnode := ck.mapping(data, "params", "experiment")) is not None:
        params = _check_scalar_map(ck, pnode, "params")
    model_params = {}
    if (pnode := ck.mapping(data, "model_params", "experiment")) is not None:
        model_params = _check_scalar_map(ck, pnode, "model_params")
    paper_testbed = {}
    if (pnode := ck.mapping(data, "paper_testbed", "experiment")) is not None:
        paper_testbed = _check_scalar_map(ck, pnode, "paper_testbed")
    for key in sorted(set(model_params) & set(paper_testbed)):
        ck.error(data["paper_testbed"].line_of(key), "paper_testbed",
                 f"{key} is in both model_params and paper_testbed; keep one (paper_testbed: the paper's testbed only)")

    sweep: list[dict[str, Any]] = []
    raw_sweep = data.get("sweep")
    if isinstance(raw_sweep, list):
        for i, block in enumerate(raw_sweep):
            sweep.append(_check_sweep_block(ck, block, raw_sweep.line_of(i), f"sweep[{i}]"))
    elif raw_sweep is not None:
        sweep.append(_check_sweep_block(ck, raw_sweep, data.line_of("sweep"), "sweep"))
    swept: set[str] = set()
    for block in sweep:
        for table in (block.get("grid", {}), block.get("zip", {})):
            swept |= set(table)
    for key in sorted(swept & set(params)):
        ck.error(params_line(data, key), "params", f"{key} is both fixed in params and swept; keep one")
    known = swept | set(params)

    roles = _check_roles(ck, data, params, sweep, known)

    repeats, timeout_s, backends, link, labels = _check_run_keys(ck, data, known)
    plot = _check_plot(ck, data, known)
    reference = _check_reference(ck, data)
    conclusions = conclusions_mod.check(ck, data, plot, params, sweep, labels, tuple(backends or ()))
    ck.raise_if_any()
    return Experiment(path=path.resolve(), sha256=hashlib.sha256(path.read_bytes()).hexdigest(), id=exp_id,
                      title=data["title"], description=data.get("description", ""), paper=paper,
                      binary=binary, mode=mode, roles=roles, params=params, sweep=sweep, repeats=repeats,
                      timeout_s=float(timeout_s), backends=backends, link=link, plot=plot,
                      reference=reference, labels=labels, repeat_order=data.get("repeat_order", "point"),
                      model_params=model_params, paper_testbed=paper_testbed,
                      conclusions=conclusions, node=data)


def _check_run_keys(ck: Checker, data: LocDict, known: set[str]) -> tuple[int, float, list[str], str, list[str]]:
    """repeats, timeout_s, backends, link, labels."""
    repeats = data.get("repeats", 1)
    if "repeats" in data and ck.typed(data, "repeats", "experiment", (int,), "a positive integer") and repeats < 1:
        ck.error(data.line_of("repeats"), "experiment", f"repeats must be at least 1, got {repeats}")
    timeout_s = data.get("timeout_s", 60)
    if "timeout_s" in data and ck.typed(data, "timeout_s", "experiment", (int, float), "a number of seconds") and timeout_s <= 0:
        ck.error(data.line_of("timeout_s"), "experiment", f"timeout_s must be positive, got {timeout_s}")
    backends = list(kBackends)
    if "backends" in data:
        bl = data["backends"]
        if not isinstance(bl, list) or not bl:
            ck.error(data.line_of("backends"), "experiment", f"backends must be a non-empty list of {', '.join(kBackends)}")
        else:
            for i in range(len(bl)):
                ck.choice(bl, i, "backends", kBackends)
            backends = list(bl)
    link = data.get("link", "ib")
    if "link" in data and isinstance(link, str):
        ck.choice(data, "link", "experiment", kLinks)
    if "repeat_order" in data:
        ck.choice(data, "repeat_order", "experiment", kRepeatOrders)

    labels: list[str] = []
    if "labels" in data:
        lab = data["labels"]
        if not isinstance(lab, list):
            ck.error(data.line_of("labels"), "experiment", f"labels must be a list of parameter names, got {type_name(lab)}")
        else:
            for i, name in enumerate(lab):
                if name not in known:
                    ck.error(lab.line_of(i), "labels", f"{name!r} is not a parameter; parameters: {', '.join(sorted(known))}")
            labels = list(lab)
    return repeats, timeout_s, backends, link, labels


def _values_of(name: str, params: dict[str, Any], sweep: list[dict[str, dict[str, list[Any]]]]) -> list[Any]:
    values = [params[name]] if name in params else []
    for block in sweep:
        for table in (block.get("grid", {}), block.get("zip", {})):
            values += table.get(name, [])
    return values


def _check_roles(ck: Checker, data: LocDict, params: dict[str, Any],
                 sweep: list[dict[str, dict[str, list[Any]]]], known: set[str]) -> list[Role]:
    roles: list[Role] = []
    if (rnode := ck.mapping(data, "roles", "experiment")) is not None:
        if not rnode:
            ck.error(rnode.line, "roles", "at least one role is needed")
        for name, spec in rnode.items():
            where = f"roles.{name}"
            if not ck.name(rnode, name, "roles", name):
                continue
            if spec is None:
                spec = LocDict()
                spec.path, spec.line, spec.key_lines = ck.path, rnode.line_of(name), {}
            if not isinstance(spec, dict):
                ck.error(rnode.line_of(name), where, f"a role must be a mapping, got {type_name(spec)}")
                continue
            ck.keys(spec, where, ROLE_KEYS)
            count: int | str = 1
            if "count" in spec:
                raw = spec["count"]
                m = kRoleCountRef.match(raw) if isinstance(raw, str) else None
                if m:
                    count = m.group(1)
                    if count not in known:
                        ck.error(spec.line_of("count"), where, f"count refers to ${count}, which is not a parameter; "
                                 f"parameters: {', '.join(sorted(known)) or 'none'}")
                    bad = [v for v in _values_of(count, params, sweep)
                           if not isinstance(v, int) or isinstance(v, bool) or v < 1]
                    if bad:
                        ck.error(spec.line_of("count"), where, f"count ${count} takes values {bad!r}; "
                                                               "a process count must be a positive integer")
                elif not isinstance(raw, int) or isinstance(raw, bool) or raw < 1:
                    ck.error(spec.line_of("count"), where, f"count must be a positive integer or $param, got {raw!r}")
                else:
                    count = raw
            placement = None
            if "placement" in spec:
                pl = spec["placement"]
                if not isinstance(pl, list) or not pl or not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in pl):
                    ck.error(spec.line_of("placement"), where, f"placement must be a non-empty list of host indices (0, 1, ...), got {pl!r}")
                else:
                    placement = list(pl)
            rparams = {}
            if (pn := ck.mapping(spec, "params", where)) is not None:
                rparams = _check_scalar_map(ck, pn, f"{where}.params")
            roles.append(Role(name, count, placement, rparams))
    return roles


def params_line(data: LocDict, key: str) -> int:
    p = data.get("params")
    return p.line_of(key) if isinstance(p, dict) else data.line


def _check_plot(ck: Checker, data: LocDict, known: set[str]) -> dict[str, Any]:
    pnode = ck.mapping(data, "plot", "experiment")
    if pnode is None:
        return {}
    ck.keys(pnode, "plot", PLOT_KEYS, [k for k, v in PLOT_KEYS.items() if v[1]])
    axis_choices = sorted(known | {"repeat"})
    for key in ("x", "series", "facet"):
        if key not in pnode:
            continue
        value = pnode[key]
        names = value if key == "series" and isinstance(value, list) else [value]
        if not all(isinstance(n, str) for n in names) or not names:
            ck.error(pnode.line_of(key), "plot", f"{key} must be a parameter name{' or a list of them' if key == 'series' else ''}, "
                                                 f"got {type_name(value)} {value!r}")
            continue
        for n in names:
            if n not in axis_choices:
                ck.error(pnode.line_of(key), "plot", f"{key} {n!r} is not a parameter of this experiment; "
                                                     f"valid: {', '.join(axis_choices)}")
    if "y" in pnode and ck.typed(pnode, "y", "plot", (str,), "a metric name"):
        ck.choice(pnode, "y", "plot", kMetrics)
    if "kind" in pnode and ck.typed(pnode, "kind", "plot", (str,), "a string"):
        ck.choice(pnode, "kind", "plot", kPlotKinds)
    if "aggregate" in pnode and ck.typed(pnode, "aggregate", "plot", (str,), "a string"):
        ck.choice(pnode, "aggregate", "plot", kAggregates)
    roles = data.get("roles") if isinstance(data.get("roles"), dict) else {}
    if "role" in pnode and ck.typed(pnode, "role", "plot", (str,), "a role name") and roles:
        ck.choice(pnode, "role", "plot", list(roles))
    for key in ("xlog", "ylog", "error_bars"):
        if key in pnode:
            ck.typed(pnode, key, "plot", (bool,), "true or false")
    for key in ("xlabel", "ylabel"):
        if key in pnode:
            ck.typed(pnode, key, "plot", (str,), "a string")
    return yamlloc.plain(pnode)


def _check_reference(ck: Checker, data: LocDict) -> list[dict[str, Any]]:
    if "reference" not in data:
        return []
    refs = data["reference"]
    if not isinstance(refs, list):
        ck.error(data.line_of("reference"), "reference", f"must be a list of {{x, y, ...}}, got {type_name(refs)}")
        return []
    if "plot" not in data:
        ck.error(data.line_of("reference"), "reference", "reference values need a plot (they are drawn on it)")
    out = []
    for i, r in enumerate(refs):
        where = f"reference[{i}]"
        if not isinstance(r, dict):
            ck.error(refs.line_of(i), where, f"must be a mapping {{x, y, ...}}, got {type_name(r)}")
            continue
        ck.keys(r, where, REFERENCE_KEYS, ("x", "y"))
        if "y" in r:
            ck.typed(r, "y", where, (int, float), "a number")
        for key in ("x", "series", "facet"):
            if key in r:
                ck.typed(r, key, where, kScalarTypes, "a scalar")
        out.append(yamlloc.plain(r))
    return out
