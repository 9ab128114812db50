"""HELP (github HayeonLee/HELP, MIT): FBNet architectures' latency on the same kind of device settings."""

from __future__ import annotations

from pathlib import Path

from preflight.data.sources._nas import check_nas, melt_latency, nas_frame
from preflight.data.tables import Loaded, RowChecks, file_sha256, read_csv


def load(path: Path) -> Loaded:
    raw = read_csv(path, ["arch_idx", "op_str_list"], "help-fbnet")
    long = melt_latency(raw, ["arch_idx", "op_str_list"])
    rows = nas_frame(space=["fbnet"] * len(long), arch=long["op_str_list"], arch_group=long["arch_idx"].astype(str),
                     dataset=["imagenet"] * len(long), device=long["device"], batch_size=long["batch_size"],
                     latency_ms=long["latency_ms"])
    checks = RowChecks(len(rows))
    check_nas(rows, checks, "fbnet")
    return checks.finish("help-fbnet", rows, file_sha256(path), path)
