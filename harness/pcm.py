"""PCIe-counter sidecar: Intel PCM's pcm-pcie on responder nodes during a verbs point.

pcm-pcie -csv -B prints, once per interval, a header line starting with "Skt", one row per
socket and (some versions) a "*" total row; "PCIe Rd (B)" / "PCIe Wr (B)" are bytes moved in
the interval (64 B per counted transfer), so bytes/s at the default 1 s interval. Where PCM
cannot run (not an Intel server CPU, a VM, no MSR access, not installed) the point records
why instead of numbers. The sidecar starts through the host's launcher like a role (so over
ssh or srun too) and is stopped like one (SIGTERM: PCM restores the uncore state on exit).
"""
from __future__ import annotations

import csv
import io
import os
import pathlib
import shutil
from typing import IO, Any, Callable, Optional

from .inventory import Host
from .launch_local import Proc

kIntervalS = 1.0
kReadColumn = "PCIe Rd (B)"
kWriteColumn = "PCIe Wr (B)"
kLineBytes = 64  # PCM counts whole cache lines (PCIRdCur and friends), reported in bytes


def unavailable_reason(cpuinfo_path: str = "/proc/cpuinfo", msr_path: str = "/dev/cpu/0/msr") -> Optional[str]:
    if shutil.which("pcm-pcie") is None:
        return "pcm-pcie is not installed (Debian package pcm)"
    try:
        cpuinfo = pathlib.Path(cpuinfo_path).read_text()
    except OSError:
        return f"cannot read {cpuinfo_path}"
    vendor = next((ln.split(":", 1)[1].strip() for ln in cpuinfo.splitlines() if ln.startswith("vendor_id")), "unknown")
    if vendor != "GenuineIntel":
        return f"CPU vendor is {vendor}: pcm-pcie reads Intel server uncore counters only"
    flags = next((ln for ln in cpuinfo.splitlines() if ln.startswith("flags")), "")
    if " hypervisor" in flags:
        return "running in a virtual machine (hypervisor CPU flag): uncore PMUs are not exposed to guests"
    if not os.access(msr_path, os.R_OK):
        return f"no MSR access ({msr_path} not readable: modprobe msr and run as root)"
    return None


def parse_pcie_csv(text: str) -> dict[str, Any]:
    """Mean PCIe read/write bytes per second over the samples, summed over sockets."""
    samples: list[tuple[float, float]] = []
    header: Optional[list[str]] = None
    current: Optional[list[float]] = None
    for row in csv.reader(io.StringIO(text)):
        if not row or not row[0].strip():
            continue
        first = row[0].strip()
        if first == "Skt":
            if current is not None:
                samples.append((current[0], current[1]))
            header = [c.strip() for c in row]
            current = [0.0, 0.0]
            continue
        if header is None or current is None or first == "*" or not first.isdigit():
            continue
        cells = dict(zip(header, (c.strip() for c in row)))
        try:
            current[0] += float(cells[kReadColumn])
            current[1] += float(cells[kWriteColumn])
        except (KeyError, ValueError):
            raise ValueError(f"pcm-pcie row without numeric {kReadColumn!r}/{kWriteColumn!r} columns: {row}") from None
    if current is not None and header is not None:
        samples.append((current[0], current[1]))
    if not samples:
        raise ValueError("no pcm-pcie samples (no 'Skt' header line) in the output")
    # The first interval starts before the measurement window; drop it when there are others.
    used = samples[1:] if len(samples) > 2 else samples
    return {"samples": len(used), "interval_s": kIntervalS,
            "pcie_read_Bps": sum(s[0] for s in used) / len(used) / kIntervalS,
            "pcie_write_Bps": sum(s[1] for s in used) / len(used) / kIntervalS}


class Sidecar:
    def __init__(self, host: Host, proc: Optional[Proc], out_path: pathlib.Path, err_path: pathlib.Path,
                 reason: Optional[str]):
        self.host, self.proc, self.out_path, self.err_path, self.reason = host, proc, out_path, err_path, reason


StartFn = Callable[[Host, list[str], IO[bytes], IO[bytes]], Proc]


def start_sidecars(hosts: list[Host], log_dir: pathlib.Path, start: StartFn) -> list[Sidecar]:
    """pcm-pcie on every host, through the host's own launcher. On hosts of this machine the
    reasons it cannot run are known in advance; elsewhere its own error message says why."""
    local_reason = unavailable_reason()
    cars = []
    for host in {h.name: h for h in hosts}.values():
        out, err = log_dir / f"pcm-pcie-{host.name}.csv", log_dir / f"pcm-pcie-{host.name}.stderr"
        why = local_reason if host.launcher in ("local", "netns") else None
        proc = None
        if why is None:
            with open(out, "wb") as f, open(err, "wb") as e:
                proc = start(host, ["pcm-pcie", "-csv", "-B", str(kIntervalS)], f, e)
        cars.append(Sidecar(host, proc, out, err, why))
    return cars


def _last_error_line(path: pathlib.Path) -> str:
    try:
        lines = [ln.strip() for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return "no output"
    errors = [ln for ln in lines if "error" in ln.lower() or "aborted" in ln.lower()]
    return (errors or lines or ["no output"])[-1]


def stop_sidecars(cars: list[Sidecar], backend: str) -> dict[str, Any]:
    if backend != "verbs":
        return {"available": False, "reason": f"backend {backend}: no PCIe bus to count (counters are modeled)"}
    out: dict[str, Any] = {}
    for car in cars:
        if car.proc is None:
            out[car.host.name] = {"available": False, "reason": car.reason}
            continue
        car.proc.stop()
        try:
            out[car.host.name] = {"available": True, **parse_pcie_csv(car.out_path.read_text(errors="replace"))}
        except (OSError, ValueError) as exc:
            out[car.host.name] = {"available": False,
                                  "reason": f"pcm-pcie gave no samples ({exc}): {_last_error_line(car.err_path)}"}
    return out


def estimate_nic_misses(measured: dict[str, Any], roles: list[dict[str, Any]]) -> dict[str, Any]:
    """Per host whose PCIe reads were measured: measured minus expected host-memory lines read
    by devices, per operation. The expected lines are the bench's modeled `pcie_dma_read_lines`
    (WQE, payload and RECV fetches, READ responses) of the roles on that host; what the NIC
    reads beyond them is, to first order, its cache misses (QP contexts, WQEs, translations:
    guide16 Sec. 4). An estimate: PCM counts every device on the socket."""
    out: dict[str, Any] = {}
    for host, m in measured.items():
        if not isinstance(m, dict) or not m.get("available"):
            continue
        documents = [r["document"] for r in roles if r.get("host") == host and r.get("document")]
        rows = [row for d in documents for row in (((d.get("pcie") or {}).get("modeled") or {}).get("rows") or [])]
        seconds = sum(res.get("duration_s") or 0 for d in documents for res in d.get("results", []))
        ops = sum(row.get("ops") or 0 for row in rows)
        if not rows or seconds <= 0 or ops <= 0:
            out[host] = {"available": False, "reason": "no modeled rows with operations and a duration on this host"}
            continue
        measured_lines = m["pcie_read_Bps"] * seconds / kLineBytes
        modeled_lines = sum(row["total"].get("pcie_dma_read_lines", 0) for row in rows)
        out[host] = {"available": True, "seconds": seconds, "ops": ops, "measured_read_lines": measured_lines,
                     "modeled_read_lines": modeled_lines,
                     "extra_read_lines_per_op": (measured_lines - modeled_lines) / ops}
    return out
