"""The project's own GEMM profiler: a seeded sweep of torch GEMMs timed on this machine.

Each measured point is appended to a CSV as one line (O_APPEND, one write, fsync), so an
interrupted sweep leaves a valid file, and a rerun with the same seed continues the same sweep.
Beside the CSV, ``<out>.device.json`` holds the spec sheet of the device that was measured.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import platform
import re
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import torch
from preflight.data.catalogue import Catalogue, DeviceSpec
from preflight.data.collect.csvlog import append, open_log
from preflight.data.errors import PreflightError, UnknownDevice
from preflight.data.settings import Settings
from preflight.data.sources.local_gemm import COLUMNS, read_device, side_file
from preflight.data.store import atomic_write_bytes
from preflight.data.threads import torch_threads
from rich.progress import Progress

#: m, n and k are drawn from these: powers of two, other sizes, and skinny ones (1, 16).
DIMS = (1, 16, 32, 64, 96, 128, 256, 384, 512, 768, 1000, 1024, 1536, 2048, 3000, 4096)
LAYOUTS = ((False, False), (False, True), (True, False), (True, True))
TORCH_DTYPES = {"fp64": torch.float64, "fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
DTYPES = {"cpu": ("fp32", "fp64", "bf16"), "cuda": ("fp32", "fp64", "bf16", "fp16")}
WARMUP_S, SETTLE_S, WINDOW_S = 0.05, 0.5, 1.0
#: Launches between host-side clock checks last about this long (keeps a GPU queue short).
BATCH_S = 0.05
#: The time estimate runs the GEMM with each dimension clipped to this, then scales by FLOPs.
PROBE_DIM = 512
COPY_BYTES = 256 << 20
RAPL = Path("/sys/class/powercap/intel-rapl:0")
_KEY_COLUMNS = COLUMNS[:7]  # m, n, k, dtype, trans_a, trans_b, device


@dataclass
class CollectSummary:
    path: Path
    device_id: str
    measured: int
    skipped_existing: int
    skipped_slow: int = 0


@dataclass(frozen=True)
class Point:
    m: int
    n: int
    k: int
    dtype: str
    trans_a: bool
    trans_b: bool


@dataclass(frozen=True)
class Meter:
    """A cumulative energy counter in joules that wraps around at ``wrap_j``."""

    read_j: Callable[[], float]
    wrap_j: float = math.inf

    def delta_j(self, before: float, after: float) -> float:
        return after - before if after >= before else after + self.wrap_j - before


def collect_gemm(
    device: str,
    out: Path,
    *,
    points: int = 300,
    seed: int = 0,
    threads: int | None = None,
    repeats: int = 7,
    max_seconds_per_point: float = 2.0,
    progress: bool = True,
    dims: Sequence[int] = DIMS,
) -> CollectSummary:
    """Measure the first ``points`` GEMMs of the seeded sweep on ``device`` ("cpu", "cuda", "cuda:N") into ``out``."""
    target, out = _parse_device(device), Path(out)
    summary = CollectSummary(out, "", measured=0, skipped_existing=0)
    with torch_threads(threads if target.type == "cpu" else None), _current_gpu(target):
        summary.device_id = _ensure_side_file(target, out)
        done = {tuple(row[c] for c in _KEY_COLUMNS) for row in open_log(out, COLUMNS, "local-gemm")}
        meter = _energy_meter(target)
        fd = os.open(out, os.O_WRONLY | os.O_APPEND)
        try:
            with Progress(disable=not progress) as bar:
                task = bar.add_task(summary.device_id, total=points)
                for point in sweep(points, seed, DTYPES[target.type], dims):
                    _visit(point, target, repeats, max_seconds_per_point / repeats, meter, fd, done, summary)
                    bar.update(
                        task,
                        advance=1,
                        description=f"{summary.device_id}: {summary.measured} measured, "
                        f"{summary.skipped_slow} too slow",
                    )
        finally:
            os.close(fd)
    return summary


def sweep(points: int, seed: int, dtypes: Sequence[str], dims: Sequence[int] = DIMS) -> list[Point]:
    """The first ``points`` distinct GEMMs drawn with ``seed``; a longer sweep extends a shorter one."""
    if points > len(dims) ** 3 * len(dtypes) * len(LAYOUTS):
        raise ValueError(f"{points} points asked for, but the grid holds fewer distinct GEMMs")
    rng = np.random.default_rng(seed)
    drawn: dict[Point, None] = {}
    while len(drawn) < points:
        m, n, k = (int(d) for d in rng.choice(dims, size=3))
        trans_a, trans_b = LAYOUTS[rng.integers(len(LAYOUTS))]
        drawn.setdefault(Point(m, n, k, str(rng.choice(dtypes)), trans_a, trans_b))
    return list(drawn)


def _visit(
    point: Point,
    target: torch.device,
    repeats: int,
    budget_s: float,
    meter: Meter | None,
    fd: int,
    done: set[tuple[str, ...]],
    summary: CollectSummary,
) -> None:
    """Measure one point unless it is already in the file or too slow, and count what happened."""
    if _key(point, summary.device_id) in done:
        summary.skipped_existing += 1
        return
    row = _measure(point, target, repeats, budget_s, meter)
    if row is None:
        summary.skipped_slow += 1
        return
    append(fd, [",".join((*_key(point, summary.device_id), *row))])
    summary.measured += 1


# -- timing -----------------------------------------------------------------------------------------------------


def _measure(
    point: Point, target: torch.device, repeats: int, budget_s: float, meter: Meter | None
) -> list[str] | None:
    """The measured cells after the key (repeats ... collected_at), or None when one run exceeds the budget.

    A run clipped to PROBE_DIM screens out hopeless points in milliseconds; a single full run decides.
    """
    if _probe_s(point, target) > budget_s:
        return None
    run = _gemm(point, target)
    per_run_s = _once_s(run, target)
    if per_run_s > budget_s:
        return None
    _run_for(run, target, WARMUP_S, per_run_s, at_least=2)
    p10, median, p90 = np.percentile(_times_ms(run, target, repeats), [10, 50, 90])
    power_w, energy_j = _power(run, target, per_run_s, meter) if meter else (None, None)
    collected_at = datetime.now(UTC).isoformat(timespec="seconds")
    return [str(repeats), *(_number(v) for v in (median, p10, p90, power_w, energy_j)), collected_at]


def _gemm(point: Point, target: torch.device) -> Callable[[], object]:
    """op(A) @ op(B) into a preallocated C; a transposed operand is a ``.t()`` view of a contiguous tensor."""
    dtype = TORCH_DTYPES[point.dtype]
    a = torch.randn((point.k, point.m) if point.trans_a else (point.m, point.k), dtype=dtype, device=target)
    b = torch.randn((point.n, point.k) if point.trans_b else (point.k, point.n), dtype=dtype, device=target)
    a, b = a.t() if point.trans_a else a, b.t() if point.trans_b else b
    c = torch.empty(point.m, point.n, dtype=dtype, device=target)
    return lambda: torch.mm(a, b, out=c)


def _probe_s(point: Point, target: torch.device) -> float:
    """Seconds per run guessed from the GEMM with dimensions clipped to PROBE_DIM, scaled by FLOPs."""
    probe = dataclasses.replace(
        point, m=min(point.m, PROBE_DIM), n=min(point.n, PROBE_DIM), k=min(point.k, PROBE_DIM)
    )
    run = _gemm(probe, target)
    seconds = min(_once_s(run, target) for _ in range(2))  # the first run may pay one-off library set-up
    return seconds * (point.m * point.n * point.k) / (probe.m * probe.n * probe.k)


def _once_s(run: Callable[[], object], target: torch.device) -> float:
    """Wall-clock seconds of one synchronised run."""
    _sync(target)
    start = time.perf_counter()
    run()
    _sync(target)
    return time.perf_counter() - start


def _run_for(
    run: Callable[[], object], target: torch.device, seconds: float, per_run_s: float, at_least: int = 1
) -> tuple[int, float]:
    """Launch ``run`` back to back for ``seconds`` and at least ``at_least`` times; (launches, elapsed seconds)."""
    batch = max(1, int(BATCH_S / max(per_run_s, 1e-7)))
    launches, start = 0, time.perf_counter()
    while launches < at_least or time.perf_counter() - start < seconds:
        for _ in range(batch):
            run()
        launches += batch
        _sync(target)
    return launches, time.perf_counter() - start


def _times_ms(run: Callable[[], object], target: torch.device, repeats: int) -> list[float]:
    """Milliseconds of each of ``repeats`` runs: CUDA events on a GPU, perf_counter_ns on a CPU."""
    if target.type == "cuda":
        events = [
            (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
            for _ in range(repeats)
        ]
        for start, end in events:
            start.record()
            run()
            end.record()
        torch.cuda.synchronize(target)
        return [start.elapsed_time(end) for start, end in events]
    times = []
    for _ in range(repeats):
        start = time.perf_counter_ns()
        run()
        times.append((time.perf_counter_ns() - start) / 1e6)
    return times


def _power(
    run: Callable[[], object], target: torch.device, per_run_s: float, meter: Meter
) -> tuple[float, float]:
    """(watts, joules per run) over a window of back-to-back runs, after the load has settled."""
    _run_for(run, target, SETTLE_S, per_run_s)
    before = meter.read_j()
    launches, elapsed_s = _run_for(run, target, WINDOW_S, per_run_s)
    joules = meter.delta_j(before, meter.read_j())
    return joules / elapsed_s, joules / launches


def _energy_meter(target: torch.device) -> Meter | None:
    """NVML's total-energy counter on a GPU; RAPL's package counter on a CPU where readable; else None."""
    if target.type == "cuda":
        return _nvml_meter(target)
    try:
        (RAPL / "energy_uj").read_text()
        wrap_j = int((RAPL / "max_energy_range_uj").read_text()) / 1e6
    except (OSError, ValueError):
        return None
    return Meter(lambda: int((RAPL / "energy_uj").read_text()) / 1e6, wrap_j)


def _nvml_meter(target: torch.device) -> Meter | None:
    """NVML's counter (millijoules since driver load); None on GPUs that lack it."""
    try:
        import pynvml
    except ImportError as exc:
        raise PreflightError(
            "measuring GPU power needs NVML bindings: pip install 'preflight[cuda]'"
        ) from exc
    pynvml.nvmlInit()
    uuid = torch.cuda.get_device_properties(target).uuid
    handle = pynvml.nvmlDeviceGetHandleByUUID(f"GPU-{uuid}".encode())

    def read_j() -> float:
        return pynvml.nvmlDeviceGetTotalEnergyConsumption(handle) / 1e3

    try:
        read_j()
    except pynvml.NVMLError_NotSupported:
        return None
    return Meter(read_j)


