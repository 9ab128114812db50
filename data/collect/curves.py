"""The project's own learning curves: NAS-Bench-201 cells trained on scikit-learn's digits, on CPU.

Each run samples a cell of the NAS-Bench-201 space (the op graph of ``data/arch.py``) and a learning
rate with a fixed seed, trains a scaled-down NAS-Bench-201 network (stem, three stages of one cell
joined by residual reduction blocks, global pooling) for ``epochs`` epochs with SGD and a cosine
schedule, and records per epoch the train and validation accuracy and loss and the wall time.
A run's lines are appended together with one write (``csvlog``), so an interrupted collection
keeps only whole runs and a rerun with the same seed continues where it stopped.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import torch
from preflight.data.cluster import fleet, fleet_size
from preflight.data.collect.csvlog import append, check_same, open_log
from preflight.data.errors import UsageError
from preflight.data.sources.local_curves import COLUMNS, SOURCE
from preflight.data.store import atomic_write_bytes
from preflight.data.threads import torch_threads
from rich.progress import Progress
from torch import nn

NB201_OPS = ("none", "skip_connect", "nor_conv_1x1", "nor_conv_3x3", "avg_pool_3x3")
LEARNING_RATES = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05)
CHANNELS, BATCH_SIZE, WEIGHT_DECAY, MOMENTUM = 4, 128, 5e-4, 0.9
#: Validation rows held out of digits' 1,797 images (the rest train), drawn with a fixed seed.
VALID_ROWS = 600
DATASET = "digits"


@dataclass(frozen=True)
class Run:
    run: int
    arch: str
    learning_rate: float


@dataclass
class CollectSummary:
    path: Path
    trained: int
    skipped_existing: int


def collect_curves(
    out: Path,
    *,
    runs: int = 300,
    epochs: int = 20,
    seed: int = 0,
    workers: int | None = None,
    progress: bool = True,
) -> CollectSummary:
    """Train the first ``runs`` runs of the seeded plan for ``epochs`` epochs each, appending to ``out``.

    With ``RAY_ADDRESS`` the runs are trained by ``workers`` Ray workers (default: one per CPU of the
    cluster) and appended here as each comes back; a run's curve is the same wherever it is trained."""
    out, planned = Path(out), plan(runs, seed)
    done = _complete_runs(out, open_log(out, COLUMNS, SOURCE), epochs, seed)
    pending = [run for run in planned if str(run.run) not in done]
    summary = CollectSummary(out, trained=0, skipped_existing=len(planned) - len(pending))
    count = fleet_size(workers, "CPU")
    trained = fleet(Trainer, (epochs, seed), count, {"num_cpus": 1}, lambda i, _: pending[i::count])
    fd = os.open(out, os.O_WRONLY | os.O_APPEND)
    try:
        with Progress(disable=not progress) as bar:
            task = bar.add_task("curves", total=len(pending))
            for _, _, rows in trained:
                append(fd, rows)
                summary.trained += 1
                bar.update(task, advance=1, description=f"curves: {summary.trained} trained")
    finally:
        os.close(fd)
    return summary


class Trainer:
    """A fleet worker that trains runs of one plan, on one torch thread (the runs are small: a second
    thread mostly synchronises), on the digits it loads once."""

    def __init__(self, epochs: int, seed: int) -> None:
        self.epochs, self.seed, self.data = epochs, seed, _digits()

    def describe(self) -> None:
        """Runs train the same on every machine: nothing to tell."""

    def run(self, run: Run) -> list[tuple[object, ...]]:
        """The run's rows, one per epoch."""
        with torch_threads(1):
            return _rows(run, self.epochs, self.seed, train(run, self.data, self.epochs, self.seed))


def plan(runs: int, seed: int) -> list[Run]:
    """The first ``runs`` runs of the seeded plan: distinct cells, each with a learning rate."""
    if runs > len(NB201_OPS) ** 6:
        raise UsageError(f"{runs} runs asked for, but the space holds {len(NB201_OPS) ** 6} distinct cells")
    rng = np.random.default_rng(seed)
    cells: dict[str, float] = {}
    while len(cells) < runs:
        ops = rng.choice(NB201_OPS, size=6)
        cell = "|{}~0|+|{}~0|{}~1|+|{}~0|{}~1|{}~2|".format(*ops)
        cells.setdefault(cell, float(rng.choice(LEARNING_RATES)))
    return [Run(i, cell, lr) for i, (cell, lr) in enumerate(cells.items())]


def _complete_runs(out: Path, rows: list[dict[str, str]], epochs: int, seed: int) -> set[str]:
    """The runs already in the file (of the same plan: epochs and seed); a run cut short by a torn
    write is removed, to be trained again."""
    check_same(
        out,
        {"epochs": (epochs, (row["budget"] for row in rows)), "seed": (seed, (row["seed"] for row in rows))},
    )
    epochs_held = Counter(row["run"] for row in rows)
    partial = {run for run, n in epochs_held.items() if n != epochs}
    if partial:
        lines = out.read_text().splitlines(keepends=True)
        kept = [lines[0]] + [line for line, row in zip(lines[1:], rows) if row["run"] not in partial]
        atomic_write_bytes(out, "".join(kept).encode())
    return set(epochs_held) - partial


# -- the network ---------------------------------------------------------------------------------------------


