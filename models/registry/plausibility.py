"""Is a user's measurement believable before it adapts a model?

Physics first: a measurement is refused when it beats a physical limit of the device, i.e. when it is
faster than its reference for a target that never beats it (``Target.at_least_reference``: a GEMM's
roofline with its launch floor, less :data:`LIMIT_TOLERANCE` for rounding), or when it draws more
power than the device's TDP allows (a target in W, more than :data:`POWER_MARGIN` times the TDP).
Then two checks against what is known, for a target kept on a log scale: its ratio to the reference
more than :data:`SLACK` times beyond that ratio's range in the training data, and a value more than
:data:`MODEL_FACTOR` times away from the model's own estimate. Each refusal gives the first check a
value fails, and why; one bad value must not bend every later answer.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from preflight.features import Features
from preflight.models.core.predictor import Predictor
from preflight.models.core.targets import Target

#: How far past the training data's extreme ratio to its reference a measurement may lie.
SLACK = 10.0
#: How far from the model's estimate a measurement may lie.
MODEL_FACTOR = 1000.0
#: How much faster than its physical limit a measurement may be (rounding of the limit and the timer).
LIMIT_TOLERANCE = 0.01
#: How far above the device's TDP a measured power may lie (boost windows, sensor error).
POWER_MARGIN = 1.2

Problems = list[tuple[int, str, str]]


def implausible(predictor: Predictor, features: Features, Y: pd.DataFrame) -> Problems:
    """``(row, target, why)`` for every measured value that fails a check: the first check it fails."""
    estimates = predictor.predict(features).value
    train_features, train_Y = predictor.train_
    problems: Problems = []
    for name in Y.columns:
        target = predictor.task.targets.get(name)
        if target is None:
            continue
        measured = Y[name].to_numpy(dtype=float)
        reference = features.reference[name].to_numpy(float) if name in features.reference else None
        if reference is not None and target.at_least_reference:
            problems += _faster_than_limit(name, target, measured, reference)
        if reference is not None and target.unit == "W":
            problems += _above_tdp(name, measured, reference)
        if not target.kind.relative or name not in estimates:
            continue
        if reference is not None and name in train_features.reference and name in train_Y:
            seen = _ratios(train_Y[name], train_features.reference[name])
            problems += _against_reference(name, measured, reference, seen)
        problems += _against_model(name, measured, estimates[name].to_numpy(dtype=float))
    first = {(row, name): why for row, name, why in reversed(problems)}
    return sorted((row, name, why) for (row, name), why in first.items())


def _faster_than_limit(name: str, target: Target, measured: np.ndarray, limit: np.ndarray) -> Problems:
    with np.errstate(invalid="ignore"):
        bad = np.flatnonzero(np.isfinite(limit) & (measured < limit * (1 - LIMIT_TOLERANCE)))
    return [
        (
            int(i),
            name,
            f"{name}={measured[i]:.4g} is faster than the device can be: its physical limit (the roofline "
            f"of its spec sheet, with the launch floor) is {limit[i]:.4g} {target.unit}",
        )
        for i in bad
    ]


def _above_tdp(name: str, measured: np.ndarray, tdp: np.ndarray) -> Problems:
    with np.errstate(invalid="ignore"):
        bad = np.flatnonzero(np.isfinite(tdp) & (measured > tdp * POWER_MARGIN))
    return [
        (
            int(i),
            name,
            f"{name}={measured[i]:.4g} W is {measured[i] / tdp[i]:.3g}x the device's TDP {tdp[i]:.4g} W; "
            f"a measured draw exceeds its TDP by {POWER_MARGIN - 1:.0%} at most",
        )
        for i in bad
    ]


def _ratios(y: pd.Series, reference: pd.Series) -> np.ndarray:
    ratio = y.to_numpy(dtype=float) / reference.to_numpy(dtype=float)
    return ratio[np.isfinite(ratio) & (ratio > 0)]


def _against_reference(name: str, measured: np.ndarray, reference: np.ndarray, seen: np.ndarray) -> Problems:
    if not len(seen):
        return []
    low, high = seen.min() / SLACK, seen.max() * SLACK
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = measured / reference
    bad = np.flatnonzero(np.isfinite(ratio) & ((ratio < low) | (ratio > high)))
    return [
        (
            int(i),
            name,
            f"{name}={measured[i]:.4g} is {ratio[i]:.3g}x its reference {reference[i]:.4g} (the device's "
            f"roofline or rated value); measurements in the training data lie within "
            f"{seen.min():.3g}x-{seen.max():.3g}x",
        )
        for i in bad
    ]


def _against_model(name: str, measured: np.ndarray, estimate: np.ndarray) -> Problems:
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = measured / estimate
    bad = np.flatnonzero(np.isfinite(ratio) & ((ratio > MODEL_FACTOR) | (ratio < 1 / MODEL_FACTOR)))
    return [
        (
            int(i),
            name,
            f"{name}={measured[i]:.4g} is {ratio[i]:.3g}x the model's estimate {estimate[i]:.4g} "
            f"(more than {MODEL_FACTOR:g}x away)",
        )
        for i in bad
    ]
