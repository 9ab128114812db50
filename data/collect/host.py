"""What machine this is: the CPU and memory as /proc and /sys describe them, the GPUs torch sees, and the
spec sheet (``DeviceSpec``) of the device a profiler measures: the catalogue's for a GPU, one derived from
the CPU's facts and a measured copy for the slice of CPU threads torch uses.

torch is imported where it is used: the catalogue reads the host's facts without it.
"""

from __future__ import annotations

import os
import platform
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from preflight.data.catalogue import Catalogue, DeviceSpec
from preflight.data.errors import PreflightError, UnknownDevice, UsageError
from preflight.data.settings import Settings

if TYPE_CHECKING:
    import torch

CPUINFO = Path("/proc/cpuinfo")
MEMINFO = Path("/proc/meminfo")
CPU0 = Path("/sys/devices/system/cpu/cpu0")
#: The copy that measures memory bandwidth moves at least this many bytes each way.
COPY_BYTES = 256 << 20
_VENDORS = {"GenuineIntel": "intel", "AuthenticAMD": "amd"}


@dataclass(frozen=True)
class HostFacts:
    """This machine's CPU and memory as the kernel reports them; None where it does not."""

    cpu_name: str
    vendor: str
    logical_cores: int
    physical_cores: int | None
    clock_mhz: float | None
    llc_mb: float | None
    memory_gb: float | None
    flags: frozenset[str]


def host_facts() -> HostFacts:
    """Read this machine's facts from /proc and /sys; cheap, and measures nothing."""
    cpus = parse_cpuinfo(_read_text(CPUINFO))
    first = cpus[0] if cpus else {}
    vendor_id = first.get("vendor_id", "")
    return HostFacts(
        cpu_name=first.get("model name") or platform.processor() or "unknown cpu",
        vendor=_VENDORS.get(vendor_id, vendor_id.lower() or "unknown"),
        logical_cores=os.cpu_count() or max(len(cpus), 1),
        physical_cores=_physical_cores(cpus),
        clock_mhz=_clock_mhz(first),
        llc_mb=_llc_mb(),
        memory_gb=parse_meminfo_gb(_read_text(MEMINFO)),
        flags=frozenset((first.get("flags") or first.get("Features") or "").split()),
    )


def parse_cpuinfo(text: str) -> list[dict[str, str]]:
    """/proc/cpuinfo text as one ``{field: value}`` per blank-line-separated block (one per processor)."""
    blocks = (
        {key.strip(): value.strip() for key, _, value in (line.partition(":") for line in block.splitlines())}
        for block in re.split(r"\n\s*\n", text)
    )
    return [block for block in blocks if block]


def parse_meminfo_gb(text: str) -> float | None:
    """Total memory in GB from /proc/meminfo text (its "kB" are KiB); None without a MemTotal line."""
    match = re.search(r"^MemTotal:\s*(\d+)\s*kB", text, re.MULTILINE)
    return int(match[1]) * 1024 / 1e9 if match else None


def parse_device(name: str) -> torch.device:
    """The torch device for "cpu", "cuda" or "cuda:N", index resolved; refuses CUDA where torch sees none."""
    import torch

    try:
        target = torch.device(name)
    except RuntimeError as exc:
        raise UsageError(f"device must be 'cpu', 'cuda' or 'cuda:N', not {name!r}") from exc
    if target.type == "cpu":
        return torch.device("cpu")
    if target.type != "cuda":
        raise UsageError(f"device must be 'cpu', 'cuda' or 'cuda:N', not {name!r}")
    if not torch.cuda.is_available():
        raise PreflightError(f"cannot collect on {name!r}: torch sees no CUDA device")
    return torch.device("cuda", torch.cuda.current_device() if target.index is None else target.index)


def device_spec(target: torch.device) -> DeviceSpec:
    """``target``'s spec sheet: the catalogue's for a GPU, a derived and measured one for the CPU slice."""
    return gpu_spec(target) if target.type == "cuda" else cpu_spec()


def gpu_spec(target: torch.device) -> DeviceSpec:
    """The catalogue's spec sheet for this GPU; without one its peaks are unknown, so refuse."""
    import torch

    name = torch.cuda.get_device_name(target)
    try:
        return Catalogue.load(Settings().devices_file).resolve(name)
    except UnknownDevice as exc:
        props = torch.cuda.get_device_properties(target)
        raise PreflightError(
            f"{name} ({props.multi_processor_count} SMs, {props.total_memory / 1e9:.0f} GB; peaks unknown) "
            f"is not in the device catalogue ({exc}). "
            "Register its spec sheet first (POST /v1/devices), then collect again."
        ) from exc


