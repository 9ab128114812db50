"""Checks every GEMM loader applies to its canonical rows."""

from __future__ import annotations

import pandas as pd
from preflight.data.gemm import KERNEL_FIELDS, MAX_DIM
from preflight.data.tables import RowChecks, canonical_frame, numeric

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
    """A canonical GEMM table: every column present, absent ones as missing values but the batch ``b``,
    which is 1 where not given."""
    frame = canonical_frame(GEMM_COLUMNS, **columns)
    frame["b"] = numeric(frame, "b").fillna(1) if "b" in columns else 1
    return frame


def check_gemm(frame: pd.DataFrame, checks: RowChecks) -> None:
    """Reject rows whose shape or targets cannot be a real measurement."""
    for dim in ("b", "m", "n", "k"):
        value = numeric(frame, dim)
        checks.reject(
            value.isna() | (value <= 0) | (value > MAX_DIM) | (value % 1 != 0),
            f"{dim} not a positive integer",
        )
    checks.reject(numeric(frame, "runtime_ms").isna(), "runtime_ms missing or not a number")
    for target in ("runtime_ms", "power_w", "energy_j"):
        value = numeric(frame, target)
        checks.reject(value <= 0, f"{target} not positive")
