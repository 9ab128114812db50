"""GEMM features: work, traffic, the device's roofline, tile and wave quantization, spec-sheet facts.

Every feature is computable from a GEMM item and the device's spec sheet, so a model can answer for
a device it has no measurements of. Works on numpy arrays and builds each frame once: a scheduler's
single-item request pays for this on every call.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from preflight.data.catalogue import Catalogue
from preflight.data.gemm import BYTES_PER_ELEMENT, KERNEL_FIELDS, Dtype
from preflight.features import Features, device

#: Tile assumed for wave quantization when no kernel configuration is given (typical cuBLAS tile).
DEFAULT_TILE = 128
_DTYPE_CODES = {d.value: i for i, d in enumerate(Dtype)}


def _quantization(m: np.ndarray, n: np.ndarray, block_m, block_n, units: np.ndarray) -> dict[str, np.ndarray]:
    tiles = np.ceil(m / block_m) * np.ceil(n / block_n)
    waves = tiles / units
    return {
        "tiles_log2": np.log2(tiles),
        "waves": waves,
        "wave_efficiency": waves / np.ceil(waves),
        "tile_efficiency": (m * n) / (tiles * block_m * block_n),
    }


def _tiling(kernel: dict[str, np.ndarray], element_bytes: np.ndarray) -> dict[str, np.ndarray]:
    """What a tiled kernel's knobs mean for one thread and one block (NaN where a knob is not given)."""
    threads = kernel["threads_m"] * kernel["threads_n"]
    rows_per_thread = kernel["block_m"] / kernel["threads_m"]
    cols_per_thread = kernel["block_n"] / kernel["threads_n"]
    staged = kernel["block_m"] * np.nan_to_num(kernel["cache_a"], nan=1) + kernel["block_n"] * np.nan_to_num(
        kernel["cache_b"], nan=1
    )
    return {
        "threads_log2": np.log2(threads),
        "thread_tile_log2": np.log2(rows_per_thread * cols_per_thread),
        "thread_tile_aspect_log2": np.log2(rows_per_thread / cols_per_thread),
        "shared_kb": staged * kernel["block_k"] * element_bytes / 1024,
        "loads_a_per_thread_log2": np.log2(
            kernel["block_m"] * kernel["block_k"] / (threads * kernel["vector_m"])
        ),
        "loads_b_per_thread_log2": np.log2(
            kernel["block_n"] * kernel["block_k"] / (threads * kernel["vector_n"])
        ),
    }


def _column(rows: pd.DataFrame, name: str) -> np.ndarray:
    """A numeric column, or NaN where the rows do not have it."""
    if name not in rows:
        return np.full(len(rows), np.nan)
    return pd.to_numeric(rows[name], errors="coerce").to_numpy(dtype=float)


def tabular(rows: pd.DataFrame, catalogue: Catalogue) -> Features:
    """Features for canonical GEMM rows (loaders' tables or API items as rows)."""
    m, n, k = (rows[c].to_numpy(dtype=float) for c in ("m", "n", "k"))
    dtype = rows["dtype"].astype(str).to_numpy()
    math_dtype = (
        rows["math_dtype"].fillna(rows["dtype"]).astype(str).to_numpy() if "math_dtype" in rows else dtype
    )
    specs = device.resolve(rows["device"].to_numpy(), catalogue)
    spec = device.spec_columns(specs)
    peaks = [s.peak(Dtype(d)) for s, d in zip(specs, math_dtype)]
    peak = np.array([p for p, _ in peaks]) * 1e12
    bandwidth = spec["memory_bandwidth_gbs"] * 1e9
    element_bytes = np.array([BYTES_PER_ELEMENT[Dtype(d)] for d in dtype], dtype=float)
    flops = 2 * m * n * k
    traffic = element_bytes * (m * k + k * n) + 4 * m * n  # inputs once, fp32/int32 output
    compute_s, memory_s = flops / peak, traffic / bandwidth
    roofline_ms = np.maximum(compute_s, memory_s) * 1e3
    units, llc_bytes = spec["compute_units"], spec["llc_mb"] * 2**20
    kernel = {f: _column(rows, f) for f in KERNEL_FIELDS}

    X = pd.DataFrame(
        {
            "m_log2": np.log2(m),
            "n_log2": np.log2(n),
            "k_log2": np.log2(k),
            "min_dim_log2": np.log2(np.minimum(np.minimum(m, n), k)),
            "flops_log2": np.log2(flops),
            "bytes_log2": np.log2(traffic),
            "intensity_log2": np.log2(flops / traffic),
            "dtype": [_DTYPE_CODES[d] for d in dtype],
            "math_dtype": [_DTYPE_CODES[d] for d in math_dtype],
            "element_bytes": element_bytes,
            "trans_a": rows["trans_a"].to_numpy(dtype=float),
            "trans_b": rows["trans_b"].to_numpy(dtype=float),
            "peak_tflops_log2": np.log2(peak / 1e12),
            "peak_is_fallback": np.array([f for _, f in peaks], dtype=float),
            "bandwidth_gbs_log2": np.log2(spec["memory_bandwidth_gbs"]),
            "ridge_log2": np.log2(peak / bandwidth),
            "bound_by_compute": (compute_s >= memory_s).astype(float),
            "roofline_ms_log2": np.log2(roofline_ms),
            "compute_units": units,
            "clock_mhz": spec["boost_clock_mhz"],
            "llc_mb": spec["llc_mb"],
            "working_set_over_llc_log2": np.log2(traffic / llc_bytes),
            "tdp_w": spec["tdp_w"],
            "device_kind": device.kind_codes(specs),
            "device_year": spec["year"],
            **{
                f"default_{name}": v
                for name, v in _quantization(m, n, DEFAULT_TILE, DEFAULT_TILE, units).items()
            },
            **{f"kernel_{f}": v for f, v in kernel.items()},
            **{
                f"kernel_{name}": v
                for name, v in _quantization(m, n, kernel["block_m"], kernel["block_n"], units).items()
            },
            **{f"kernel_{name}": v for name, v in _tiling(kernel, element_bytes).items()},
        }
    )
    reference = pd.DataFrame(
        {"runtime_ms": roofline_ms, "power_w": spec["tdp_w"], "energy_j": roofline_ms * spec["tdp_w"] / 1e3}
    )
    meta = pd.DataFrame(
        {
            "device_id": [s.id for s in specs],
            "shape": [f"{a}x{b}x{c}" for a, b, c in zip(m.astype(int), n.astype(int), k.astype(int))],
            "kernel": rows["kernel"].astype(str).to_numpy() if "kernel" in rows else "",
            "dtype": dtype,
            # calibration stratum: tuned-kernel sweeps err differently from library calls
            "stratum": np.where(np.isnan(kernel["block_m"]), "plain", "kernel"),
        }
    )
    return Features(X=X, reference=reference, meta=meta)
