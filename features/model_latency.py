"""Whole-model features: the model's kernels, each with device-relative features and its roofline.

A model item (a config with batch, seq and mode, or an explicit operator list) becomes its kernels
(``data/model_latency.py::kernels``); the kernels of one operator and pass (forward, backward) form a
*part*, the unit a profiler times. Each part carries the features of its largest kernel (GEMMs through
the GEMM featurizer, memory-bound kernels by traffic over bandwidth), its roofline, how often it runs,
and, in traced training data, its measured time. The row's ``reference`` is the summed roofline.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd
from preflight.data.catalogue import Catalogue
from preflight.data.gemm import Dtype
from preflight.data.model_latency import OperatorSpec, kernels, model_operators
from preflight.features import Features, Parts, device
from preflight.features import gemm as gemm_features
from preflight.features.gemm import HEADROOM

#: Columns of ``Parts.frame`` that are not model inputs: the summed roofline, the measured time, how
#: often the part runs, and how many kernels it has.
PART_REFERENCE, PART_OBSERVED, PART_COUNT, PART_KERNELS = "roofline_ms", "observed_ms", "count", "kernels"
NOT_INPUTS = (PART_REFERENCE, PART_OBSERVED, PART_COUNT, PART_KERNELS)
KIND_CODES = {"gemm": 0, "elementwise": 1, "softmax": 2, "layernorm": 3, "embedding": 4}
GEMM_COLUMNS = (
    "k_log2",
    "aspect_log2",
    "intensity_over_ridge_log2",
    "tile_intensity_over_ridge_log2",
    "working_set_over_llc_log2",
    "batched",
    "library_waves_log2",
    "library_wave_efficiency",
    "library_tile_efficiency",
)
#: The memory-bound parts' device-relative columns, computed for every part. The kernel-sum family
#: leaves them out of a GEMM part, which reads the GEMM featurizer's own (waves of output tiles, working
#: set over the cache) and the board's power headroom instead: these two only repeat those crudely for
#: a GEMM while naming its device, and leaving each GPU out, a GPU came out as slow as the ones it
#: shared them with (docs/BENCHMARKS.md, issue 24, whole models).
MEMORY_BOUND_COLUMNS = ("elements_per_unit_log2", "traffic_over_llc_log2")
#: Directions physics fixes for a part's log time over its roofline: a board with more power headroom
#: (``features.gemm.power_headroom_log2``: a T4 or P4 cannot hold its boost clock) is never slower.
PART_MONOTONE = {HEADROOM: -1}
_OP_FIELDS = ("op", "input_shapes", "output_shape", "count")


def _operators(row: dict[str, Any]) -> tuple[list[OperatorSpec], np.ndarray, np.ndarray]:
    """The row's operators and, for a traced row, each one's measured forward and backward time. Rows
    are validated items or loaded traces: a config is expanded without validating the item again."""
    ops = row.get("ops")
    if isinstance(ops, str):
        ops = json.loads(ops)
    if ops is None or (isinstance(ops, float) and np.isnan(ops)):
        specs = model_operators(row["model"], int(row["batch"]), int(row["seq"]))
        return specs, np.full(len(specs), np.nan), np.full(len(specs), np.nan)
    specs = [OperatorSpec.model_validate({k: op[k] for k in _OP_FIELDS if k in op}) for op in ops]
    measured = {
        name: np.array([op.get(name, np.nan) for op in ops], dtype=float)
        for name in ("latency_ms", "bw_latency_ms")
    }
    return specs, measured["latency_ms"], measured["bw_latency_ms"]


def _kernel_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Every non-launch kernel of every row, with its owner row and the measured time of its op-pass."""
    tables = []
    for owner, row in enumerate(rows.to_dict("records")):
        specs, forward, backward = _operators(row)
        dtype = Dtype(row.get("dtype") or "fp32")
        table = kernels(specs, row.get("mode", "inf"), dtype)
        table = table[table["kind"] != "launch"].copy()
        op = table["op_index"].to_numpy(dtype=int)
        table["observed"] = np.where(table["pass"] == "fw", forward[op], backward[op])
        table["owner"], table["device"], table["dtype"] = owner, row["device"], dtype.value
        tables.append(table)
    return pd.concat(tables, ignore_index=True)