# -- the output file --------------------------------------------------------------------------------------------


def _key(point: Point, device_id: str) -> tuple[str, ...]:
    """The point's key cells as the file holds them."""
    flag = {True: "true", False: "false"}
    return (
        str(point.m),
        str(point.n),
        str(point.k),
        point.dtype,
        flag[point.trans_a],
        flag[point.trans_b],
        device_id,
    )


def _number(value: float | None) -> str:
    return "" if value is None else f"{value:.6g}"


# -- the device -------------------------------------------------------------------------------------------------


def _parse_device(name: str) -> torch.device:
    try:
        target = torch.device(name)
    except RuntimeError as exc:
        raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:N', not {name!r}") from exc
    if target.type == "cpu":
        return torch.device("cpu")
    if target.type != "cuda":
        raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:N', not {name!r}")
    if not torch.cuda.is_available():
        raise PreflightError(f"cannot collect on {name!r}: torch sees no CUDA device")
    return torch.device("cuda", torch.cuda.current_device() if target.index is None else target.index)


def _current_gpu(target: torch.device) -> AbstractContextManager:
    return torch.cuda.device(target) if target.type == "cuda" else nullcontext()


def _sync(target: torch.device) -> None:
    if target.type == "cuda":
        torch.cuda.synchronize(target)


