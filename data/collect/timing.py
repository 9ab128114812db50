"""Timing a workload on a device: synchronised single runs, a probe estimate, warm-up, back-to-back
launches bounded by wall time, and the median and spread of repeated runs.

A workload is a ``Run``: a callable that launches it once. On a GPU a launch is asynchronous, so every
clock reading here follows a device sync (or uses CUDA events).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np
import torch

Run = Callable[[], object]
WARMUP_S = 0.05
#: Launches between host-side clock checks last about this long (keeps a GPU queue short).
BATCH_S = 0.05
#: The time estimate runs the workload with each dimension clipped to this, then scales by size.
PROBE_DIM = 512


def sync(target: torch.device) -> None:
    """Wait for the work queued on ``target`` (a no-op on a CPU)."""
    if target.type == "cuda":
        torch.cuda.synchronize(target)


def once_s(run: Run, target: torch.device) -> float:
    """Wall-clock seconds of one synchronised run."""
    sync(target)
    start = time.perf_counter()
    run()
    sync(target)
    return time.perf_counter() - start


def probe_s(shape: tuple[int, ...], make_run: Callable[..., Run], target: torch.device) -> float:
    """Seconds per run of ``make_run(*shape)``, guessed from a run with each dimension clipped to PROBE_DIM.

    The guess scales the clipped run's time by the product of the dimensions (FLOPs, for a GEMM's m, n, k);
    the faster of two clipped runs counts, as the first may pay one-off library set-up.
    """
    clipped = tuple(min(d, PROBE_DIM) for d in shape)
    run = make_run(*clipped)
    seconds = min(once_s(run, target) for _ in range(2))
    return seconds * math.prod(shape) / math.prod(clipped)


def run_for(
    run: Run, target: torch.device, seconds: float, per_run_s: float, at_least: int = 1
) -> tuple[int, float]:
    """Launch ``run`` back to back for ``seconds`` and at least ``at_least`` times.

    Returns (launches, elapsed seconds).
    """
    batch = max(1, int(BATCH_S / max(per_run_s, 1e-7)))
    launches, start = 0, time.perf_counter()
    while launches < at_least or time.perf_counter() - start < seconds:
        for _ in range(batch):
            run()
        launches += batch
        sync(target)
    return launches, time.perf_counter() - start


def warm_up(run: Run, target: torch.device, per_run_s: float) -> None:
    """Run for WARMUP_S, and at least twice, so caches, clocks and library state settle."""
    run_for(run, target, WARMUP_S, per_run_s, at_least=2)


def spread_ms(run: Run, target: torch.device, repeats: int) -> tuple[float, float, float]:
    """(p10, median, p90) in milliseconds of ``repeats`` single runs."""
    times = _cuda_times_ms(run, target, repeats) if target.type == "cuda" else _cpu_times_ms(run, repeats)
    p10, median, p90 = np.percentile(times, [10, 50, 90])
    return float(p10), float(median), float(p90)


def _cuda_times_ms(run: Run, target: torch.device, repeats: int) -> list[float]:
    """Milliseconds of each run, from a pair of CUDA events around it."""
    events = [
        (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(repeats)
    ]
    for start, end in events:
        start.record()
        run()
        end.record()
    torch.cuda.synchronize(target)
    return [start.elapsed_time(end) for start, end in events]


def _cpu_times_ms(run: Run, repeats: int) -> list[float]:
    """Milliseconds of each run, from perf_counter_ns around it."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter_ns()
        run()
        times.append((time.perf_counter_ns() - start) / 1e6)
    return times
