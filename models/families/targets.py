"""Target transforms shared by families: log space, optionally relative to a reference scale.

``log_ratio`` learns ``log(y / reference)`` (for GEMM runtime, the efficiency against the device's
roofline bound), which carries across devices; ``log`` learns ``log(y)``. A target whose reference
is missing for some training rows falls back to ``log``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

TRANSFORMS = ("log_ratio", "log")


def choose(transform: str, reference: pd.Series) -> str:
    if transform not in TRANSFORMS:
        raise ValueError(f"target_transform must be one of {TRANSFORMS}, got {transform!r}")
    usable = reference.notna().all() and (reference > 0).all()
    return transform if transform == "log" or usable else "log"


def encode(y: pd.Series, reference: pd.Series, transform: str) -> np.ndarray:
    z = np.log(y.to_numpy(dtype=float))
    return z - np.log(reference.to_numpy(dtype=float)) if transform == "log_ratio" else z


def decode(z: np.ndarray, reference: pd.Series, transform: str) -> np.ndarray:
    log_y = z + np.log(reference.to_numpy(dtype=float)) if transform == "log_ratio" else z
    return np.exp(log_y)


def present(y: pd.Series) -> np.ndarray:
    """Rows that carry a usable (positive) value of a target."""
    return (y.notna() & (y > 0)).to_numpy()
