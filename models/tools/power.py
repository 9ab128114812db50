"""Physical power of a device running a kernel, from its TDP and the utilisation the kernel achieves.

    P = P_static + (TDP - P_static) * u ** exponent,    P_static = static_fraction * TDP

``u`` in (0, 1] is the fraction of the device's roofline bound achieved (roofline time / actual
time). Only the shape (static fraction, exponent) is learned; TDP comes from the spec sheet, so the
model answers for a device whose power was never measured, and never above its TDP.

Physics prior (used for a kind of device with no fitted shape). The figures below are approximate,
commonly reported readings, not fits to any data set in this project:

* GPU: static fraction 0.20 (interval 0.10-0.35), exponent 0.5 (interval 0.25-1.0). Idle board
  power read by nvidia-smi is about 10-15 % of TDP on datacenter parts (A100 SXM ~50-60 W of 400 W,
  H100 SXM ~70-100 W of 700 W) and 5-15 % on consumer parts (10-30 W on a 200 W card: the low end at
  the lowest P-state, the high end idle at boost clocks). While a kernel runs, clocks are up and
  leakage grows with temperature, so the intercept under load sits above idle: 0.20, the interval
  spanning a cool consumer part to a hot datacenter one. Boards boost their clocks until they reach
  the power cap, so power rises fastest at low utilisation and saturates near TDP: a concave shape
  (exponent 0.5); 1.0 is the fixed-clock limit where power grows linearly with activity. Check: an
  H100 SXM running large bf16 GEMMs at u ~0.65 gives 140 + 560 * 0.81 = 590 W, inside the 480-750 W
  reported for it over 1 s windows.
* CPU: static fraction 0.30 (interval 0.10-0.50), exponent 0.8 (interval 0.5-1.0). Server packages
  idle at 20-40 % of TDP (large uncore and I/O dies), desktop ones at 10-20 %; SPECpower_ssj2008
  load lines of servers are close to linear in load and slightly concave (turbo at low load).
* Accelerators (TPU-like, power-capped boards) borrow the GPU prior (``KINDS`` in ``data/catalogue``
  names the prior each kind follows).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from preflight.data.catalogue import KINDS
from scipy.optimize import least_squares

#: Smallest utilisation: a kernel that ran did some work, and ``u ** exponent`` stays finite.
MIN_UTILISATION = 1e-6
#: Bounds of a fitted shape: (static fraction, exponent).
FIT_BOUNDS = ((0.0, 0.05), (0.95, 5.0))


@dataclass(frozen=True)
class PowerShape:
    """How power grows from the static floor to TDP as utilisation goes from 0 to 1."""

    static_fraction: float
    exponent: float


_GPU = PowerShape(static_fraction=0.20, exponent=0.5)
#: Each prior (provenance in the module docstring): its shape, and the shapes drawing the least and the
#: most power at any utilisation.
_PRIORS: dict[str, tuple[PowerShape, tuple[PowerShape, PowerShape]]] = {
    "gpu": (_GPU, (PowerShape(0.10, 1.0), PowerShape(0.35, 0.25))),
    "cpu": (PowerShape(static_fraction=0.30, exponent=0.8), (PowerShape(0.10, 1.0), PowerShape(0.50, 0.5))),
}
#: Per device kind with a prior (``KINDS``' ``power_prior``), its shape from physics alone.
PHYSICS_PRIOR: dict[str, PowerShape] = {
    name: _PRIORS[kind.power_prior][0] for name, kind in KINDS.items() if kind.power_prior
}
#: Per device kind with a prior, the prior shapes drawing the least and the most power.
PRIOR_INTERVAL: dict[str, tuple[PowerShape, PowerShape]] = {
    name: _PRIORS[kind.power_prior][1] for name, kind in KINDS.items() if kind.power_prior
}


def clip_utilisation(utilisation: ArrayLike) -> np.ndarray:
    """Utilisation clipped to (0, 1] (NaN stays NaN)."""
    return np.clip(np.asarray(utilisation, dtype=float), MIN_UTILISATION, 1.0)


def utilisation(roofline_ms: ArrayLike, runtime_ms: ArrayLike) -> np.ndarray:
    """The fraction of the roofline bound a kernel achieved, clipped to (0, 1]; a runtime of 0 (the open
    low end of a wide interval) is full utilisation."""
    with np.errstate(divide="ignore"):
        return clip_utilisation(np.asarray(roofline_ms, dtype=float) / np.asarray(runtime_ms, dtype=float))


def _tdp_fraction(shape: PowerShape, utilisation: ArrayLike) -> np.ndarray:
    activity = clip_utilisation(utilisation) ** shape.exponent
    return shape.static_fraction + (1 - shape.static_fraction) * activity


def power_w(shape: PowerShape, utilisation: ArrayLike, tdp_w: ArrayLike) -> np.ndarray:
    """Power in watts, in [static_fraction * TDP, TDP]."""
    return np.asarray(tdp_w, dtype=float) * _tdp_fraction(shape, utilisation)


def prior_interval(kind: str, utilisation: ArrayLike, tdp_w: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """The range of power the prior allows for a kind of device: (lowest, highest) in watts."""
    low, high = PRIOR_INTERVAL[kind]
    return power_w(low, utilisation, tdp_w), power_w(high, utilisation, tdp_w)


def shape_for(kind: str, fitted: Mapping[str, PowerShape] | None = None) -> PowerShape:
    """The fitted shape for a kind of device, else its physics prior."""
    if fitted and kind in fitted:
        return fitted[kind]
    if kind not in PHYSICS_PRIOR:
        raise ValueError(f"no power shape for device kind {kind!r}; priors exist for {sorted(PHYSICS_PRIOR)}")
    return PHYSICS_PRIOR[kind]


def fit_shape(
    utilisation: ArrayLike, power_w: ArrayLike, tdp_w: ArrayLike, start: PowerShape = _GPU
) -> PowerShape:
    """The shape that best explains measured power: bounded least squares of log(power / TDP) with a
    soft L1 loss (outliers beyond ~10 % weigh linearly). Rows with a non-finite or non-positive value
    are left out."""
    u, power, tdp = (np.asarray(a, dtype=float) for a in (utilisation, power_w, tdp_w))
    keep = np.isfinite(u) & np.isfinite(power) & np.isfinite(tdp) & (u > 0) & (power > 0) & (tdp > 0)
    if keep.sum() < 2:
        raise ValueError(f"fitting a power shape needs at least 2 valid rows, got {int(keep.sum())}")
    u, log_fraction = u[keep], np.log(power[keep] / tdp[keep])

    def residuals(x: np.ndarray) -> np.ndarray:
        return np.log(_tdp_fraction(PowerShape(x[0], x[1]), u)) - log_fraction

    x0 = np.clip([start.static_fraction, start.exponent], FIT_BOUNDS[0], FIT_BOUNDS[1])
    result = least_squares(residuals, x0, bounds=FIT_BOUNDS, loss="soft_l1", f_scale=0.1)
    return PowerShape(static_fraction=float(result.x[0]), exponent=float(result.x[1]))


def energy_j(power_w: ArrayLike, runtime_ms: ArrayLike) -> np.ndarray:
    """Energy in joules of running at ``power_w`` for ``runtime_ms``."""
    return np.asarray(power_w, dtype=float) * np.asarray(runtime_ms, dtype=float) / 1e3
