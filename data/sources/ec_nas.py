"""EC-NAS-Bench (MIT): NAS-Bench-101-style cells trained on a Quadro RTX 6000, epochs 0-4, with energy.

One row per (cell, repeat, epoch): ``accuracy`` is the test accuracy at that epoch, with train and
validation accuracy, training time and energy beside it: the short learning curves of ``nas-curve``,
one per ``run`` (cell and repeat), whose ``budget`` is the run's last epoch.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from preflight.data.sources._nas import check_nas, nas_frame
from preflight.data.tables import Loaded, RowChecks, file_sha256, numeric, read_csv

REQUIRED = [
    "space",
    "arch_hash",
    "repeat",
    "adjacency",
    "ops",
    "epoch",
    "train_acc",
    "val_acc",
    "test_acc",
    "energy_kwh_at_epoch",
    "gpu_device",
]


def _arch(adjacency: str, ops: str) -> str:
    try:
        return json.dumps({"adjacency": json.loads(adjacency), "ops": json.loads(ops)})
    except (json.JSONDecodeError, TypeError):
        return ""  # rejected by the notation check


def load(path: Path) -> Loaded:
    raw = read_csv(path, REQUIRED, "ec-nas")
    arch = pd.Series([_arch(a, o) for a, o in zip(raw["adjacency"], raw["ops"])])
    rows = nas_frame(
        space=["nb101"] * len(raw),
        arch=arch,
        arch_group=raw["arch_hash"].astype(str),
        dataset=["cifar10"] * len(raw),
        device=raw["gpu_device"],
        batch_size=[None] * len(raw),
        accuracy=numeric(raw, "test_acc"),
        epoch=numeric(raw, "epoch"),
        repeat=raw["repeat"],
        train_accuracy=numeric(raw, "train_acc"),
        valid_accuracy=numeric(raw, "val_acc"),
        train_energy_kwh=numeric(raw, "energy_kwh_at_epoch"),
        run=raw["space"].astype(str) + "/" + raw["arch_hash"].astype(str) + "/" + raw["repeat"].astype(str),
    )
    rows["budget"] = rows.groupby("run")["epoch"].transform("max")
    checks = RowChecks(len(raw))
    checks.reject(rows["epoch"].isna() | (rows["epoch"] < 0), "epoch missing or negative")
    check_nas(rows, checks, "nb101")
    return checks.finish("ec-nas", rows, file_sha256(path), path)
