"""HW-NAS-Bench-360 (github roldebijvank/HW-NAS-Bench-360): NAS-Bench-201 on a Raspberry Pi 5 and a Pixel 6a.

``accuracy`` is a fraction; for the darcy task it is the benchmark's score (1 - relative error),
which a poor architecture can drive below zero. Latency was measured once per group of isomorphic
architectures (``rep_arch_idx``) and copied, so ``arch_group`` is that group. The architecture
strings come from the side file ``nb201_index_to_arch_str.csv`` beside the parquet file.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from preflight.data.errors import DataError
from preflight.data.sources._nas import check_nas, nas_frame
from preflight.data.tables import Loaded, RowChecks, file_sha256, read_csv

REQUIRED = [
    "arch_idx",
    "rep_arch_idx",
    "device",
    "framework",
    "task",
    "lat_ms_median",
    "energy_mj",
    "accuracy",
    "status",
]
SIDE_FILE = "nb201_index_to_arch_str.csv"
#: The benchmark's short device names, as its README spells them out (the catalogue resolves these).
DEVICES = {"pi5": "Raspberry Pi 5", "pixel": "Pixel 6a"}


def _as_fraction(accuracy: pd.Series, task: pd.Series) -> pd.Series:
    """Classification tasks are published in percent, darcy's score (1 - relative error) as is:
    a task whose values exceed 1 is read as percent."""
    in_percent = accuracy.groupby(task).transform("max") > 1
    return accuracy.where(~in_percent, accuracy / 100)


def load(path: Path) -> Loaded:
    path = Path(path)
    try:
        raw = pd.read_parquet(path)
    except (OSError, ValueError) as exc:
        raise DataError(f"hw-nas-bench-360: {path} is not a readable parquet file: {exc}") from exc
    missing = [c for c in REQUIRED if c not in raw.columns]
    if missing:
        raise DataError(f"hw-nas-bench-360: {path} lacks columns {missing}; is it the published layout?")
    names = read_csv(path.with_name(SIDE_FILE), ["arch_idx", "arch_str"], "hw-nas-bench-360")
    arch = raw["arch_idx"].map(names.set_index("arch_idx")["arch_str"])
    rows = nas_frame(
        space=["nb201"] * len(raw),
        arch=arch.fillna(""),
        arch_group=raw["rep_arch_idx"].astype(str),
        dataset=raw["task"],
        device=raw["device"].replace(DEVICES),
        batch_size=[1] * len(raw),
        framework=raw["framework"],
        latency_ms=raw["lat_ms_median"],
        energy_mj=raw["energy_mj"],
        accuracy=_as_fraction(pd.to_numeric(raw["accuracy"], errors="coerce"), raw["task"]),
    )
    checks = RowChecks(len(raw))
    checks.reject(raw["status"].astype(str) != "ok", "status is not ok")
    checks.reject(arch.isna(), f"arch_idx not in {SIDE_FILE}")
    check_nas(rows, checks, "nb201")
    return checks.finish("hw-nas-bench-360", rows, file_sha256(path), path)
