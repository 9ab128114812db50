"""Is a user's measurement believable before it adapts a model?

A measurement of a target kept on a log scale is compared twice: with its reference (the device's
roofline time for a GEMM's runtime, its TDP for power), against the range of that ratio in the
training data, and with the model's own estimate. Either more than :data:`SLACK` times beyond what
was ever seen is refused with the reason; one bad value must not bend every later answer.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from preflight.features import Features
from preflight.models.predictor import Predictor

#: How far past the training data's extreme ratio to its reference a measurement may lie.
SLACK = 10.0
#: How far from the model's estimate a measurement may lie.
MODEL_FACTOR = 1000.0


def implausible(predictor: Predictor, features: Features, Y: pd.DataFrame) -> list[tuple[int, str, str]]:
    """``(row, target, why)`` for every measured value that fails a check."""
    estimates = predictor.predict(features).value
    train_features, train_Y = predictor.train_
    problems = []
    for name in Y.columns:
        target = predictor.task.targets.get(name)
        if target is None or not target.relative or name not in estimates:
            continue
        measured = Y[name].to_numpy(dtype=float)
        problems += _against_model(name, measured, estimates[name].to_numpy(dtype=float))
        if name in features.reference and name in train_features.reference and name in train_Y:
            seen = _ratios(train_Y[name], train_features.reference[name])
            problems += _against_reference(name, measured, features.reference[name].to_numpy(float), seen)
    return sorted(problems)


def _ratios(y: pd.Series, reference: pd.Series) -> np.ndarray:
    ratio = y.to_numpy(dtype=float) / reference.to_numpy(dtype=float)
    return ratio[np.isfinite(ratio) & (ratio > 0)]


def _against_reference(
    name: str, measured: np.ndarray, reference: np.ndarray, seen: np.ndarray
) -> list[tuple[int, str, str]]:
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


def _against_model(name: str, measured: np.ndarray, estimate: np.ndarray) -> list[tuple[int, str, str]]:
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
