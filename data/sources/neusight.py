"""NeuSight (ASPLOS'25, github sitar-lab/NeuSight, MIT): PyTorch kernels timed on nine GPUs.

``load`` reads the GEMM files (``gemm_train.csv``, ``gemm_test.csv``, ``amd_gemm.csv``): fp32 ``bmm``
(B, M, N, K) and ``linear`` (M, N, K; x @ Wᵀ) through cuBLAS / rocBLAS. ``load_elementwise`` reads
``elementwise_{train,test}.csv`` (memory-bound kernels on a (B, H) tensor) as one-operator items of
the model-latency task. The kernel name, warps and
blocks per SM, grid and block sizes were observed by a profiler on the device after the run: nobody
knows them before running on a new GPU, so they are never carried into the rows.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
from preflight.data.sources._gemm import check_gemm, gemm_frame
from preflight.data.tables import Loaded, RowChecks, file_sha256, numeric, read_csv

GEMM_REQUIRED = ["OPName", "Latency", "Device", "B", "M", "N", "K"]
GEMM_OPS = ("bmm", "linear")


def load(path: Path) -> Loaded:
    raw = read_csv(path, GEMM_REQUIRED, "neusight")
    op = raw["OPName"].astype(str).str.lower()
    batch, n = numeric(raw, "B"), len(raw)
    rows = gemm_frame(
        b=batch,
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
    checks.reject((op == "linear") & (batch != 1), "linear with B other than 1")
    check_gemm(rows, checks)
    return checks.finish("neusight", rows, file_sha256(path), path)


ELEMENTWISE_REQUIRED = ["OPName", "Latency", "Device", "B", "H"]
#: NeuSight's memory-bound kernels as traced operators: name -> (operator, tensor inputs). A ``u``
#: suffix is the operator with a scalar; ``ln`` is a layer norm over H.
ELEMENTWISE_OPS = {
    "add": ("add", 2), "addu": ("add", 1), "mul": ("mul", 2), "mulu": ("mul", 1),
    "div": ("div", 2), "divu": ("div", 1), "pow": ("pow", 2), "powu": ("pow", 1),
    "gelu": ("gelu", 1), "relu": ("relu", 1), "tanh": ("tanh", 1),
    "ln": ("layer_norm", 1), "softmax": ("softmax", 1),
}  # fmt: skip


def load_elementwise(path: Path) -> Loaded:
    """``elementwise_{train,test}.csv`` as model-latency rows of one operator each: a (B, H) tensor
    through one kernel, its measured time both the operator's and the whole item's."""
    raw = read_csv(path, ELEMENTWISE_REQUIRED, "neusight-elementwise")
    name = raw["OPName"].astype(str).str.lower()
    b, h, latency = numeric(raw, "B"), numeric(raw, "H"), numeric(raw, "Latency")
    checks = RowChecks(len(raw))
    checks.reject(~name.isin(list(ELEMENTWISE_OPS)), f"OPName not one of {', '.join(ELEMENTWISE_OPS)}")
    checks.reject(raw["Device"].isna(), "Device missing")
    for dim, value in (("B", b), ("H", h)):
        checks.reject(value.isna() | (value <= 0) | (value % 1 != 0), f"{dim} not a positive integer")
    checks.reject(~(latency > 0), "Latency not positive")

    def operator(op: str, rows: float, cols: float, ms: float) -> str:
        traced, inputs = ELEMENTWISE_OPS.get(op, (op, 1))
        shape = [int(rows), int(cols)] if rows == rows and cols == cols else [0, 0]
        record = {"op": traced, "input_shapes": [shape] * inputs, "output_shape": shape, "count": 1}
        return json.dumps([record | {"latency_ms": ms, "bw_latency_ms": 0.0}])

    rows = pd.DataFrame(
        {
            "device": raw["Device"],
            "model": "op:" + name,
            "mode": "inf",
            "seq": np.nan,
            "batch": np.nan,
            "dtype": "fp32",
            "latency_ms": latency,
            "ops": [operator(*args) for args in zip(name, b, h, latency)],
        }
    )
    return checks.finish("neusight-elementwise", rows, file_sha256(path), path)
