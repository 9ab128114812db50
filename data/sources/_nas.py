"""The canonical NAS table every NAS loader returns, and the checks they share.

One row per (architecture, dataset, device setting): ``space`` and ``arch`` (the native notation,
see ``data/arch.py::parse``), ``arch_group`` (architectures that share a measurement, e.g.
isomorphic ones: split on it), ``dataset``, ``device``, ``batch_size``, ``framework``, and the
targets ``latency_ms``, ``energy_mj`` and ``accuracy`` (a fraction, at most 1; a regression benchmark's
score such as darcy's can be negative), each where measured.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from preflight.data import arch
from preflight.data.catalogue import Catalogue
from preflight.data.errors import UnknownDevice
from preflight.data.tables import RowChecks, canonical_frame, numeric

NAS_COLUMNS = [
    "space",
    "arch",
    "arch_group",
    "dataset",
    "device",
    "batch_size",
    "framework",
    "latency_ms",
    "energy_mj",
    "accuracy",
]


def nas_frame(**columns) -> pd.DataFrame:
    """A canonical NAS table: every column present, absent ones as missing values."""
    return canonical_frame(NAS_COLUMNS, **columns)


def check_nas(frame: pd.DataFrame, checks: RowChecks, space: str) -> None:
    """Reject rows whose notation does not parse or whose targets cannot be real measurements."""
    checks.reject(
        ~np.array(arch.valid(space, frame["arch"].astype(str))), f"{space} architecture does not parse"
    )
    for target in ("latency_ms", "energy_mj"):
        value = numeric(frame, target)
        checks.reject(value <= 0, f"{target} not positive")
    accuracy = numeric(frame, "accuracy")
    checks.reject(accuracy > 1, "accuracy above 1 (not a fraction)")
    targets = frame[["latency_ms", "energy_mj", "accuracy"]].apply(pd.to_numeric, errors="coerce")
    checks.reject(targets.isna().all(axis=1), "no measured target")


def _is_device(name: str) -> bool:
    try:
        Catalogue.load().resolve(name)
        return True
    except UnknownDevice:
        return False


def melt_latency(raw: pd.DataFrame, id_columns: list[str]) -> pd.DataFrame:
    """HELP's wide ``lat_<device>[_<batch>]`` columns as long rows of device, batch size and latency.

    A trailing ``_<n>`` is a batch size unless the catalogue knows the whole name as a device
    (``essential_ph_1`` is a phone, not the phone ``essential_ph`` at batch 1).
    """
    settings = [c for c in raw.columns if c.startswith("lat_")]
    long = raw.melt(id_vars=id_columns, value_vars=settings, var_name="setting", value_name="latency_ms")
    name = long["setting"].str.removeprefix("lat_")
    split = name.str.extract(r"^(?P<device>.+)_(?P<batch>\d+)$")
    whole = {n: _is_device(n) for n in name.unique()}
    keep_whole = name.map(whole).astype(bool) | split["device"].isna()
    long["device"] = name.where(keep_whole, split["device"])
    long["batch_size"] = (
        pd.to_numeric(split["batch"].where(~keep_whole), errors="coerce").fillna(1).astype(int)
    )
    return long.drop(columns="setting")
