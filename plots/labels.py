"""Human labels for figures: series, facets, categories and axes, from the tables that own the names.

The programs describe themselves (`BIN --describe`, read through harness.describe): every system's
and mode's summary and display name (a kv system's, declared in its row), every parameter's unit
and help. What a reader needs beyond that is a short display name per described design and verb,
kept here in one table keyed by the described names; tests/python/test_figure_text.py checks that
every system, design and verb the programs describe has one, and that a kv system's summary names
it, so a new one without a display name fails a test.

Nothing here returns "None" or an internal key=value string: a series' parameter that a point does
not carry is left out of its label, a boolean is named by its meaning ("batching" / "no batching").
"""
from __future__ import annotations

import functools
import pathlib
from typing import Any, Iterator, Optional

from harness.describe import DescribeError, Description, describe

kRoot = pathlib.Path(__file__).resolve().parents[1]
kPrograms = ("rdmalab-kv", "rdmalab-bench", "rdmalab-model")

# Display names of described values, keyed by parameter, then by the described name.
kDesigns = {  # the sequencer's designs (rdmalab-bench sequencer, guide16 Fig. 7)
    "herd-rpc": "HERD-RPC", "herd-rpc-batch": "HERD-RPC + batching", "herd-rpc-mq": "HERD-RPC + multi-queue",
    "spec-s0": "Spec-S0", "atomics": "atomics",
}
kVerbs = {
    "read": "READ", "write": "WRITE", "write_inline": "WRITE (inline)", "send": "SEND",
    "send_inline": "SEND (inline)", "cas": "CAS", "faa": "FAA",
}
kProfiles = {  # model/profiles/*.yaml by name
    "cx": "ConnectX", "cx-nosql": "ConnectX DDR", "cx3": "ConnectX-3", "cx3-pcie2": "ConnectX-3 (PCIe 2.0)",
    "cx3-roce": "ConnectX-3 RoCE", "cib": "Connect-IB", "cib-pciebench": "Connect-IB (pcie-bench headers)",
    "cx5": "ConnectX-5", "cx6": "ConnectX-6",
    "host-engine": "host engine (template)", "softnic": "softnic (measured)",
}
kChoices: dict[str, dict[Any, str]] = {
    "design": kDesigns, "verb": kVerbs, "request": kVerbs, "response": kVerbs,
    "profile": kProfiles,
    "method": {"dma": "DMA", "mmio": "MMIO", "doorbell": "Doorbell"},
    "stack": {"rdma": "RDMA", "udp": "UDP (kernel)", "tcp": "TCP (kernel)", "raw": "raw packets"},
    "distribution": {"none": "own slot", "uniform": "uniform", "zipf": "Zipf"},
    "placement": {"clustered": "clustered", "unclustered": "unclustered"},
    "lat_method": {"completion": "until completion", "pingpong": "ping-pong"},
    "lock_placement": {"spread": "locks 8 B apart", "same-bits": "locks 4 KiB apart"},
    "direction": {"inbound": "inbound", "outbound": "outbound", "alltoall": "all-to-all"},
    "wqe_type": {"rc_uc": "RC/UC", "ud": "UD", "recv": "RECV"},
    "link": {"ib": "InfiniBand", "roce": "RoCE"},
    "numa": {"device": "device's node", "near": "near", "far": "far"},
    "formula": {"transfer": "transfer", "wqe_header": "WQE header", "wqe_batch": "WQE batch"},
    "protocol": {"text": "text protocol", "binary": "binary protocol"},
    "verb_mode": {"send-ud-mmio": "UD SEND, MMIO", "send-ud-doorbell": "UD SEND, Doorbell",
                  "read-inbound": "RC READ, inbound", "write-uc-outbound": "UC WRITE, outbound"},
    "study": {"numa": "NUMA placement", "page-offset": "page offset (bytes)", "reused-blocks": "reused blocks"},
}
# A boolean series or facet by its meaning: (true, false).
kBooleans = {
    "batching": ("batching", "no batching"), "prefetch": ("prefetch", "no prefetch"),
    "header_only": ("header only", "with payload"), "inline_recv": ("inline receive", "no inline receive"),
    "pipeline": ("pipelined", "not pipelined"), "preload": ("preloaded", "not preloaded"),
    "events": ("events", "polling"), "validate": ("validated", "not validated"),
}
# Values that name themselves without their parameter's noun ("FaRM-em", not "system FaRM-em").
kSelfNamed = {"system", "design", "verb", "request", "response", "profile", "stack", "link", "verb_mode", "wqe_type",
              "lock_placement", "study", "formula", "protocol"}
