"""Small NAS tables in the published layouts, made by the tests (NAS-Bench-201 cells, seeded)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

NB201_OPS = ("none", "skip_connect", "nor_conv_1x1", "nor_conv_3x3", "avg_pool_3x3")
#: HELP device settings and how slow each runs a unit of work, with its own op costs (CPU vs GPU).
HELP_SETTINGS = {
    "1080ti_1": (1.0, 0.3),
    "titan_rtx_1": (0.7, 0.3),
    "2080ti_32": (0.8, 0.5),
    "gold_6240": (2.5, 1.5),
    "pixel3": (6.0, 2.0),
}


def nb201_archs(n: int, seed: int = 0) -> list[str]:
    """``n`` distinct random NAS-Bench-201 cells."""
    rng = np.random.default_rng(seed)
    archs: dict[str, None] = {}
    while len(archs) < n:
        ops = rng.choice(NB201_OPS, 6)
        archs[f"|{ops[0]}~0|+|{ops[1]}~0|{ops[2]}~1|+|{ops[3]}~0|{ops[4]}~1|{ops[5]}~2|"] = None
    return list(archs)


def _work(arch: str, conv_weight: float) -> float:
    return (
        1
        + conv_weight * (9 * arch.count("nor_conv_3x3") + arch.count("nor_conv_1x1"))
        + 0.5 * arch.count("avg_pool")
    )


def accuracy(arch: str) -> float:
    """A smooth function of the cell: 3x3 convs help, a cell whose output is all 'none' is poor."""
    dead = arch.endswith("|none~0|none~1|none~2|")
    return 0.45 + 0.05 * arch.count("nor_conv_3x3") + 0.02 * arch.count("skip_connect") - 0.3 * dead


def write_help_csv(
    path: Path, n: int = 150, settings: tuple[str, ...] = tuple(HELP_SETTINGS), seed: int = 0
) -> Path:
    """A ``help_nb201_latency.csv`` with the given ``lat_<setting>`` columns."""
    rng = np.random.default_rng(seed)
    archs = nb201_archs(n, seed)
    table = pd.DataFrame({"arch_idx": range(n), "arch_str": archs})
    for setting in settings:
        scale, conv = HELP_SETTINGS[setting]
        table[f"lat_{setting}"] = [scale * _work(a, conv) * rng.lognormal(0, 0.03) for a in archs]
    table.to_csv(path, index=False)
    return path


def write_hw_nas_bench(directory: Path, n: int = 200, seed: int = 0) -> Path:
    """A ``hw_nas_bench_360.parquet`` (cifar100 and darcy on the Raspberry Pi 5) and its side file."""
    rng = np.random.default_rng(seed)
    archs = nb201_archs(n, seed)
    directory.mkdir(parents=True, exist_ok=True)
    pd.DataFrame({"arch_idx": range(n), "arch_str": archs}).to_csv(
        directory / "nb201_index_to_arch_str.csv", index=False
    )
    rows = []
    for task, scale in (("cifar100", 100), ("darcy", 1)):
        for i, a in enumerate(archs):
            latency = 3 * _work(a, 1.0) * rng.lognormal(0, 0.03)
            score = (
                accuracy(a) + rng.normal(0, 0.01) - (0.6 if task == "darcy" else 0)
            )  # darcy's score goes below 0
            rows.append(
                {
                    "arch_idx": i,
                    "rep_arch_idx": i,
                    "device": "pi5",
                    "framework": "litert",
                    "task": task,
                    "lat_ms_median": latency,
                    "lat_ms_var": 0.01,
                    "energy_mj": latency * 5 * rng.lognormal(0, 0.02),
                    "accuracy": score * scale,
                    "status": "ok",
                }
            )
    path = directory / "hw_nas_bench_360.parquet"
    pd.DataFrame(rows).to_parquet(path)
    return path


def write_local_curves(path: Path, runs: int = 40, epochs: int = 8, seed: int = 0) -> Path:
    """A ``local-curves`` file of saturating curves: a cell's level (``accuracy``), reached sooner
    at a higher learning rate, with noise."""
    from preflight.data.sources.local_curves import COLUMNS

    rng = np.random.default_rng(seed)
    lines = []
    for run, arch in enumerate(nb201_archs(runs, seed)):
        lr = float(rng.choice([0.001, 0.01, 0.1]))
        level = min(0.99, accuracy(arch) + 0.4)
        rate = {0.001: 0.15, 0.01: 0.5, 0.1: 1.2}[lr]
        for epoch in range(1, epochs + 1):
            valid = float(
                np.clip(0.1 + (level - 0.1) * (1 - np.exp(-rate * epoch)) + rng.normal(0, 0.005), 0, 1)
            )
            lines.append(
                {
                    "run": run,
                    "space": "nb201",
                    "arch": arch,
                    "dataset": "digits",
                    "learning_rate": lr,
                    "batch_size": 128,
                    "channels": 4,
                    "budget": epochs,
                    "seed": seed,
                    "epoch": epoch,
                    "train_loss": 1 - valid,
                    "train_accuracy": valid,
                    "valid_loss": 1 - valid,
                    "valid_accuracy": valid,
                    "epoch_seconds": 0.1,
                    "collected_at": "2026-11-23T00:00:00+00:00",
                }
            )
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(lines, columns=COLUMNS).to_csv(path, index=False)
    return path
