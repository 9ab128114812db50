"""local-curves: learning curves trained on this machine by ``preflight collect curves``
(``data/collect/curves.py``): NAS-Bench-201 cells on scikit-learn's digits, one row per (run, epoch).

Rows join the canonical NAS table (``space``, ``arch``, ``arch_group``, ``dataset``) with the curve
columns ``run``, ``epoch``, ``budget`` (the run's epochs), ``valid_accuracy`` (also ``accuracy``),
``train_accuracy``, the losses, ``epoch_seconds`` and the ``learning_rate``. A run missing some of
its epochs (an interrupted write) is rejected whole.
"""

from __future__ import annotations

from pathlib import Path

from preflight.data.sources._nas import check_nas, nas_frame
from preflight.data.tables import Loaded, RowChecks, file_sha256, numeric, read_csv

SOURCE = "local-curves"
#: The curves collected for the project and shipped with preflight.
SHIPPED = Path(__file__).resolve().parents[1] / "local" / "local_curves.csv"
#: The layout the collector writes, in order.
COLUMNS = [
    "run",
    "space",
    "arch",
    "dataset",
    "learning_rate",
    "batch_size",
    "channels",
    "budget",
    "seed",
    "epoch",
    "train_loss",
    "train_accuracy",
    "valid_loss",
    "valid_accuracy",
    "epoch_seconds",
    "collected_at",
]


def load(path: Path) -> Loaded:
    raw = read_csv(path, COLUMNS, SOURCE)
    epoch, budget = numeric(raw, "epoch"), numeric(raw, "budget")
    valid = numeric(raw, "valid_accuracy")
    rows = nas_frame(
        space=raw["space"],
        arch=raw["arch"],
        arch_group=raw["arch"],
        dataset=raw["dataset"],
        batch_size=numeric(raw, "batch_size"),
        accuracy=valid,
        run=raw["run"].astype(str),
        epoch=epoch,
        budget=budget,
        valid_accuracy=valid,
        train_accuracy=numeric(raw, "train_accuracy"),
        train_loss=numeric(raw, "train_loss"),
        valid_loss=numeric(raw, "valid_loss"),
        epoch_seconds=numeric(raw, "epoch_seconds"),
        learning_rate=numeric(raw, "learning_rate"),
    )
    checks = RowChecks(len(raw))
    checks.reject(~((epoch >= 1) & (epoch <= budget)), "epoch outside 1..budget")
    checks.reject(~valid.between(0, 1), "valid_accuracy not a fraction")
    epochs_held = rows.groupby("run")["epoch"].transform("nunique")
    checks.reject(epochs_held != budget, "run lacks some of its epochs")
    check_nas(rows, checks, "nb201")
    return checks.finish(SOURCE, rows, file_sha256(path), path)
