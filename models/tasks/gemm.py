"""GEMM runtime, power and energy on GPUs and CPUs, including devices known only by spec sheet.

Runtime follows a performance law with learned parts (the ``physics`` family: per-device launch floor
and compute and bandwidth efficiencies, a bounded shape term), never faster than the roofline; the
``tree`` family learns the efficiency relative to the roofline freely. Power and energy follow from the
runtime estimate by a physical law (``models/tools/power.py``): static power plus dynamic power rising with
the utilisation achieved, bounded by the board's TDP. No public source measures GEMM power while
the GEMM runs (GPPerf samples the board after each run), so the law's shape is its physics prior.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from preflight.data.gemm import GemmItem
from preflight.features import Features, rows_of_each
from preflight.features import gemm as gemm_features
from preflight.models.core.targets import Target
from preflight.models.core.task import Task, register
from preflight.models.tools import power

if TYPE_CHECKING:
    from preflight.models.core.predictor import Estimates


def _watts(
    by_kind: dict[str, np.ndarray], roofline: np.ndarray, runtime: np.ndarray, tdp: np.ndarray, bound: str
) -> np.ndarray:
    """Power at a runtime (utilisation = roofline / runtime): the prior's shape for ``value``, its
    lowest- or highest-power shape for ``low`` / ``high``; NaN for rows outside ``by_kind``."""
    out = np.full(len(runtime), np.nan)
    for kind, rows in by_kind.items():
        utilisation = power.utilisation(roofline[rows], runtime[rows])
        if bound == "value":
            out[rows] = power.power_w(power.shape_for(kind), utilisation, tdp[rows])
        else:
            out[rows] = power.prior_interval(kind, utilisation, tdp[rows])[0 if bound == "low" else 1]
    return out


def _rows_by_kind(kinds: pd.Series, tdp: np.ndarray) -> dict[str, np.ndarray]:
    """The rows (positions) of each device kind the power prior knows, among rows with a TDP."""
    with_tdp = np.isfinite(tdp)
    return {
        kind: rows[with_tdp[rows]]
        for kind, rows in rows_of_each(kinds.astype(str).to_numpy()).items()
        if kind in power.PHYSICS_PRIOR
    }


def physical_power(features: Features, estimates: Estimates) -> None:
    """Power and energy from the runtime estimate and its interval. Power falls as runtime rises (the
    utilisation falls), so its low bound takes the high runtime; energy = runtime × power rises with
    runtime for every shape of the prior (exponent ≤ 1), so each energy bound takes its own side's."""
    roofline, tdp = features.reference["runtime_ms"].to_numpy(), features.reference["power_w"].to_numpy()
    by_kind = _rows_by_kind(features.meta["device_kind"], tdp)
    value, low, high = (
        getattr(estimates, side)["runtime_ms"].to_numpy() for side in ("value", "low", "high")
    )
    watts = _watts(by_kind, roofline, value, tdp, "value")
    estimates.value["power_w"], estimates.value["energy_j"] = watts, power.energy_j(watts, value)
    estimates.low["power_w"] = _watts(by_kind, roofline, high, tdp, "low")
    estimates.high["power_w"] = _watts(by_kind, roofline, low, tdp, "high")
    estimates.low["energy_j"] = power.energy_j(_watts(by_kind, roofline, low, tdp, "low"), low)
    estimates.high["energy_j"] = power.energy_j(_watts(by_kind, roofline, high, tdp, "high"), high)
    # physical model (static + dynamic power, bounded by TDP): no GEMM power was measured on any device
    estimates.note(np.flatnonzero(np.isfinite(watts)).tolist(), "prior:power_w", "prior:energy_j")


register(
    Task(
        name="gemm",
        item=GemmItem,
        # no GEMM runs faster than its roofline: estimates and intervals are kept at or above it
        targets={
            "runtime_ms": Target("ms", at_least_reference=True),
            "power_w": Target("W"),
            "energy_j": Target("J"),
        },
        sources=("local-gemm", "gpperf", "deepbench", "uci-sgemm", "neusight"),
        featurize=gemm_features.gemm_on_device,
        # shape-kernel: a tuning sweep of one shape (UCI) is split by kernel family, library calls by shape
        groups={
            "shape": ("shape",),
            "device": ("device_id",),
            "kernel": ("kernel",),
            "shape-kernel": ("shape", "kernel"),
            "shape-device": ("shape", "device_id"),
            "generation": ("architecture",),
        },
        group_key="shape-kernel",
        families=("physics", "tree", "roofline"),
        default_family="physics",
        baseline="roofline",
        examples=(
            {"m": 4096, "n": 4096, "k": 4096, "dtype": "fp16", "device": "NVIDIA H100 80GB HBM3"},
            {"m": 1024, "n": 512, "k": 2048, "trans_a": True, "device": "Tesla V100-SXM2-16GB"},
        ),
        metric="mape",
        # a new GPU is usually a new generation: unseen-device intervals hold out a generation at a time
        machine_column="architecture",
        derived=("power_w", "energy_j"),
        derive=physical_power,
    )
)