def _kernel_features(
    table: pd.DataFrame, catalogue: Catalogue
) -> tuple[pd.DataFrame, np.ndarray, Features | None]:
    """Device-relative features and the roofline (ms) of each kernel, and the GEMM kernels' features as
    the GEMM featurizer has them (None without any)."""
    specs = device.resolve(table["device"].to_numpy(), catalogue)
    spec = device.spec_columns(specs)
    peak = np.array([s.peak(Dtype(d))[0] for s, d in zip(specs, table["dtype"])]) * 1e12
    gemm_peak = np.array([s.gemm_peak(Dtype(d))[0] for s, d in zip(specs, table["dtype"])]) * 1e12
    bandwidth = spec["memory_bandwidth_gbs"] * 1e9
    traffic = table["bytes_moved"].to_numpy(dtype=float)
    roofline = np.maximum(table["flops"].to_numpy(dtype=float) / peak, traffic / bandwidth) * 1e3
    # no kernel runs faster than its launch, as a GEMM's reference has it: learned over its bare
    # roofline, a tiny elementwise kernel was 74x it at batch 1 and 9x at batch 2, and whole models got
    # faster as their batch doubled (docs/BENCHMARKS.md, issue 24, fourteenth session)
    roofline = np.maximum(
        roofline, gemm_features.launch_floor_ms(np.array([s.kind for s in specs], dtype=object))
    )
    X = pd.DataFrame(
        {
            "kind": table["kind"].map(KIND_CODES).to_numpy(dtype=float),
            "backward": (table["pass"] == "bw").to_numpy(dtype=float),
            "vendor": device.vendor_codes(specs),
            "elements_per_unit_log2": np.log2(
                np.maximum(table["elements"].to_numpy(dtype=float), 1) / spec["compute_units"]
            ),
            "traffic_over_llc_log2": np.log2(np.maximum(traffic, 1) / (spec["llc_mb"] * 2**20)),
            # the device's balance, as the GEMM features have it
            "ridge_log2": np.log2(gemm_peak / bandwidth),
        }
    )
    for column in (*GEMM_COLUMNS, HEADROOM):
        X[column] = np.nan
    gemm = (table["kind"] == "gemm").to_numpy()
    features = None
    if gemm.any():
        rows = table.loc[gemm, ["b", "m", "n", "k", "dtype", "device"]].assign(trans_a=False, trans_b=False)
        features = gemm_features.gemm_on_device(rows.reset_index(drop=True), catalogue)
        X.loc[gemm, list(GEMM_COLUMNS)] = features.X[list(GEMM_COLUMNS)].to_numpy()
        X.loc[gemm, HEADROOM] = features.meta[HEADROOM].to_numpy(dtype=float)
        roofline[gemm] = features.reference["runtime_ms"].to_numpy()
    X["roofline_us_log2"] = np.log2(np.minimum(roofline * 1e3, gemm_features.SATURATION_US))
    return X, roofline, features


def _parts(table: pd.DataFrame, X: pd.DataFrame, roofline: np.ndarray, gemms: Features | None) -> Parts:
    """One part per (row, operator, pass): the largest kernel's features, summed roofline, one time,
    and its GEMM kernels (``gemms``, in the table's order)."""
    key = table["owner"].astype(str) + "/" + table["op_index"].astype(str) + "/" + table["pass"]
    frame = X.assign(**{PART_REFERENCE: roofline, "_key": key.to_numpy()})
    # ties (a backward pass's two GEMMs of one size) go to the first kernel: a part is the same
    # whatever else the request holds
    largest = (
        frame.sort_values(PART_REFERENCE, ascending=False, kind="stable")
        .drop_duplicates("_key")
        .set_index("_key")
    )
    by_key = frame.groupby("_key")[PART_REFERENCE]
    summed, kernels = by_key.sum(), by_key.size()
    first = table.assign(_key=key.to_numpy()).drop_duplicates("_key").set_index("_key")
    parts = largest.loc[first.index].assign(
        **{
            PART_REFERENCE: summed.loc[first.index].to_numpy(),
            PART_OBSERVED: first["observed"].to_numpy(dtype=float),
            PART_COUNT: first["count"].to_numpy(dtype=float),
            PART_KERNELS: kernels.loc[first.index].to_numpy(dtype=float),
        }
    )
    owner = first["owner"].to_numpy(dtype=int)
    if gemms is None:
        return Parts(parts.reset_index(drop=True), owner)
    position = pd.Series(np.arange(len(first)), index=first.index)
    gemm_part = position.loc[key[(table["kind"] == "gemm").to_numpy()]].to_numpy()
    return Parts(parts.reset_index(drop=True), owner, gemms, gemm_part)


def model_on_device(rows: pd.DataFrame, catalogue: Catalogue) -> Features:
    """Features for model rows (traces from the loader, or API items as rows)."""
    table = _kernel_table(rows)
    X_kernels, roofline, gemms = _kernel_features(table, catalogue)
    parts = _parts(table, X_kernels, roofline, gemms)
    part_roofline = parts.frame[PART_COUNT].to_numpy() * parts.frame[PART_REFERENCE].to_numpy()
    total = np.bincount(parts.owner, weights=part_roofline, minlength=len(rows))
    is_gemm = parts.frame["kind"].to_numpy() == KIND_CODES["gemm"]
    gemm = np.bincount(parts.owner, weights=part_roofline * is_gemm, minlength=len(rows))
    specs = device.resolve(rows["device"].to_numpy(), catalogue)
    train = (rows["mode"] == "train").to_numpy(dtype=float)
    dtype = table.drop_duplicates("owner").set_index("owner")["dtype"].loc[np.arange(len(rows))]
    dtype = dtype.to_numpy().astype(str)
    X = pd.DataFrame(
        {
            "roofline_ms_log2": np.log2(total),
            "gemm_share": gemm / total,
            "train": train,
            "batch_log2": np.log2(rows["batch"].to_numpy(dtype=float)),
            "seq_log2": np.log2(rows["seq"].to_numpy(dtype=float)),
        }
    )
    model = rows["model"] if "model" in rows else pd.Series("ops", index=rows.index)
    meta = pd.DataFrame(
        {
            "device_id": [s.id for s in specs],
            "model": [m if isinstance(m, str) else "custom" for m in model.fillna("ops")],
            "mode": rows["mode"].astype(str).to_numpy(),
            "dtype": dtype,
            # calibration stratum: one operator errs differently from the sum over a whole model, and a
            # dtype no trace measured (fp16 on tensor cores) is as uncertain as a device never seen
            "stratum": np.char.add(
                np.where(np.bincount(parts.owner, minlength=len(rows)) == 1, "operator.", "model."), dtype
            ),
        }
    )
    return Features(X=X, reference=pd.DataFrame({"latency_ms": total}), meta=meta, parts=parts)
