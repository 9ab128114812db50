"""NeuSight (ASPLOS'25, github sitar-lab/NeuSight, MIT): PyTorch kernels timed on nine GPUs.

``load`` reads the GEMM files (``gemm_train.csv``, ``gemm_test.csv``, ``amd_gemm.csv``): fp32 ``bmm``
(B, M, N, K) and ``linear`` (M, N, K; x @ Wᵀ) through cuBLAS / rocBLAS. The kernel name, warps and
blocks per SM, grid and block sizes were observed by a profiler on the device after the run: nobody
knows them before running on a new GPU, so they are never carried into the rows.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from preflight.data.sources._gemm import check_gemm, gemm_frame
from preflight.data.tables import Loaded, RowChecks, file_sha256, numeric, read_csv

GEMM_REQUIRED = ["OPName", "Latency", "Device", "B", "M", "N", "K"]
GEMM_OPS = ("bmm", "linear")


def load(path: Path) -> Loaded:
    raw = read_csv(path, GEMM_REQUIRED, "neusight")
    op = raw["OPName"].astype(str).str.lower()
    n = len(raw)
    rows = gemm_frame(
        b=numeric(raw, "B"),
        m=raw["M"],
        n=raw["N"],
        k=raw["K"],
        dtype=pd.Series(["fp32"] * n),
        math_dtype=pd.Series(["fp32"] * n),  # PyTorch ≥ 1.12 leaves TF32 off for matmul by default
        trans_a=pd.Series([False] * n),
        trans_b=op == "linear",
        device=raw["Device"],
        kernel=op,  # the operator, known before the run (not the profiled kernel name)
        runtime_ms=numeric(raw, "Latency"),
    )
    checks = RowChecks(n)
    checks.reject(~op.isin(GEMM_OPS), f"OPName not one of {'/'.join(GEMM_OPS)}")
    checks.reject(raw["Device"].isna(), "Device missing")
    checks.reject((op == "linear") & (numeric(raw, "B") != 1), "linear with B other than 1")
    check_gemm(rows, checks)
    return checks.finish("neusight", rows, file_sha256(path), path)
