"""GPPerf (github pavlyhalim/GPPerf): CUTLASS SIMT SGEMM runtimes on one RTX 4070.

Its ``power_w`` is not the GEMM's power: the collection script samples ``nvidia-smi`` once after the
profiler and Nsight Compute have finished (an idle board in 1,433 rows, a board shared with another
workload in most others), and ``energy_j`` is that sample times the runtime. Both are left out.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from preflight.data.sources._gemm import check_gemm, gemm_frame
from preflight.data.tables import Loaded, RowChecks, file_sha256, numeric, read_csv

REQUIRED = [
    "m",
    "n",
    "k",
    "kernel",
    "layout",
    "block_m",
    "block_n",
    "block_k",
    "stages",
    "runtime_ms",
    "gpu_name",
]


def load(path: Path) -> Loaded:
    raw = read_csv(path, REQUIRED, "gpperf")
    layout = raw["layout"].astype(str).str.lower()
    rows = gemm_frame(
        m=raw["m"],
        n=raw["n"],
        k=raw["k"],
        dtype=pd.Series(["fp32"] * len(raw)),
        math_dtype=pd.Series(["fp32"] * len(raw)),
        trans_a=layout.str[0] == "t",
        trans_b=layout.str[1] == "t",
        device=raw["gpu_name"],
        kernel=raw["kernel"],
        block_m=raw["block_m"],
        block_n=raw["block_n"],
        block_k=raw["block_k"],
        stages=raw["stages"],
        runtime_ms=numeric(raw, "runtime_ms"),
        alpha=numeric(raw, "alpha"),
        beta=numeric(raw, "beta"),
    )
    checks = RowChecks(len(raw))
    checks.reject(~layout.isin(["nn", "nt", "tn", "tt"]), "layout not one of nn/nt/tn/tt")
    check_gemm(rows, checks)
    return checks.finish("gpperf", rows, file_sha256(path), path)
