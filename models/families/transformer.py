"""A transformer over a window of metric time series per row, in two views after CloudFormer (Shi et al.
2024, "CloudFormer: interference-aware performance prediction").

It reads ``Features.sequences`` (``values[rows, time, channels]`` and the mask of measured steps) and the
context columns of ``X`` (``ctx_*``, standardized, missing at 0); other columns are not read. Each channel
is standardized with its mean and spread over the measured steps of the training windows (missing values
and unmeasured steps at 0; any log scale is the featurizer's choice). Two branches read a window:

- temporal: a token per time step (its channels projected to ``d_model``, plus a learned position
  embedding), a transformer encoder that attends to measured steps only, a mean over measured steps;
- metric: a token per channel (its whole series, its mean and its spread over the measured steps,
  projected to ``d_model``, plus a learned channel embedding), a transformer encoder across channels,
  a mean over channels.

The two embeddings and the context feed an MLP with one output per target. Windows are aligned to the
training windows' ``max_steps``: a longer one keeps its last ``max_steps`` measured steps (the most
recent), a shorter one is padded in front, so a position always means the same age. Targets are
encoded on their declared scale and standardized; the loss is a weighted MSE per target over the rows
that carry it. Training is seeded (dropout included) and runs
on one CPU thread, so two fits give identical predictions. Hyperparameters keep torch's names
(``d_model``, ``nhead``, ``num_layers``, ``dropout``). torch is imported inside the functions: importing
the family stays cheap.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from preflight.data.errors import UsageError
from preflight.data.threads import torch_threads
from preflight.features import Features, Sequences
from preflight.models.core.targets import Target
from preflight.models.families._neural import (
    ContextScaler,
    TargetScaler,
    predict_in_chunks,
    train_minibatches,
    weighted_loss,
)

if TYPE_CHECKING:
    import torch
    from torch import nn

#: Rows per forward pass at prediction time.
PREDICT_ROWS = 1024
#: Width of an encoder layer's feed-forward block, in multiples of ``d_model``.
FEEDFORWARD = 4


def _required(sequences: Sequences | None) -> Sequences:
    if sequences is None:
        raise UsageError("the transformer family needs sequences: its task's featurizer gives none")
    return sequences


def _aligned(sequences: Sequences, steps: int) -> tuple[np.ndarray, np.ndarray]:
    """Windows of ``steps`` steps aligned on their latest measured step: position ``k`` is always
    ``steps - 1 - k`` samples before it. A longer window keeps its last ``steps`` steps; a shorter one
    is padded in front with unmeasured steps."""
    values, mask = sequences.values, sequences.mask.astype(bool)
    end = np.where(mask.any(axis=1), mask.shape[1] - np.argmax(mask[:, ::-1], axis=1), 0)
    start = np.maximum(end - steps, 0)
    lead = steps - (end - start)  # unmeasured steps in front
    position = np.arange(steps)
    measured = position >= lead[:, None]
    source = np.clip(start[:, None] + position - lead[:, None], 0, max(mask.shape[1] - 1, 0))
    taken = np.take_along_axis(values, source[:, :, None], axis=1)
    aligned_mask = measured & np.take_along_axis(mask, source, axis=1)
    return np.where(aligned_mask[:, :, None], taken, 0.0), aligned_mask


def _network(
    steps: int, channels: int, n_context: int, n_targets: int, d_model: int, nhead: int, num_layers: int,
    dropout: float, head_hidden: int,
) -> nn.ModuleDict:  # fmt: skip
    """Both branches' projections, embeddings and encoders, and the multi-task MLP (``head``)."""
    from torch import nn

    def encoder() -> nn.TransformerEncoder:
        layer = nn.TransformerEncoderLayer(
            d_model, nhead, FEEDFORWARD * d_model, dropout, batch_first=True, norm_first=True
        )
        return nn.TransformerEncoder(layer, num_layers, nn.LayerNorm(d_model), enable_nested_tensor=False)

    return nn.ModuleDict(
        {
            "step_in": nn.Linear(channels, d_model),
            "position": nn.Embedding(steps, d_model),
            "temporal": encoder(),
            "channel_in": nn.Linear(steps + 2, d_model),
            "channel": nn.Embedding(channels, d_model),
            "metric": encoder(),
            "head": nn.Sequential(
                nn.Linear(2 * d_model + n_context, head_hidden), nn.ReLU(), nn.Linear(head_hidden, n_targets)
            ),
        }
    )


