"""UCI "SGEMM GPU kernel performance" (CC BY 4.0): CLTune kernel space, 2048^3 on a GTX 680, 4 repeats."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from preflight.data.sources._gemm import check_gemm, gemm_frame
from preflight.data.tables import Loaded, RowChecks, file_sha256, numeric, read_csv

PARAMETERS = {
    "MWG": "block_m",
    "NWG": "block_n",
    "KWG": "block_k",
    "MDIMC": "threads_m",
    "NDIMC": "threads_n",
    "MDIMA": "local_m",
    "NDIMB": "local_n",
    "KWI": "unroll_k",
    "VWM": "vector_m",
    "VWN": "vector_n",
    "STRM": "stride_m",
    "STRN": "stride_n",
    "SA": "cache_a",
    "SB": "cache_b",
}
RUNS = ["Run1 (ms)", "Run2 (ms)", "Run3 (ms)", "Run4 (ms)"]
SIZE = 2048
DEVICE = "NVIDIA GeForce GTX 680"


def load(path: Path) -> Loaded:
    raw = read_csv(path, [*PARAMETERS, *RUNS], "uci-sgemm")
    runs = raw[RUNS].apply(pd.to_numeric, errors="coerce")
    mean = runs.mean(axis=1, skipna=False)
    params = {new: numeric(raw, old) for old, new in PARAMETERS.items()}
    # a kernel family: the work-group tile and thread layout; the finer knobs vary within it
    family = raw[["MWG", "NWG", "KWG", "MDIMC", "NDIMC"]].astype(str).agg("_".join, axis=1)
    n = len(raw)
    rows = gemm_frame(
        m=pd.Series([SIZE] * n),
        n=pd.Series([SIZE] * n),
        k=pd.Series([SIZE] * n),
        dtype=pd.Series(["fp32"] * n),
        math_dtype=pd.Series(["fp32"] * n),
        trans_a=pd.Series([False] * n),
        trans_b=pd.Series([False] * n),
        device=pd.Series([DEVICE] * n),
        kernel="wg" + family,
        runtime_ms=mean,
        **params,
        repeat_ape_pct=100 * runs.sub(mean, axis=0).abs().div(mean, axis=0).mean(axis=1),
    )
    checks = RowChecks(n)
    checks.reject(runs.isna().any(axis=1), "a repeat is missing or not a number")
    checks.reject(pd.DataFrame(params).isna().any(axis=1), "a kernel parameter is not a number")
    check_gemm(rows, checks)
    return checks.finish("uci-sgemm", rows, file_sha256(path), path)