# Nouns of parameters and metrics where the name alone does not read (x labels, numeric series).
kNouns = {
    "post_list": "Doorbell batch", "batch": "Doorbell batch", "tx_depth": "window", "qp": "QPs", "sge": "SGEs",
    "size": "payload", "value_size": "value size", "key_size": "key size", "wqes": "WQEs", "wqe_size": "WQE size",
    "io_batch": "I/O batch", "put_fraction": "PUT fraction", "get_fraction": "GET fraction",
    "clients": "clients", "workers": "server cores", "threads": "threads", "nodes": "machines", "core": "core",
    "verb_mode": "verb", "step": "optimizations", "numa": "NUMA placement", "setting": "setting", "study": "study",
}
kMetrics = {
    "mops": "throughput (Mops)", "gbps": "throughput (Gb/s)", "lat_us_mean": "average latency (us)",
    "lat_us_p50": "median latency (us)", "lat_us_p99": "99th percentile latency (us)",
    "pcie_h2d_bytes": "CPU-to-NIC PCIe bytes", "wqe_bytes": "WQE bytes", "uniformity_ratio": "uniformity ratio",
}
# Counted things: a number of them reads "4 QPs", "1 thread".
kCounts = {
    "clients": ("client", "clients"), "threads": ("thread", "threads"), "workers": ("server core", "server cores"),
    "qp": ("QP", "QPs"), "sge": ("SGE", "SGEs"), "keys": ("key", "keys"), "counters": ("counter", "counters"),
    "accesses": ("access", "accesses"), "nodes": ("machine", "machines"), "wqes": ("WQE", "WQEs"),
}
# Units too long for a label read shorter.
kShortUnits = {"bytes": "B"}


def _descriptions() -> Iterator[Description]:
    """The built programs' descriptions, in kPrograms' order."""
    for prog in kPrograms:
        path = kRoot / "build" / "bin" / prog
        if not path.is_file():
            continue
        try:
            yield describe(path)
        except DescribeError:
            continue


@functools.lru_cache(maxsize=1)
def units() -> dict[str, str]:
    """Each parameter's unit as the programs describe it (the first program that gives one)."""
    out: dict[str, str] = {}
    for desc in _descriptions():
        for name, p in desc.params.items():
            if p.unit and name not in out:
                out[name] = p.unit
    return out


@functools.lru_cache(maxsize=1)
def systems() -> dict[str, str]:
    """Each kv system's display name as its row declares it (kv/core/systems.cc; the model's own)."""
    out: dict[str, str] = {}
    for desc in _descriptions():
        for name, s in desc.systems.items():
            out.setdefault(name, s.display or name)
    return out


def parse(text: Any) -> Any:
    """A value as it was written into a compound series key ("/".join(str(v))): back to its type."""
    if not isinstance(text, str):
        return text
    if text == "None":
        return None
    if text in ("True", "False"):
        return text == "True"
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


kSiFromAbs = 10_000  # from here on a number reads with an SI prefix: 12.5k, not 12500


def si(v: float) -> str:
    """A number of at least kSiFromAbs with its SI prefix, three significant digits."""
    for div, prefix in ((1_000_000_000, "G"), (1_000_000, "M"), (1_000, "k")):
        if abs(v) >= div:
            return f"{v / div:.3g}{prefix}"
    return f"{v:.3g}"


