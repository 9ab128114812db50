"""HELP (github HayeonLee/HELP, MIT): NAS-Bench-201 architectures' latency on 21 device settings."""

from __future__ import annotations

from pathlib import Path

from preflight.data.sources._nas import check_nas, melt_latency, nas_frame
from preflight.data.tables import Loaded, RowChecks, file_sha256, read_csv


def load(path: Path) -> Loaded:
    raw = read_csv(path, ["arch_idx", "arch_str"], "help-nb201")
    long = melt_latency(raw, ["arch_idx", "arch_str"])
    rows = nas_frame(space=["nb201"] * len(long), arch=long["arch_str"], arch_group=long["arch_idx"].astype(str),
                     dataset=["cifar10"] * len(long), device=long["device"], batch_size=long["batch_size"],
                     latency_ms=long["latency_ms"])
    checks = RowChecks(len(rows))
    check_nas(rows, checks, "nb201")
    return checks.finish("help-nb201", rows, file_sha256(path), path)