def _ensure_side_file(target: torch.device, out: Path) -> str:
    """Write ``<out>.device.json`` if missing; refuse a file that holds another device. Returns the device id."""
    gpu = _gpu_spec(target) if target.type == "cuda" else None
    device_id = gpu.id if gpu else _slug(_cpu_name())
    if side_file(out).exists():
        held = read_device(out).id
        if held != device_id:
            raise PreflightError(
                f"{out} holds measurements of {held!r}, not {device_id!r}; collect into another file"
            )
        return device_id
    spec = gpu or _cpu_spec()
    atomic_write_bytes(
        side_file(out), json.dumps(spec.model_dump(mode="json", exclude_none=True), indent=2).encode()
    )
    return device_id


def _gpu_spec(target: torch.device) -> DeviceSpec:
    """The catalogue's spec sheet for this GPU; without one its peaks are unknown, so refuse."""
    name = torch.cuda.get_device_name(target)
    try:
        return Catalogue.load(Settings().devices_file).resolve(name)
    except UnknownDevice as exc:
        props = torch.cuda.get_device_properties(target)
        raise PreflightError(
            f"{name} ({props.multi_processor_count} SMs, {props.total_memory / 1e9:.0f} GB; peaks unknown) is not in "
            f"the device catalogue ({exc}). Register its spec sheet first (POST /v1/devices), then collect again."
        ) from exc


