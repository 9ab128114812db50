"""GEMM runtime, power and energy on GPUs and CPUs, including devices known only by spec sheet.

Runtime is learned as an efficiency relative to the roofline bound; power and energy follow from the
runtime estimate by a physical law (``models/power.py``): static power plus dynamic power rising with
the utilisation achieved, bounded by the board's TDP. No public source measures GEMM power while
the GEMM runs (GPPerf samples the board after each run), so the law's shape is its physics prior.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from preflight.data.gemm import GemmItem
from preflight.features import Features
from preflight.features import gemm as gemm_features
from preflight.models import power
from preflight.models.targets import Target
from preflight.models.task import Task, register

if TYPE_CHECKING:
    from preflight.models.predictor import Estimates

POWER_WARNING = (
    "power_w, energy_j: physical model (static + dynamic power, bounded by TDP), physics prior only: "
    "no GEMM power was measured on any device; the interval spans the prior, it is not calibrated"
)


def physical_power(features: Features, estimates: Estimates) -> None:
    """Power and energy from the runtime estimate: utilisation = roofline / runtime, its interval from
    the runtime's, power within the prior's range of shapes; energy = power × runtime."""
    roofline, tdp = features.reference["runtime_ms"].to_numpy(), features.reference["power_w"].to_numpy()
    kinds = features.meta["device_kind"].astype(str).to_numpy()
    runtime = {side: getattr(estimates, side)["runtime_ms"].to_numpy() for side in ("value", "low", "high")}
    watts = {side: np.full(len(kinds), np.nan) for side in runtime}
    for kind in np.unique(kinds):
        rows = (kinds == kind) & np.isfinite(tdp)
        if kind not in power.PHYSICS_PRIOR or not rows.any():
            continue
        shape = power.shape_for(kind)
        watts["value"][rows] = power.power_w(
            shape, power.utilisation(roofline[rows], runtime["value"][rows]), tdp[rows]
        )
        watts["low"][rows] = power.prior_interval(
            kind, power.utilisation(roofline[rows], runtime["high"][rows]), tdp[rows]
        )[0]
        watts["high"][rows] = power.prior_interval(
            kind, power.utilisation(roofline[rows], runtime["low"][rows]), tdp[rows]
        )[1]
    for side, frame in (("value", estimates.value), ("low", estimates.low), ("high", estimates.high)):
        frame["power_w"] = watts[side]
        frame["energy_j"] = power.energy_j(watts[side], runtime[side])
    estimates.notes = [[POWER_WARNING] if np.isfinite(watt) else [] for watt in watts["value"]]


GEMM = register(
    Task(
        name="gemm",
        item=GemmItem,
        targets={"runtime_ms": Target("ms"), "power_w": Target("W"), "energy_j": Target("J")},
        sources=("local-gemm", "gpperf", "deepbench", "uci-sgemm", "neusight"),
        featurize=gemm_features.tabular,
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
        families=("tree", "roofline"),
        default_family="tree",
        baseline="roofline",
        metric="mape",
        # a new GPU is usually a new generation: unseen-device intervals hold out a generation at a time
        machine_column="architecture",
        derived=("power_w", "energy_j"),
        derive=physical_power,
    )
)
