"""Few-shot adaptation: measurements of a device refit the family, and what error remains becomes a
per-device offset with an interval of its own.

The refit adds the measurements to the training rows with weight ``SHOT_WEIGHT``. A device's interval
comes from a simulation of the same K-shot adaptation on every training device held out in
calibration (``k_shot_scores``), in units of the spread of the device's own shots; trained on a
single device, from the leave-one-out spread of the shots' residuals under the model as trained.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from preflight.features import Features, concat
from preflight.models.core.calibration import residuals
from preflight.models.core.conformal import Conformal
from preflight.models.core.targets import Target

#: Weight of one measurement of an adapted device against one training row when refitting
#: (chosen on DeepBench leave-one-device-out with 10 shots: 5 → 9.0%, 20 → 8.7%, 50 → 9.8% median APE).
SHOT_WEIGHT = 20.0
#: Simulated K-shot scores kept per target (a random subset when there are more).
MAX_SHOT_SCORES = 20_000
#: Floor of a spread of residuals (1% on a log scale), so that near-identical shots do not give a
#: zero-width interval.
MIN_SPREAD = 0.01

#: Per device, per target: ``{"offset", "scores", "scale"}``.
DeviceShots = dict[str, dict[str, dict]]


def merge(
    old: tuple[Features, pd.DataFrame] | None, features: Features, Y: pd.DataFrame, device_column: str
) -> tuple[Features, pd.DataFrame]:
    """Earlier measurements, less those of the devices measured anew, plus the new ones."""
    if old is None:
        return features, Y.reset_index(drop=True)
    renewed = set(features.meta[device_column])
    keep = np.flatnonzero(~old[0].meta[device_column].isin(renewed).to_numpy())
    return concat([old[0].take(keep), features]), pd.concat([old[1].iloc[keep], Y], ignore_index=True)


def weights(n_train: int, n_shots: int) -> np.ndarray:
    """Sample weights of the training rows followed by the shots."""
    return np.r_[np.ones(n_train), np.full(n_shots, SHOT_WEIGHT)]


def device_shots(
    targets: dict[str, Target],
    devices: pd.Series,
    Y: pd.DataFrame,
    refit: pd.DataFrame,
    base: pd.DataFrame,
    unseen_residuals: pd.DataFrame,
    seed: int,
    offset: bool = True,
) -> DeviceShots:
    """Offset and interval scores of each measured device and target, from the refit family's and the
    unadapted family's estimates of the measurements (no offset where the family adapted itself: its
    own update is the whole adaptation)."""
    out: DeviceShots = {}
    for device, rows in devices.groupby(devices).indices.items():
        per_target = {}
        for name in refit.columns.intersection(Y.columns):
            target, y = targets[name], Y[name].iloc[rows]
            residual = residuals(target, y, refit[name].iloc[rows])
            if not len(residual):
                continue
            zero_shot = residuals(target, y, base[name].iloc[rows])
            pooled = (
                k_shot_scores(unseen_residuals, name, len(residual), seed) if len(zero_shot) else np.array([])
            )
            per_target[name] = {"offset": float(np.median(residual)) if offset else 0.0} | (
                {"scores": pooled.tolist(), "scale": _spread(zero_shot)}
                if len(pooled)
                else {"scores": _loo_scores(zero_shot).tolist(), "scale": 1.0}
            )
        out[str(device)] = per_target
    return out


def k_shot_scores(
    unseen_residuals: pd.DataFrame, target: str, k: int, seed: int, draws: int = 20
) -> np.ndarray:
    """Scores of a K-shot adaptation, simulated on every training device held out in calibration:
    K of its residuals fix an offset, the rest score against it, in units of the K residuals'
    spread (``_spread``), so that a device whose shots scatter widely gets a wide interval.
    Conservative: the refit on the shots does better than an offset alone."""
    if target not in unseen_residuals:
        return np.array([])
    rng = np.random.default_rng(seed)
    scores = []
    for _, residual in unseen_residuals.groupby("device_id")[target]:
        values = residual.dropna().to_numpy()
        for _ in range(draws if len(values) > k else 0):
            chosen = rng.choice(len(values), size=k, replace=False)
            shots = values[chosen]
            scores.append(np.abs(np.delete(values, chosen) - np.median(shots)) / _spread(shots))
    pooled = np.concatenate(scores) if scores else np.array([])
    return rng.choice(pooled, MAX_SHOT_SCORES, replace=False) if len(pooled) > MAX_SHOT_SCORES else pooled


def offsets(shots: DeviceShots, devices: np.ndarray, target: str) -> np.ndarray:
    """Each row's offset on the target's scale (0 for devices not measured)."""
    if not shots:
        return np.zeros(len(devices))
    return np.array([shots.get(d, {}).get(target, {}).get("offset", 0.0) for d in devices])


def intervals(
    shots: DeviceShots,
    target: Target,
    name: str,
    value: np.ndarray,
    devices: np.ndarray,
    coverage: float,
    bounds: tuple[np.ndarray, np.ndarray],
) -> tuple[np.ndarray, np.ndarray]:
    """``bounds`` with the rows of measured devices replaced by their own intervals, where their
    scores suffice for the coverage."""
    low, high = bounds
    for device in set(devices) & set(shots):
        entry = shots[device].get(name, {})
        own = Conformal.from_scores(target, entry.get("scores", []))
        if np.isfinite(own.quantile(coverage)):
            rows = devices == device
            low[rows], high[rows] = own.interval(value[rows], coverage, scale=entry["scale"])
    return low, high


def _spread(residual: np.ndarray) -> float:
    """Mean absolute deviation of residuals from their median."""
    return max(float(np.mean(np.abs(residual - np.median(residual)))), MIN_SPREAD)


def _loo_scores(residual: np.ndarray) -> np.ndarray:
    """|r_i - median of the others|: how far a new measurement lies from an offset fitted without it."""
    if len(residual) < 2:
        return np.array([])
    return np.array([abs(r - np.median(np.delete(residual, i))) for i, r in enumerate(residual)])
