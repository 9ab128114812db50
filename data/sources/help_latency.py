"""HELP (github HayeonLee/HELP, MIT): latency of NAS-Bench-201 and FBNet architectures on 21 device
settings (GPUs at several batch sizes, Xeon CPUs, phones), one wide file per search space."""

from __future__ import annotations

from pathlib import Path

from preflight.data.sources._nas import check_nas, melt_latency, nas_frame
from preflight.data.tables import Loaded, RowChecks, file_sha256, read_csv


def _load(path: Path, source: str, space: str, notation: str, dataset: str) -> Loaded:
    raw = read_csv(path, ["arch_idx", notation], source)
    long = melt_latency(raw, ["arch_idx", notation])
    rows = nas_frame(
        space=[space] * len(long),
        arch=long[notation],
        arch_group=long["arch_idx"].astype(str),
        dataset=[dataset] * len(long),
        device=long["device"],
        batch_size=long["batch_size"],
        latency_ms=long["latency_ms"],
    )
    checks = RowChecks(len(rows))
    check_nas(rows, checks, space)
    return checks.finish(source, rows, file_sha256(path), path)


def load_nb201(path: Path) -> Loaded:
    """``help_nb201_latency.csv``: NAS-Bench-201 ``arch_str`` (CIFAR-10 networks)."""
    return _load(path, "help-nb201", "nb201", "arch_str", "cifar10")


def load_fbnet(path: Path) -> Loaded:
    """``help_fbnet_latency.csv``: FBNet ``op_str_list`` (ImageNet networks)."""
    return _load(path, "help-fbnet", "fbnet", "op_str_list", "imagenet")
