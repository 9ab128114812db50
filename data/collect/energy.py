"""Energy metering: a cumulative joule counter per device (NVML on a GPU, RAPL on a CPU) and the average
power of a workload over a window of back-to-back runs, measured after the load has settled.

Either counter may be missing (no NVML bindings, a GPU without the counter, an unreadable powercap
zone); ``energy_meter`` then answers None and the collector records no power.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from preflight.data.collect.timing import Run, run_for

SETTLE_S, WINDOW_S = 0.5, 1.0
#: The package-0 zone of Intel's RAPL interface (AMD's RAPL shows up here too on recent kernels).
RAPL = Path("/sys/class/powercap/intel-rapl:0")
log = logging.getLogger("preflight.collect")


@dataclass(frozen=True)
class Meter:
    """A cumulative energy counter in joules that wraps around at ``wrap_j``."""

    read_j: Callable[[], float]
    wrap_j: float = math.inf

    def delta_j(self, before: float, after: float) -> float:
        """Joules spent between two readings, across at most one wrap-around."""
        return after - before if after >= before else after + self.wrap_j - before


def energy_meter(target: torch.device) -> Meter | None:
    """NVML's total-energy counter on a GPU; RAPL's package counter on a CPU where readable; else None."""
    return nvml_meter(target) if target.type == "cuda" else rapl_meter(RAPL)


def rapl_meter(zone: Path) -> Meter | None:
    """The powercap ``zone``'s energy counter (microjoules, wrapping at its range); None if unreadable."""
    try:
        (zone / "energy_uj").read_text()
        wrap_j = int((zone / "max_energy_range_uj").read_text()) / 1e6
    except (OSError, ValueError):
        return None
    return Meter(lambda: int((zone / "energy_uj").read_text()) / 1e6, wrap_j)


def nvml_meter(target: torch.device) -> Meter | None:
    """NVML's counter for GPU ``target`` (millijoules since driver load).

    None without the bindings (``pip install 'preflight[cuda]'``), without a working driver, or on a
    GPU that lacks the counter.
    """
    try:
        import pynvml
    except ImportError:
        log.warning("no NVML bindings, so no GPU power: pip install 'preflight[cuda]'")
        return None
    try:
        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByUUID(
            f"GPU-{torch.cuda.get_device_properties(target).uuid}".encode()
        )
        pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)
    except pynvml.NVMLError as exc:
        log.warning("NVML cannot read %s's energy counter, so no GPU power: %s", target, exc)
        return None
    return Meter(lambda: pynvml.nvmlDeviceGetTotalEnergyConsumption(handle) / 1e3)


def power(run: Run, target: torch.device, per_run_s: float, meter: Meter) -> tuple[float, float]:
    """(watts, joules per run) over a WINDOW_S window of back-to-back runs, after SETTLE_S of them."""
    run_for(run, target, SETTLE_S, per_run_s)
    before = meter.read_j()
    launches, elapsed_s = run_for(run, target, WINDOW_S, per_run_s)
    joules = meter.delta_j(before, meter.read_j())
    return joules / elapsed_s, joules / launches
