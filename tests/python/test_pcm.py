"""The PCM sidecar's parser and its reasons for not running.

pcm-pcie-amd-vm.txt is what `pcm-pcie -csv -B 1` really printed on this project's
development machine (an AMD EPYC VM): PCM refuses non-Intel CPUs. pcm-pcie-skx.csv is
written in the CSV layout PCM 202302 prints on Skylake-SP servers (a header line starting
with "Skt" before each one-second sample, one row per socket, bytes in "PCIe Rd (B)" /
"PCIe Wr (B)"); no Intel server was available to record one."""
import os
import pathlib
import time

import pytest

from harness import pcm

kData = pathlib.Path(__file__).parent / "data"


def test_parser_averages_samples_and_sums_sockets():
    out = pcm.parse_pcie_csv((kData / "pcm-pcie-skx.csv").read_text())
    # Three samples: the first (before the measurement window) is dropped, sockets are summed.
    assert out["samples"] == 2
    assert out["pcie_read_Bps"] == pytest.approx((1_000_064_000 + 1_000_192_000) / 2)
    assert out["pcie_write_Bps"] == pytest.approx((500_032_000 + 500_096_000) / 2)


def test_parser_rejects_output_without_samples():
    text = (kData / "pcm-pcie-amd-vm.txt").read_text()
    assert "Only Intel(R) processors are supported" in text or "unsupported processor" in text.lower()
    with pytest.raises(ValueError, match="no pcm-pcie samples"):
        pcm.parse_pcie_csv(text)
    with pytest.raises(ValueError, match="PCIe Rd"):
        pcm.parse_pcie_csv("Skt,PCIRdCur\n0,12\n")


def test_reasons_for_not_running(tmp_path, monkeypatch):
    monkeypatch.setattr(pcm.shutil, "which", lambda name: "/usr/sbin/" + name)
    amd = tmp_path / "amd"
    amd.write_text("vendor_id\t: AuthenticAMD\nflags\t\t: fpu hypervisor\n")
    assert pcm.unavailable_reason(str(amd)) == "CPU vendor is AuthenticAMD: pcm-pcie reads Intel server uncore counters only"
    vm = tmp_path / "vm"
    vm.write_text("vendor_id\t: GenuineIntel\nflags\t\t: fpu sse hypervisor\n")
    assert "virtual machine" in pcm.unavailable_reason(str(vm))
    metal = tmp_path / "metal"
    metal.write_text("vendor_id\t: GenuineIntel\nflags\t\t: fpu sse\n")
    assert pcm.unavailable_reason(str(metal), msr_path=str(tmp_path / "no-msr")).startswith("no MSR access")
    msr = tmp_path / "msr"
    msr.write_text("")
    assert pcm.unavailable_reason(str(metal), msr_path=str(msr)) is None
    monkeypatch.setattr(pcm.shutil, "which", lambda name: None)
    assert pcm.unavailable_reason(str(metal)) == "pcm-pcie is not installed (Debian package pcm)"


def test_this_machine_records_why():
    reason = pcm.unavailable_reason()
    if reason is None:
        pytest.skip("PCM can read counters on this machine")
    assert reason.split(":")[0]  # the point records a reason, e.g. "CPU vendor is AuthenticAMD: ..."
    assert pcm.stop_sidecars([], "softnic")["reason"].startswith("backend softnic")


def fake_pcm(tmp_path, body):
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    script = bindir / "pcm-pcie"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(0o755)
    return bindir


@pytest.mark.parametrize("body,expect", [
    (f"cat {kData / 'pcm-pcie-skx.csv'}\nexec sleep 30\n", "samples"),
    (f"cat {kData / 'pcm-pcie-amd-vm.txt'} >&2\nexit 1\n", "Program aborted"),
])
def test_sidecar_runs_through_the_hosts_launcher(tmp_path, monkeypatch, body, expect):
    from harness.inventory import Host
    from harness.launch_local import LocalLauncher
    monkeypatch.setenv("PATH", f"{fake_pcm(tmp_path, body)}:{os.environ['PATH']}")
    remote = Host(name="far", launcher="ssh")   # not this machine: no local pre-check, PCM's word counts
    launcher = LocalLauncher()
    started = []

    def start(host, argv, out, err):
        started.append((host.name, argv))
        return launcher.start(host, argv, {}, out, err)

    cars = pcm.start_sidecars([remote, remote], tmp_path, start)
    assert started == [("far", ["pcm-pcie", "-csv", "-B", "1.0"])]
    deadline = time.monotonic() + 10  # the fake prints, then sleeps (or exits)
    while time.monotonic() < deadline and cars[0].proc.poll() is None and cars[0].out_path.stat().st_size < 400:
        time.sleep(0.02)
    out = pcm.stop_sidecars(cars, "verbs")["far"]
    if expect == "samples":
        assert out["available"] is True and out["samples"] == 2
    else:
        assert out["available"] is False and expect in out["reason"]


def test_estimated_nic_misses_are_measured_minus_modeled_lines_per_op():
    measured = pcm.parse_pcie_csv((kData / "pcm-pcie-skx.csv").read_text())  # ~1.0 GB/s of device reads
    document = {"results": [{"size_bytes": 64, "ops": 1_000_000, "duration_s": 2.0}],
                "pcie": {"modeled": {"rows": [{"ops": 1_000_000, "total": {"pcie_dma_read_lines": 20_000_000}}]}}}
    roles = [{"role": "server", "host": "node0", "document": document},
             {"role": "client", "host": "node1", "document": document}]
    out = pcm.estimate_nic_misses({"node0": {"available": True, **measured},
                                   "node1": {"available": False, "reason": "AMD"}}, roles)
    assert set(out) == {"node0"}
    lines = measured["pcie_read_Bps"] * 2.0 / 64
    assert out["node0"]["measured_read_lines"] == pytest.approx(lines)
    assert out["node0"]["extra_read_lines_per_op"] == pytest.approx((lines - 20_000_000) / 1_000_000)
    assert pcm.estimate_nic_misses({"available": False, "reason": "backend softnic"}, roles) == {}
