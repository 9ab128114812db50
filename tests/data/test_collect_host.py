"""Host introspection for the profilers: this machine's facts, and cpuinfo/meminfo parsed from fake text."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from preflight.data.collect import host
from preflight.data.errors import PreflightError, UsageError
from preflight.data.threads import torch_threads

#: Two hyper-threads of one core on each of two packages, as an x86 guest's /proc/cpuinfo shows them.
CPUINFO = "".join(
    f"processor\t: {cpu}\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Gold 6338\n"
    f"physical id\t: {package}\ncore id\t\t: 0\ncpu MHz\t\t: 2000.000\n"
    "flags\t\t: fpu sse2 avx2 fma avx512f hypervisor\n\n"
    for cpu, package in enumerate((0, 0, 1, 1))
)
MEMINFO = "MemTotal:       16384000 kB\nMemFree:         1000000 kB\n"


@pytest.fixture
def fake_host(tmp_path, monkeypatch):
    """/proc and /sys of the machine CPUINFO describes: no cpufreq and no cache in sysfs."""
    (tmp_path / "cpuinfo").write_text(CPUINFO)
    (tmp_path / "meminfo").write_text(MEMINFO)
    monkeypatch.setattr(host, "CPUINFO", tmp_path / "cpuinfo")
    monkeypatch.setattr(host, "MEMINFO", tmp_path / "meminfo")
    monkeypatch.setattr(host, "CPU0", tmp_path / "cpu0")
    return tmp_path


def test_this_machine_has_facts():
    facts = host.host_facts()
    assert facts.logical_cores >= 1 and facts.cpu_name
    assert facts.physical_cores is None or 1 <= facts.physical_cores <= facts.logical_cores
    assert facts.memory_gb is None or facts.memory_gb > 0
    assert isinstance(facts.flags, frozenset)
    with pytest.raises(dataclasses.FrozenInstanceError):
        facts.cpu_name = "another"  # type: ignore[misc]


def test_cpuinfo_text_is_parsed_per_processor():
    cpus = host.parse_cpuinfo("\n" + CPUINFO + "\n\n")
    assert len(cpus) == 4 and [cpu["processor"] for cpu in cpus] == ["0", "1", "2", "3"]
    assert cpus[0]["model name"] == "Intel(R) Xeon(R) Gold 6338" and "avx512f" in cpus[0]["flags"].split()
    assert host.parse_cpuinfo("") == []


def test_meminfo_text_gives_total_memory_in_gb():
    assert host.parse_meminfo_gb(MEMINFO) == pytest.approx(16384000 * 1024 / 1e9)
    assert host.parse_meminfo_gb("MemFree: 10 kB\n") is None


def test_facts_come_from_proc_and_sys(fake_host):
    facts = host.host_facts()
    assert (facts.cpu_name, facts.vendor, facts.physical_cores) == ("Intel(R) Xeon(R) Gold 6338", "intel", 2)
    assert (facts.clock_mhz, facts.llc_mb) == (2000.0, None)
    assert facts.memory_gb == pytest.approx(16.777216)
    assert {"avx2", "avx512f"} <= facts.flags


def test_an_arm_cpuinfo_names_features_and_no_cores(fake_host):
    (fake_host / "cpuinfo").write_text("processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd sve\n\n")
    facts = host.host_facts()
    assert facts.flags == {"fp", "asimd", "sve"} and facts.physical_cores is None
    assert facts.clock_mhz is None and facts.vendor == "unknown"


@pytest.mark.parametrize(
    ("threads", "name"),
    [(2, "Intel(R) Xeon(R) Gold 6338 (2 threads)"), (1, "Intel(R) Xeon(R) Gold 6338 (1 thread)")],
)
def test_the_cpu_spec_estimates_peaks_from_flags_and_clock(fake_host, monkeypatch, threads, name):
    """One thread is named in the singular; the id keeps ``threads`` (a resumed sweep finds its own)."""
    monkeypatch.setattr(host, "copy_bandwidth_gbs", lambda llc_mb: 12.34)
    with torch_threads(threads):
        spec = host.cpu_spec()
    assert (spec.id, spec.name) == (f"intel-r-xeon-r-gold-6338-{threads}-threads", name)
    assert (spec.compute_units, spec.memory_bandwidth_gbs, spec.boost_clock_mhz) == (threads, 12.3, 2000.0)
    fp32 = 0.128 * threads  # AVX-512: 64 fp32 FLOPs a cycle
    assert spec.peak_tflops == pytest.approx({"fp32": fp32, "fp64": fp32 / 2, "bf16": fp32})


def test_a_cpu_without_a_known_clock_gets_no_spec(fake_host):
    (fake_host / "cpuinfo").write_text(CPUINFO.replace("cpu MHz", "bogus"))
    with pytest.raises(PreflightError, match="clock"):
        host.cpu_spec()


def test_device_names_are_parsed_or_refused():
    assert host.parse_device("cpu") == torch.device("cpu")
    with pytest.raises(UsageError, match="cuda:N"):
        host.parse_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(PreflightError, match="no CUDA device"):
            host.parse_device("cuda:0")


def test_a_slug_is_a_catalogue_id():
    assert host.slug("AMD EPYC 7B13 (16 threads)") == "amd-epyc-7b13-16-threads"
