"""What the neural families (``gnn``, ``transformer``) share: standardized context columns and targets
encoded on their declared scale and standardized (an event's labels stay 0/1 and its output is a
logit), each saved under the same keys of the family's state, the loss they fit them with, their
training loop and their prediction in chunks."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from preflight.data.errors import UsageError
from preflight.features import CONTEXT_PREFIX, Features
from preflight.models.core.targets import Encoding, Target, encoded, encodings_from_state

if TYPE_CHECKING:
    import torch


@dataclass
class ContextScaler:
    """The ``ctx_*`` columns of ``X`` with their training mean and spread."""

    columns: list[str]
    center: np.ndarray
    scale: np.ndarray

    @classmethod
    def fit(cls, X: pd.DataFrame) -> ContextScaler:
        columns = [c for c in X.columns if c.startswith(CONTEXT_PREFIX)]
        table = X[columns].astype(float)
        spread = table.std(ddof=0).to_numpy(dtype=float)
        return cls(
            columns,
            table.mean().fillna(0.0).to_numpy(dtype=float),  # never given (all NaN): 0
            np.where(np.isfinite(spread) & (spread > 0), spread, 1.0),
        )

    def transform(self, X: pd.DataFrame) -> np.ndarray:
        """The context standardized, missing values at 0."""
        values = X.reindex(columns=self.columns).to_numpy(dtype=float, na_value=np.nan)
        return np.nan_to_num((values - self.center) / self.scale).astype(np.float32)

    def state(self) -> dict:
        return {
            "context_columns": self.columns,
            "context_center": self.center.tolist(),
            "context_scale": self.scale.tolist(),
        }

    @classmethod
    def from_state(cls, state: dict) -> ContextScaler:
        return cls(
            state["context_columns"], np.array(state["context_center"]), np.array(state["context_scale"])
        )


@dataclass
class TargetScaler:
    """Each learned target's encoding and the mean and spread of its encoded training values."""

    encodings: dict[str, Encoding]
    center: list[float]
    scale: list[float]

    @property
    def targets(self) -> dict[str, Target]:
        return {t: e.target for t, e in self.encodings.items()}

    @property
    def is_logit(self) -> np.ndarray:
        """Which outputs are an event's logit (learned with the logistic loss)."""
        return np.array([e.target.kind.event for e in self.encodings.values()], dtype=bool)

    @classmethod
    def fit(
        cls, targets: dict[str, Target], features: Features, Y: pd.DataFrame
    ) -> tuple[TargetScaler, np.ndarray]:
        """The scaler and the standardized targets (two usable rows at least; NaN where a row lacks one)."""
        scaler, columns = cls({}, [], []), []
        for name, rows, encoding, values in encoded(targets, Y, features.reference, relative=False):
            z = np.full(len(Y), np.nan)
            z[rows] = values
            center, scale = (  # an event's labels stay 0/1, for the logistic loss
                (0.0, 1.0) if encoding.target.kind.event else (float(values.mean()), float(values.std()))
            )
            scaler.encodings[name] = encoding
            scaler.center.append(center)
            scaler.scale.append(scale if scale > 0 else 1.0)
            columns.append((z - center) / scaler.scale[-1])
        if not columns:
            raise UsageError(f"no target among {list(Y.columns)} has two usable rows to learn from")
        return scaler, np.stack(columns, axis=1).astype(np.float32)

    def decode(self, z: np.ndarray, features: Features) -> pd.DataFrame:
        """Standardized network outputs ``z[rows, targets]`` as estimates per target."""
        z = z.astype(float) * np.asarray(self.scale) + np.asarray(self.center)
        out = {
            t: encoding.decode(encoding.target.kind.from_raw(z[:, j]), features.reference[t])
            for j, (t, encoding) in enumerate(self.encodings.items())
        }
        return pd.DataFrame(out, index=features.X.index)

    def state(self) -> dict:
        return {
            "encodings": {t: e.state() for t, e in self.encodings.items()},
            "target_center": self.center,
            "target_scale": self.scale,
        }

    @classmethod
    def from_state(cls, state: dict) -> TargetScaler:
        return cls(encodings_from_state(state), state["target_center"], state["target_scale"])


def weighted_loss(
    predicted: torch.Tensor, z: torch.Tensor, weight: torch.Tensor, is_logit: torch.Tensor
) -> torch.Tensor:
    """Weighted loss per target over the rows that carry it (``z`` is NaN where a row lacks one),
    averaged over targets: squared error, or the logistic loss where an output ``is_logit`` (an event's)."""
    import torch
    from torch.nn.functional import binary_cross_entropy_with_logits

    w = weight[:, None] * ~torch.isnan(z)
    z = torch.nan_to_num(z)
    squared = (predicted - z) ** 2
    if bool(is_logit.any()):
        logistic = binary_cross_entropy_with_logits(predicted, z.clamp(0, 1), reduction="none")
        squared = torch.where(is_logit[None, :], logistic, squared)
    return ((w * squared).sum(0) / w.sum(0).clamp_min(1e-12)).mean()


def train_minibatches(
    optimizer: torch.optim.Optimizer, rows: np.ndarray, epochs: int, batch_size: int, seed: int,
    batch_loss: Callable[[np.ndarray], torch.Tensor],
) -> None:  # fmt: skip
    """``epochs`` passes over ``rows`` in seeded random minibatches, each a step of ``optimizer`` on
    ``batch_loss(batch)``, the learning rate annealed on a cosine to zero over all the steps."""
    import torch

    steps = epochs * -(-len(rows) // batch_size)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, steps)
    rng = np.random.default_rng(seed)
    for _ in range(epochs):
        order = rng.permutation(rows)
        for batch in np.array_split(order, range(batch_size, len(order), batch_size)):
            loss = batch_loss(batch)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()


def predict_in_chunks(
    n_rows: int, chunk_rows: int, forward: Callable[[np.ndarray], torch.Tensor]
) -> np.ndarray:
    """``forward`` over the rows ``0 .. n_rows - 1``, ``chunk_rows`` at a time, without gradients."""
    import torch

    chunks = np.array_split(np.arange(n_rows), range(chunk_rows, n_rows, chunk_rows))
    with torch.inference_mode():
        return torch.cat([forward(rows) for rows in chunks]).numpy()