def slice_name(cpu_name: str, threads: int) -> str:
    """The name of the slice of a CPU that is measured: its model name and the threads torch uses
    (``AMD EPYC (1 thread)``)."""
    return f"{cpu_name} ({threads} thread{'' if threads == 1 else 's'})"


def slice_id(cpu_name: str, threads: int) -> str:
    """The slice's catalogue id (``amd-epyc-1-threads``): ``threads`` whatever the count, as in the files
    collected before the name was singular for one thread (a resumed sweep must find its own id)."""
    return slug(f"{cpu_name} {threads} threads")


def cpu_spec() -> DeviceSpec:
    """A spec sheet for the threads torch uses on this CPU, from the host's facts and a measured copy."""
    import torch

    facts, threads = host_facts(), torch.get_num_threads()
    if facts.clock_mhz is None:
        raise PreflightError("cannot read this CPU's clock (no cpufreq, no 'cpu MHz' in /proc/cpuinfo)")
    return DeviceSpec(
        id=slice_id(facts.cpu_name, threads),
        name=slice_name(facts.cpu_name, threads),
        kind="cpu",
        aliases=[],
        vendor=facts.vendor,
        compute_units=threads,
        boost_clock_mhz=facts.clock_mhz,
        llc_mb=facts.llc_mb,
        memory_bandwidth_gbs=round(copy_bandwidth_gbs(facts.llc_mb), 1),
        peak_tflops=peak_tflops(facts.flags, facts.clock_mhz * 1e6 * threads),
    )


def copy_bandwidth_gbs(llc_mb: float | None, tries: int = 5) -> float:
    """Best of a few copies, on torch's threads as a GEMM on them sees memory, of twice the last-level
    cache and at least ``COPY_BYTES``: bytes read plus written per second, in GB/s."""
    import torch
    from preflight.data.collect.timing import once_s

    nbytes = max(COPY_BYTES, int(2 * (llc_mb or 0.0)) << 20)
    source = torch.ones(nbytes // 4, dtype=torch.float32)
    dest = torch.empty_like(source)
    best_s = min(once_s(lambda: dest.copy_(source), source.device) for _ in range(tries))
    return 2 * nbytes / best_s / 1e9


def slug(name: str) -> str:
    """``name`` as a catalogue id: lower case, runs of other characters than a-z, 0-9 and "." as one "-"."""
    return re.sub(r"[^a-z0-9.]+", "-", name.lower()).strip("-.")


def peak_tflops(flags: frozenset[str], core_cycles_per_s: float) -> dict[str, float]:
    """Dense peaks per dtype.

    An ESTIMATE from ISA flags, not a vendor figure: two FMA pipes of the widest vector unit give
    64 fp32 FLOPs a cycle with AVX-512, 32 with AVX2, about 8 otherwise; fp64 runs at half that.
    bf16 runs at the fp32 rate unless AMX (1024 FLOPs a cycle) or AVX512-BF16 (twice fp32) is there.
    """
    fma = "fma" in flags
    fp32 = 64 if fma and "avx512f" in flags else 32 if fma and "avx2" in flags else 8
    bf16 = 1024 if "amx_bf16" in flags else 2 * fp32 if "avx512_bf16" in flags else fp32
    return {
        dtype: float(f"{per_cycle * core_cycles_per_s / 1e12:.4g}")
        for dtype, per_cycle in (("fp32", fp32), ("fp64", fp32 / 2), ("bf16", bf16))
    }


def _physical_cores(cpus: list[dict[str, str]]) -> int | None:
    """Distinct (package, core) pairs among the processors; None where cpuinfo names no cores (Arm)."""
    return len({(cpu.get("physical id"), cpu["core id"]) for cpu in cpus if "core id" in cpu}) or None


def _clock_mhz(cpu: dict[str, str]) -> float | None:
    """The highest clock the kernel reports (cpufreq's maximum, as lscpu's "max MHz"), else "cpu MHz"."""
    max_khz = _read_text(CPU0 / "cpufreq" / "cpuinfo_max_freq").strip()
    if max_khz.isdigit():
        return int(max_khz) / 1e3
    return float(cpu["cpu MHz"]) if "cpu MHz" in cpu else None


def _llc_mb() -> float | None:
    """Size of the last-level cache from sysfs, in MB."""
    sizes = {}
    for index in (CPU0 / "cache").glob("index*"):
        try:
            level, size = int((index / "level").read_text()), (index / "size").read_text().strip()
        except (OSError, ValueError):
            continue
        scale = {"K": 1 / 1024, "M": 1.0, "G": 1024.0}.get(size[-1:], 1 / 2**20)
        sizes[level] = float(size.rstrip("KMG")) * scale
    return sizes[max(sizes)] if sizes else None


def _read_text(path: Path) -> str:
    """The file's text, or "" where it cannot be read."""
    try:
        return path.read_text()
    except OSError:
        return ""
