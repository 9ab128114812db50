"""Baidu DeepBench GEMM results (Apache-2.0), many devices, precisions parsed by meaning."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from preflight.data.gemm import parse_precision
from preflight.data.sources._gemm import check_gemm, gemm_frame
from preflight.data.tables import Loaded, RowChecks, file_sha256, numeric, read_csv

REQUIRED = ["device", "precision", "M", "N", "K", "a_trans", "b_trans", "time_ms"]
#: A published throughput that disagrees with 2MNK/time by more than this factor marks a broken row.
THROUGHPUT_TOLERANCE = 1.5
_UNIT_SCALE = {"TERAFLOPS": 1e12, "GIGAFLOPS": 1e9, "TOPS": 1e12, "GOPS": 1e9}


def _precisions(texts: pd.Series) -> tuple[pd.Series, pd.Series]:
    """Input and math dtype per row; None where the precision string has no meaning we can read."""
    parsed: dict[str, tuple[str | None, str | None]] = {}
    for text in texts.dropna().unique():
        try:
            p = parse_precision(str(text))
            parsed[text] = (p.dtype.value, p.math_dtype.value)
        except ValueError:
            parsed[text] = (None, None)
    pairs = texts.map(lambda t: parsed.get(t, (None, None)))
    return pairs.str[0], pairs.str[1]


def _throughput_disagrees(raw: pd.DataFrame, runtime_ms: pd.Series) -> pd.Series:
    if "throughput" not in raw or "throughput_unit" not in raw:
        return pd.Series(False, index=raw.index)
    scale = raw["throughput_unit"].astype(str).str.upper().map(_UNIT_SCALE)
    published = numeric(raw, "throughput") * scale
    implied = 2 * numeric(raw, "M") * numeric(raw, "N") * numeric(raw, "K") / (runtime_ms / 1e3)
    ratio = np.maximum(published / implied, implied / published)
    return ratio > THROUGHPUT_TOLERANCE  # NaN compares False: rows without a throughput pass


def load(path: Path) -> Loaded:
    raw = read_csv(path, REQUIRED, "deepbench")
    dtype, math_dtype = _precisions(raw["precision"])
    runtime_ms = numeric(raw, "time_ms")
    rows = gemm_frame(
        m=raw["M"],
        n=raw["N"],
        k=raw["K"],
        dtype=dtype,
        math_dtype=math_dtype,
        trans_a=raw["a_trans"].astype(str).str.upper() == "T",
        trans_b=raw["b_trans"].astype(str).str.upper() == "T",
        device=raw["device"],
        runtime_ms=runtime_ms,
        precision=raw["precision"],
    )
    checks = RowChecks(len(raw))
    checks.reject(dtype.isna(), "precision not understood")
    for col in ("a_trans", "b_trans"):
        checks.reject(~raw[col].astype(str).str.upper().isin(["N", "T"]), f"{col} not N or T")
    checks.reject(raw["device"].isna(), "device missing")
    check_gemm(rows, checks)
    checks.reject(_throughput_disagrees(raw, runtime_ms), "time_ms disagrees with published throughput")
    return checks.finish("deepbench", rows, file_sha256(path), path)
