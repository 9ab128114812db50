"""GEMM features: work, traffic, the device's roofline, tile and wave quantization, spec-sheet facts.

Every feature is computable from a GEMM item and the device's spec sheet, so a model can answer for
a device it has no measurements of.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from preflight.features import Features
from preflight.data.catalogue import Catalogue, DeviceSpec
from preflight.data.gemm import BYTES_PER_ELEMENT, KERNEL_FIELDS, Dtype

#: Tile assumed for wave quantization when no kernel configuration is given (typical cuBLAS tile).
DEFAULT_TILE = 128
_KINDS = {"gpu": 0, "accelerator": 1, "cpu": 2, "soc": 3}
_DTYPE_CODES = {d.value: i for i, d in enumerate(Dtype)}


def _device_table(devices: pd.Series, catalogue: Catalogue) -> pd.DataFrame:
    """Resolve each distinct device name once; raises UnknownDevice for a name it cannot resolve."""
    specs: dict[str, DeviceSpec] = {name: catalogue.resolve(str(name)) for name in devices.unique()}
    return pd.DataFrame({"spec": devices.map(specs)})


def _peaks(specs: pd.Series, math_dtype: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    pairs = [spec.peak(Dtype(d)) for spec, d in zip(specs, math_dtype)]
    return np.array([p for p, _ in pairs]) * 1e12, np.array([f for _, f in pairs], dtype=float)


def _spec_column(specs: pd.Series, field: str) -> np.ndarray:
    return np.array([getattr(s, field) if getattr(s, field) is not None else np.nan for s in specs], dtype=float)


def _quantization(m: np.ndarray, n: np.ndarray, block_m: np.ndarray, block_n: np.ndarray, units: np.ndarray) -> dict:
    tiles = np.ceil(m / block_m) * np.ceil(n / block_n)
    waves = tiles / units
    return {
        "tiles_log2": np.log2(tiles),
        "waves": waves,
        "wave_efficiency": waves / np.ceil(waves),
        "tile_efficiency": (m * n) / (tiles * block_m * block_n),
    }


def tabular(rows: pd.DataFrame, catalogue: Catalogue) -> Features:
    """Features for canonical GEMM rows (loaders' tables or API items as rows)."""
    rows = rows.reset_index(drop=True)
    m, n, k = (rows[c].to_numpy(dtype=float) for c in ("m", "n", "k"))
    dtype = rows["dtype"].astype(str)
    math_dtype = rows["math_dtype"].fillna(rows["dtype"]).astype(str) if "math_dtype" in rows else dtype
    specs = _device_table(rows["device"], catalogue)["spec"]
    element_bytes = dtype.map(lambda d: BYTES_PER_ELEMENT[Dtype(d)]).to_numpy(dtype=float)
    flops = 2 * m * n * k
    traffic = element_bytes * (m * k + k * n) + 4 * m * n  # inputs once, fp32/int32 output
    peak, peak_fallback = _peaks(specs, math_dtype)
    bandwidth = _spec_column(specs, "memory_bandwidth_gbs") * 1e9
    units = _spec_column(specs, "compute_units")
    roofline_ms = np.maximum(flops / peak, traffic / bandwidth) * 1e3
    tdp = _spec_column(specs, "tdp_w")
    llc = _spec_column(specs, "llc_mb") * 2**20

    X = pd.DataFrame({
        "m_log2": np.log2(m), "n_log2": np.log2(n), "k_log2": np.log2(k),
        "min_dim_log2": np.log2(np.minimum(np.minimum(m, n), k)),
        "flops_log2": np.log2(flops), "bytes_log2": np.log2(traffic),
        "intensity_log2": np.log2(flops / traffic),
        "dtype": dtype.map(_DTYPE_CODES).to_numpy(), "math_dtype": math_dtype.map(_DTYPE_CODES).to_numpy(),
        "element_bytes": element_bytes,
        "trans_a": rows["trans_a"].astype(float).to_numpy(), "trans_b": rows["trans_b"].astype(float).to_numpy(),
        "peak_tflops_log2": np.log2(peak / 1e12), "peak_is_fallback": peak_fallback,
        "bandwidth_gbs_log2": np.log2(bandwidth / 1e9),
        "ridge_log2": np.log2(peak / bandwidth),
        "bound_by_compute": (flops / peak >= traffic / bandwidth).astype(float),
        "roofline_ms_log2": np.log2(roofline_ms),
        "compute_units": units, "clock_mhz": _spec_column(specs, "boost_clock_mhz"),
        "llc_mb": llc / 2**20, "working_set_over_llc_log2": np.log2(traffic / llc),
        "tdp_w": tdp, "device_kind": specs.map(lambda s: _KINDS[s.kind]).to_numpy(),
        "device_year": _spec_column(specs, "year"),
        **{f"default_{name}": v for name, v in _quantization(m, n, DEFAULT_TILE, DEFAULT_TILE, units).items()},
    })
    kernel = {f: pd.to_numeric(rows[f], errors="coerce").to_numpy(dtype=float) if f in rows else np.full(len(rows), np.nan)
              for f in KERNEL_FIELDS}
    X = X.assign(**{f"kernel_{f}": v for f, v in kernel.items()},
                 **{f"kernel_{name}": v for name, v in
                    _quantization(m, n, kernel["block_m"], kernel["block_n"], units).items()})
    reference = pd.DataFrame({"runtime_ms": roofline_ms, "power_w": tdp, "energy_j": roofline_ms * tdp / 1e3})
    meta = pd.DataFrame({
        "device_id": specs.map(lambda s: s.id).to_numpy(),
        "shape": [f"{a}x{b}x{c}" for a, b, c in zip(m.astype(int), n.astype(int), k.astype(int))],
        "kernel": rows["kernel"].astype(str).to_numpy() if "kernel" in rows else "",
        "dtype": dtype.to_numpy(),
    })
    return Features(X=X, reference=reference, meta=meta)
