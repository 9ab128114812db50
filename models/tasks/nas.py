"""NAS: the accuracy of an architecture on a dataset, and its latency and energy on a device setting."""

from __future__ import annotations

import pandas as pd

from preflight.data.nas import ArchItem, LatencyItem
from preflight.features import arch as arch_features
from preflight.models.task import Task, register

_SPLITS = {"arch": ("arch_group",), "dataset": ("dataset",), "space": ("space",)}


def final_accuracy(table: pd.DataFrame) -> pd.DataFrame:
    """One row per (architecture, dataset): the last epoch's accuracy, averaged over repeated runs."""
    rows = table[table["accuracy"].notna()]
    if "epoch" in rows and rows["epoch"].notna().any():
        last = rows.groupby(["space", "arch", "dataset"])["epoch"].transform("max")
        rows = rows[rows["epoch"] == last]
    keys = ["space", "arch", "arch_group", "dataset"]
    return rows.groupby(keys, as_index=False, sort=False)["accuracy"].mean()


def measured_latency(table: pd.DataFrame) -> pd.DataFrame:
    """Rows with a latency or an energy measured on a named device."""
    measured = table[["latency_ms", "energy_mj"]].notna().any(axis=1)
    named = table["device"].notna() & (table["device"].astype(str) != "")
    return table[measured & named]


NAS_ACCURACY = register(Task(
    name="nas-accuracy",
    item=ArchItem,
    targets={"accuracy": "fraction (a score for regression benchmarks such as darcy)"},
    sources=("hw-nas-bench-360", "nas-bench-graph", "ec-nas"),
    featurize=arch_features.tabular,
    groups=_SPLITS,
    group_key="arch",
    families=("tree", "gnn", "linear"),
    default_family="tree",
    baseline="linear",
    metric="kendall",
    select=final_accuracy,
    max_rows_per_source=10_000,  # a first start trains every task: keep NAS to minutes on 2 cores
))

NAS_LATENCY = register(Task(
    name="nas-latency",
    item=LatencyItem,
    targets={"latency_ms": "ms", "energy_mj": "mJ"},
    # NAS-Bench-Graph's latency comes from a machine its file does not name: not a device setting
    sources=("help-nb201", "help-fbnet", "hw-nas-bench-360"),
    featurize=arch_features.tabular,
    groups=_SPLITS | {"device": ("device_id",), "hardware": ("hardware",)},
    group_key="arch",
    families=("tree", "gnn", "linear"),
    default_family="tree",
    baseline="linear",
    metric="mape",
    select=measured_latency,
    max_rows_per_source=10_000,
))