def _cpuinfo() -> dict[str, str]:
    """The first processor's fields in /proc/cpuinfo."""
    fields: dict[str, str] = {}
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return fields
    for line in text.splitlines():
        if not line.strip():
            break
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
    return fields


def _cpu_name() -> str:
    """This CPU's model name as lscpu prints it, plus the threads torch uses: the slice that is measured."""
    model = _cpuinfo().get("model name") or platform.processor() or "unknown cpu"
    return f"{model} ({torch.get_num_threads()} threads)"


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "-", name.lower()).strip("-.")


def _cpu_spec() -> DeviceSpec:
    """A spec sheet for the threads torch uses on this CPU, derived from cpuinfo and a measured copy."""
    info, threads, name = _cpuinfo(), torch.get_num_threads(), _cpu_name()
    flags = set((info.get("flags") or info.get("Features") or "").split())
    clock_mhz = _clock_mhz(info)
    vendor_id = info.get("vendor_id", "")
    return DeviceSpec(
        id=_slug(name),
        name=name,
        kind="cpu",
        aliases=[],
        vendor={"GenuineIntel": "intel", "AuthenticAMD": "amd"}.get(
            vendor_id, vendor_id.lower() or "unknown"
        ),
        compute_units=threads,
        boost_clock_mhz=clock_mhz,
        llc_mb=_llc_mb(),
        memory_bandwidth_gbs=round(_copy_bandwidth_gbs(torch.device("cpu")), 1),
        peak_tflops=_peak_tflops(flags, clock_mhz * 1e6 * threads),
    )


def _peak_tflops(flags: set[str], core_cycles_per_s: float) -> dict[str, float]:
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


def _clock_mhz(info: dict[str, str]) -> float:
    """The highest clock the kernel reports (cpufreq's maximum, as lscpu's "max MHz"), else cpuinfo's "cpu MHz"."""
    try:
        return int(Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq").read_text()) / 1e3
    except (OSError, ValueError):
        pass
    if "cpu MHz" not in info:
        raise PreflightError("cannot read this CPU's clock (no cpufreq, no 'cpu MHz' in /proc/cpuinfo)")
    return float(info["cpu MHz"])


def _llc_mb() -> float | None:
    """Size of the last-level cache from sysfs, in MB."""
    sizes = {}
    for index in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            level, size = int((index / "level").read_text()), (index / "size").read_text().strip()
        except (OSError, ValueError):
            continue
        scale = {"K": 1 / 1024, "M": 1.0, "G": 1024.0}.get(size[-1:], 1 / 2**20)
        sizes[level] = float(size.rstrip("KMG")) * scale
    return sizes[max(sizes)] if sizes else None


def _copy_bandwidth_gbs(target: torch.device, tries: int = 5) -> float:
    """Best of a few copies of COPY_BYTES: bytes read plus written per second, in GB/s."""
    source = torch.ones(COPY_BYTES // 4, dtype=torch.float32, device=target)
    dest = torch.empty_like(source)
    best_s = math.inf
    for _ in range(tries):
        _sync(target)
        start = time.perf_counter()
        dest.copy_(source)
        _sync(target)
        best_s = min(best_s, time.perf_counter() - start)
    return 2 * COPY_BYTES / best_s / 1e9
