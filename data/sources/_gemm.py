"""Checks every GEMM loader applies to its canonical rows."""

from __future__ import annotations

import numpy as np
import pandas as pd
from preflight.data.gemm import KERNEL_FIELDS, MAX_DIM
from preflight.data.tables import RowChecks

GEMM_COLUMNS = [
    "b",
    "m",
    "n",
    "k",
    "dtype",
    "math_dtype",
    "trans_a",
    "trans_b",
    "device",
    "kernel",
    *KERNEL_FIELDS,
    "runtime_ms",
    "power_w",
    "energy_j",
]


def gemm_frame(**columns) -> pd.DataFrame:
    """A canonical GEMM table: every column present, absent ones as missing values."""
    n = len(next(iter(columns.values())))
    frame = pd.DataFrame({c: columns.get(c, pd.Series([np.nan] * n)) for c in GEMM_COLUMNS})
    frame["b"] = pd.to_numeric(frame["b"], errors="coerce").fillna(1) if "b" in columns else 1
    extra = {c: v for c, v in columns.items() if c not in GEMM_COLUMNS}
    return frame.assign(**extra)


def check_gemm(frame: pd.DataFrame, checks: RowChecks) -> None:
    """Reject rows whose shape or targets cannot be a real measurement."""
    for dim in ("b", "m", "n", "k"):
        value = pd.to_numeric(frame[dim], errors="coerce")
        checks.reject(
            value.isna() | (value <= 0) | (value > MAX_DIM) | (value % 1 != 0),
            f"{dim} not a positive integer",
        )
    checks.reject(
        pd.to_numeric(frame["runtime_ms"], errors="coerce").isna(), "runtime_ms missing or not a number"
    )
    for target in ("runtime_ms", "power_w", "energy_j"):
        value = pd.to_numeric(frame[target], errors="coerce")
        checks.reject(value <= 0, f"{target} not positive")