def number(v: float) -> str:
    """A number as a reader writes it: no trailing .0, thousands grouped with SI prefixes above 10^4."""
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if isinstance(v, int):
        return si(v) if abs(v) >= kSiFromAbs else str(v)
    return f"{v:.3g}"


def noun(name: str) -> str:
    return kNouns.get(name, name.replace("_", " "))


def unit(name: str) -> Optional[str]:
    return units().get(name)


def value(name: Optional[str], v: Any, *, with_noun: bool = True) -> Optional[str]:
    """One parameter's value for a reader; None when the point does not carry the parameter."""
    v = parse(v)
    if v is None:
        return None
    if name is None:
        return str(v)
    table = systems() if name == "system" else kChoices.get(name)
    if table is not None and v in table:
        return table[v]
    if isinstance(v, bool):
        yes, no = kBooleans.get(name, (noun(name), f"no {noun(name)}"))
        return yes if v else no
    if isinstance(v, (int, float)):
        if not with_noun:
            return number(v)
        if name in ("put_fraction", "get_fraction"):
            return f"{number(v * 100)}% {'PUTs' if name == 'put_fraction' else 'GETs'}"
        if name in ("post_list", "batch"):
            return "no batching" if v == 1 else f"Doorbell batch {number(v)}"
        if name in kCounts:
            one, many = kCounts[name]
            return f"{number(v)} {one if v == 1 else many}"
        u = unit(name)
        return f"{noun(name)} {number(v)}" + (f" {kShortUnits.get(u, u)}" if u else "")
    return str(v).replace("_", " ")


def point(name: Optional[str], v: Any) -> str:
    """An x value named on its own (a note, a reference point): with its parameter's noun."""
    text = value(name, v) or str(v)
    if not name or name in kSelfNamed or not isinstance(parse(v), str) or noun(name).lower() in text.lower():
        return text
    return f"{noun(name)} {text}"


def series_names(plot: dict[str, Any]) -> list[str]:
    s = plot.get("series")
    return list(s) if isinstance(s, list) else ([s] if s else [])


def series(plot: dict[str, Any], key: Any) -> str:
    """A series' label from its key (a value, or "/"-joined values of several parameters)."""
    names = series_names(plot)
    if not names:
        return ""
    parts = str(key).split("/") if len(names) > 1 and isinstance(key, str) else [key]
    if len(parts) != len(names):
        parts = [key] + [None] * (len(names) - 1)
    vals = {n: parse(p) for n, p in zip(names, parts)}
    out = []
    for n in names:
        v = vals[n]
        if v is None or (n == "connection" and vals.get("verb") is not None) \
                or (n == "response" and vals.get("request") is not None):
            continue  # not carried by the point, or folded into the verb or the request
        if n == "verb" and vals.get("connection") is not None:  # "UC WRITE"
            out.append(f"{vals['connection']} {value('verb', v)}")
        elif n == "request" and vals.get("response") is not None:
            out.append(f"{value('request', v)} request, {value('response', vals['response'])} response")
        else:
            out.append(value(n, v) or "")
    return ", ".join(t for t in out if t)


def facet(plot: dict[str, Any], v: Any) -> str:
    return value(plot.get("facet"), v) or ""


def category(name: Optional[str], v: Any) -> str:
    """A bar's or a table row's x value."""
    if name is None:
        return str(v)
    text = value(name, v, with_noun=False)
    return "" if text is None else text


def axis(plot: dict[str, Any], which: str) -> str:
    """An axis label: the plot spec's, else the metric's or the parameter's noun with its unit."""
    if plot.get(f"{which}label"):
        return str(plot[f"{which}label"])
    name = plot.get(which) or ""
    if which == "y":
        return kMetrics.get(name, name.replace("_", " "))
    u = unit(name)
    return f"{noun(name)} ({u})" if u and u != noun(name) else noun(name)


def profiles(names: list[str]) -> str:
    return ", ".join(kProfiles.get(n, n) for n in names)
