"""Target scales and transforms shared by families, calibration and metrics.

Most targets are positive quantities (times, power, energy, resources): they are learned in log
space, optionally relative to a reference scale (``log_ratio``: for GEMM runtime, the efficiency
against the device's roofline bound, which carries across devices), and their intervals are
relative. A few targets live on a scale of their own that reaches zero or below (``accuracy``: a
regression benchmark's score can be negative); they are learned as they are (``identity``), or as
a change from the reference where one is given (``difference``: a final accuracy from the last one
measured), and their intervals are absolute. Target names are part of the public contract, so their scale is
decided here, once, by name.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

#: Targets learned as they are, with absolute intervals; every other target is positive.
ABSOLUTE = frozenset({"accuracy"})
#: Targets that cannot exceed a value (an accuracy is a fraction; a score such as darcy's may be negative).
UPPER_BOUND = {"accuracy": 1.0}
TRANSFORMS = ("log_ratio", "log", "identity", "difference")


def is_absolute(target: str) -> bool:
    return target in ABSOLUTE


def choose(target: str, transform: str, reference: pd.Series) -> str:
    """The transform a family uses for a target. Absolute targets: ``difference`` from the reference
    where every training row has one, else ``identity``. Positive targets: ``log`` where the
    reference scale is missing for some training rows."""
    if transform not in TRANSFORMS:
        raise ValueError(f"target_transform must be one of {TRANSFORMS}, got {transform!r}")
    if is_absolute(target):
        return "difference" if reference.notna().all() and len(reference) else "identity"
    usable = reference.notna().all() and (reference > 0).all()
    return "log" if transform in ("identity", "difference") or not usable else transform


def encode(y: pd.Series, reference: pd.Series, transform: str) -> np.ndarray:
    z = y.to_numpy(dtype=float)
    if transform == "identity":
        return z
    if transform == "difference":
        return z - reference.to_numpy(dtype=float)
    z = np.log(z)
    return z - np.log(reference.to_numpy(dtype=float)) if transform == "log_ratio" else z


def decode(z: np.ndarray, reference: pd.Series, transform: str) -> np.ndarray:
    if transform == "identity":
        return np.asarray(z, dtype=float)
    if transform == "difference":
        return np.asarray(z, dtype=float) + reference.to_numpy(dtype=float)
    log_y = z + np.log(reference.to_numpy(dtype=float)) if transform == "log_ratio" else z
    return np.exp(log_y)


def present(target: str, y: pd.Series) -> np.ndarray:
    """Rows that carry a usable value of a target: finite, and positive unless the target is absolute."""
    values = pd.to_numeric(y, errors="coerce").to_numpy(dtype=float)
    ok = np.isfinite(values)
    return ok if is_absolute(target) else ok & (np.nan_to_num(values) > 0)


def residual(target: str, y: np.ndarray, predicted: np.ndarray) -> np.ndarray:
    """Measured against predicted on the target's scale: log ratio, or difference for absolute targets."""
    y, predicted = np.asarray(y, float), np.asarray(predicted, float)
    return y - predicted if is_absolute(target) else np.log(y) - np.log(predicted)


def clip(target: str, values: np.ndarray) -> np.ndarray:
    """Estimates or bounds kept within what the target can be."""
    bound = UPPER_BOUND.get(target)
    return np.asarray(values, float) if bound is None else np.minimum(values, bound)


def shift(target: str, predicted: np.ndarray, offset: np.ndarray) -> np.ndarray:
    """A prediction moved by a residual-scale offset (the inverse of ``residual``)."""
    predicted = np.asarray(predicted, float)
    return predicted + offset if is_absolute(target) else predicted * np.exp(offset)