def _forward(net: nn.ModuleDict, x: torch.Tensor, mask: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
    """Standardized predictions from standardized windows ``x[rows, steps, channels]`` (0 where not
    measured), their ``mask`` and their context."""
    import torch

    weight = mask.unsqueeze(2).to(x.dtype)
    count = weight.sum(1).clamp_min(1.0)
    padding = ~mask & mask.any(1, keepdim=True)  # a window without measured steps attends to all of it
    states = net["temporal"](net["step_in"](x) + net["position"].weight, src_key_padding_mask=padding)
    temporal = (states * weight).sum(1) / count
    mean = x.sum(1) / count
    spread = ((((x - mean.unsqueeze(1)) * weight) ** 2).sum(1) / count).sqrt()
    tokens = torch.cat([x.transpose(1, 2), mean.unsqueeze(2), spread.unsqueeze(2)], dim=2)
    metric = net["metric"](net["channel_in"](tokens) + net["channel"].weight).mean(1)
    return net["head"](torch.cat([temporal, metric, context], dim=1))


class TransformerFamily:
    name = "transformer"
    concurrent = False  # torch's global random generator, and its own threads over every core

    def __init__(
        self,
        *,
        targets: dict[str, Target],
        d_model: int = 32,
        nhead: int = 4,
        num_layers: int = 2,
        dropout: float = 0.0,
        head_hidden: int = 64,
        epochs: int = 40,
        batch_size: int = 128,
        learning_rate: float = 2e-3,
        weight_decay: float = 1e-4,
        seed: int = 0,
    ) -> None:
        self.targets, self.d_model, self.nhead, self.num_layers = targets, d_model, nhead, num_layers
        self.dropout, self.head_hidden, self.epochs, self.batch_size = (
            dropout,
            head_hidden,
            epochs,
            batch_size,
        )
        self.learning_rate, self.weight_decay, self.seed = learning_rate, weight_decay, seed

    def get_params(self) -> dict:
        names = ("d_model", "nhead", "num_layers", "dropout", "head_hidden", "epochs", "batch_size",
                 "learning_rate", "weight_decay", "seed")  # fmt: skip
        return {k: getattr(self, k) for k in names}

    def _build(self) -> None:
        self.net_ = _network(
            self.max_steps_, self.channels_, len(self.context_.columns), len(self.scaled_targets_.encodings),
            self.d_model, self.nhead, self.num_layers, self.dropout, self.head_hidden,
        )  # fmt: skip

    def _windows(self, sequences: Sequences | None) -> tuple[np.ndarray, np.ndarray]:
        """Windows aligned to the training length and standardized per channel (0 where not measured),
        and their masks."""
        sequences = _required(sequences)
        if sequences.values.shape[2] != self.channels_:
            raise UsageError(
                f"the transformer was fitted on windows of {self.channels_} channels; these have "
                f"{sequences.values.shape[2]}"
            )
        values, mask = _aligned(sequences, self.max_steps_)
        z = (values - self.channel_center_) / self.channel_scale_
        return np.where(mask[:, :, None] & np.isfinite(z), z, 0.0).astype(np.float32), mask

    def _fit_channels(self, sequences: Sequences) -> None:
        """Learns each channel's mean and spread over the measured steps of the training windows."""
        self.max_steps_, self.channels_ = int(sequences.values.shape[1]), int(sequences.values.shape[2])
        values = sequences.values.astype(float)
        measured = sequences.mask.astype(bool)[:, :, None] & np.isfinite(values)
        count = np.maximum(measured.sum((0, 1)), 1)
        self.channel_center_ = np.where(measured, values, 0.0).sum((0, 1)) / count
        spread = np.sqrt((np.where(measured, values - self.channel_center_, 0.0) ** 2).sum((0, 1)) / count)
        self.channel_scale_ = np.where(spread > 0, spread, 1.0)

    def fit(
        self, features: Features, Y: pd.DataFrame, sample_weight: np.ndarray | None = None
    ) -> TransformerFamily:
        import torch

        sequences = _required(features.sequences)
        self._fit_channels(sequences)
        x, mask = (torch.from_numpy(a) for a in self._windows(sequences))
        self.scaled_targets_, standardized = TargetScaler.fit(self.targets, features, Y)
        Z = torch.from_numpy(standardized)
        self.context_ = ContextScaler.fit(features.X)
        context = torch.from_numpy(self.context_.transform(features.X))
        weight = np.ones(len(Y)) if sample_weight is None else np.asarray(sample_weight)
        rows = np.flatnonzero(~Z.isnan().all(dim=1).numpy())
        with torch.random.fork_rng(devices=[]), torch_threads(1):
            torch.manual_seed(self.seed)
            self._build()
            self._train(x, mask, context, Z, torch.tensor(weight, dtype=torch.float32), rows)
        return self

    def _train(
        self, x: torch.Tensor, mask: torch.Tensor, context: torch.Tensor, Z: torch.Tensor,
        weight: torch.Tensor, rows: np.ndarray,
    ) -> None:  # fmt: skip
        """AdamW with a cosine schedule over shuffled minibatches of ``rows``."""
        import torch

        optimizer = torch.optim.AdamW(
            self.net_.parameters(), lr=self.learning_rate, weight_decay=self.weight_decay, fused=True
        )
        is_logit = torch.from_numpy(self.scaled_targets_.is_logit)

        def batch_loss(batch: np.ndarray) -> torch.Tensor:
            predicted = _forward(self.net_, x[batch], mask[batch], context[batch])
            return weighted_loss(predicted, Z[batch], weight[batch], is_logit)

        self.net_.train()
        train_minibatches(optimizer, rows, self.epochs, self.batch_size, self.seed, batch_loss)

    def predict(self, features: Features) -> pd.DataFrame:
        import torch

        x, mask = (torch.from_numpy(a) for a in self._windows(features.sequences))
        context = torch.from_numpy(self.context_.transform(features.X))
        self.net_.eval()
        with torch_threads(1):
            z = predict_in_chunks(
                len(x), PREDICT_ROWS, lambda r: _forward(self.net_, x[r], mask[r], context[r])
            )
        return self.scaled_targets_.decode(z, features)

    def save(self, directory: Path) -> None:
        import torch

        directory.mkdir(parents=True, exist_ok=True)
        torch.save(self.net_.state_dict(), directory / "transformer.pt")
        state = {
            "params": self.get_params(),
            **self.scaled_targets_.state(),
            **self.context_.state(),
            "channel_center": self.channel_center_.tolist(),
            "channel_scale": self.channel_scale_.tolist(),
            "max_steps": self.max_steps_,
            "channels": self.channels_,
        }
        (directory / "transformer.json").write_text(json.dumps(state, indent=2))

    @classmethod
    def load(cls, directory: Path) -> TransformerFamily:
        import torch

        state = json.loads((directory / "transformer.json").read_text())
        scaled_targets = TargetScaler.from_state(state)
        family = cls(targets=scaled_targets.targets, **state["params"])
        family.scaled_targets_, family.context_ = scaled_targets, ContextScaler.from_state(state)
        family.channel_center_ = np.array(state["channel_center"])
        family.channel_scale_ = np.array(state["channel_scale"])
        family.max_steps_, family.channels_ = state["max_steps"], state["channels"]
        family._build()
        family.net_.load_state_dict(torch.load(directory / "transformer.pt", weights_only=True))
        return family
