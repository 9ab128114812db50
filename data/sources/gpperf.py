"""GPPerf (github pavlyhalim/GPPerf): CUTLASS SIMT SGEMM on one RTX 4070 with NVML power."""

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
    "power_w",
    "energy_j",
    "gpu_name",
]
#: The published file writes an unread power sample as this string; such rows simply lack power.
POWER_NOT_READ = "[N/A]"


def load(path: Path) -> Loaded:
    raw = read_csv(path, REQUIRED, "gpperf")
    layout = raw["layout"].astype(str).str.lower()
    power_text = raw["power_w"].astype(str).str.strip().fillna("")  # pandas 3 keeps empty cells as NaN
    unread = power_text.isin([POWER_NOT_READ, ""])
    power = pd.to_numeric(power_text.where(~unread), errors="coerce")
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
        power_w=power,
        energy_j=numeric(raw, "energy_j"),
        alpha=numeric(raw, "alpha"),
        beta=numeric(raw, "beta"),
    )
    checks = RowChecks(len(raw))
    checks.reject(~layout.isin(["nn", "nt", "tn", "tt"]), "layout not one of nn/nt/tn/tt")
    checks.reject(power.isna() & ~unread, "power_w not a number")
    check_gemm(rows, checks)
    return checks.finish("gpperf", rows, file_sha256(path), path)