def _op(name: str, channels: int) -> nn.Module:
    if name == "none":
        return _Zero()
    if name == "skip_connect":
        return nn.Identity()
    if name == "avg_pool_3x3":
        return nn.AvgPool2d(3, stride=1, padding=1, count_include_pad=False)
    kernel = 1 if name == "nor_conv_1x1" else 3
    return nn.Sequential(
        nn.ReLU(),
        nn.Conv2d(channels, channels, kernel, padding=kernel // 2, bias=False),
        nn.BatchNorm2d(channels),
    )


class _Zero(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 0.0


class Cell(nn.Module):
    """A NAS-Bench-201 cell: node j sums an op applied to every earlier node."""

    def __init__(self, arch_str: str, channels: int) -> None:
        super().__init__()
        edges = [entry.split("~") for group in arch_str.strip("|").split("|+|") for entry in group.split("|")]
        self.sources = [int(source) for _, source in edges]
        self.ops = nn.ModuleList(_op(name, channels) for name, _ in edges)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        nodes, edge = [x], 0
        for target in range(1, 4):
            outputs = [self.ops[e](nodes[self.sources[e]]) for e in range(edge, edge + target)]
            edge += target
            nodes.append(sum(outputs[1:], outputs[0]))
        return nodes[3]


class _Reduction(nn.Module):
    """NAS-Bench-201's residual block that halves the resolution and doubles the channels."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.ReLU(),
            nn.Conv2d(channels, 2 * channels, 3, stride=2, padding=1, bias=False),
            nn.BatchNorm2d(2 * channels),
            nn.ReLU(),
            nn.Conv2d(2 * channels, 2 * channels, 3, padding=1, bias=False),
            nn.BatchNorm2d(2 * channels),
        )
        self.shortcut = nn.Sequential(nn.AvgPool2d(2), nn.Conv2d(channels, 2 * channels, 1, bias=False))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x) + self.shortcut(x)


def network(arch_str: str, channels: int = CHANNELS, classes: int = 10) -> nn.Module:
    c = channels
    return nn.Sequential(
        nn.Conv2d(1, c, 3, padding=1, bias=False),
        nn.BatchNorm2d(c),
        Cell(arch_str, c),
        _Reduction(c),
        Cell(arch_str, 2 * c),
        _Reduction(2 * c),
        Cell(arch_str, 4 * c),
        nn.BatchNorm2d(4 * c),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(4 * c, classes),
    )


# -- training ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Digits:
    x_train: torch.Tensor
    y_train: torch.Tensor
    x_valid: torch.Tensor
    y_valid: torch.Tensor


def _digits() -> Digits:
    """scikit-learn's 8x8 digits, standardised, split once with a fixed seed."""
    from sklearn.datasets import load_digits

    images, labels = load_digits(return_X_y=True)
    x = torch.tensor(images / 16.0, dtype=torch.float32).reshape(-1, 1, 8, 8)
    x = (x - x.mean()) / x.std()
    y = torch.tensor(labels)
    order = torch.randperm(len(y), generator=torch.Generator().manual_seed(0))
    valid, rest = order[:VALID_ROWS], order[VALID_ROWS:]
    return Digits(x[rest], y[rest], x[valid], y[valid])


@dataclass(frozen=True)
class Epoch:
    train_loss: float
    train_accuracy: float
    valid_loss: float
    valid_accuracy: float
    seconds: float


def train(run: Run, data: Digits, epochs: int, seed: int) -> list[Epoch]:
    """Train one run from its own seed; one record per epoch."""
    torch.manual_seed(seed * 1_000_003 + run.run)
    model = network(run.arch)
    optimizer = torch.optim.SGD(
        model.parameters(), lr=run.learning_rate, momentum=MOMENTUM, nesterov=True, weight_decay=WEIGHT_DECAY
    )
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs)
    shuffle = torch.Generator().manual_seed(seed * 1_000_003 + run.run)
    loss_fn = nn.CrossEntropyLoss()
    out = []
    for _ in range(epochs):
        start = time.perf_counter()
        model.train()
        seen, loss_sum, correct = 0, 0.0, 0
        for batch in torch.randperm(len(data.y_train), generator=shuffle).split(BATCH_SIZE):
            x, y = data.x_train[batch], data.y_train[batch]
            logits = model(x)
            loss = loss_fn(logits, y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            seen += len(y)
            loss_sum += loss.item() * len(y)
            correct += int((logits.argmax(1) == y).sum())
        schedule.step()
        seconds = time.perf_counter() - start
        valid_loss, valid_accuracy = _evaluate(model, data.x_valid, data.y_valid, loss_fn)
        out.append(Epoch(loss_sum / seen, correct / seen, valid_loss, valid_accuracy, seconds))
    return out


@torch.no_grad()
def _evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor, loss_fn: nn.Module) -> tuple[float, float]:
    model.eval()
    logits = model(x)
    loss = float(loss_fn(logits, y))
    return (loss if np.isfinite(loss) else float("nan")), float((logits.argmax(1) == y).float().mean())


# -- the output file -----------------------------------------------------------------------------------------


def _rows(run: Run, epochs: int, seed: int, records: list[Epoch]) -> list[tuple[object, ...]]:
    collected_at = datetime.now(UTC).isoformat(timespec="seconds")
    return [
        (
            run.run,
            "nb201",
            run.arch,
            DATASET,
            run.learning_rate,
            BATCH_SIZE,
            CHANNELS,
            epochs,
            seed,
            epoch,
            f"{r.train_loss:.6g}",
            f"{r.train_accuracy:.6g}",
            f"{r.valid_loss:.6g}",
            f"{r.valid_accuracy:.6g}",
            f"{r.seconds:.4g}",
            collected_at,
        )
        for epoch, r in enumerate(records, start=1)
    ]
