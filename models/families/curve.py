"""The classic early-stopping baselines as families: a learning curve's last value, and the ensemble
of parametric curve extrapolations (``features/curve.py``). Neither learns from training data; the
Predictor still calibrates them, so their estimates carry intervals like any family's."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
from preflight.data.errors import UsageError
from preflight.features import Features
from preflight.models.core.targets import Target


class _CurveColumnFamily:
    """Predicts every target as one column of the curve features."""

    name: str
    column: str
    concurrent = True

    def __init__(self, *, targets: dict[str, Target], seed: int = 0) -> None:
        self.targets, self.seed = targets, seed

    def get_params(self) -> dict:
        return {"column": self.column}

    def fit(self, features: Features, Y: pd.DataFrame, sample_weight: np.ndarray | None = None):
        if self.column not in features.X:
            raise UsageError(f"the {self.name} family needs learning-curve features (column {self.column!r})")
        self.targets_ = list(Y.columns)
        return self

    def predict(self, features: Features) -> pd.DataFrame:
        value = features.X[self.column].to_numpy(dtype=float)
        return pd.DataFrame({t: value for t in self.targets_}, index=features.X.index)

    def save(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        (directory / f"{self.name}.json").write_text(
            json.dumps({"seed": self.seed, "targets": self.targets_})
        )

    @classmethod
    def load(cls, directory: Path):
        state = json.loads((directory / f"{cls.name}.json").read_text())
        family = cls(targets={}, seed=state["seed"])  # predicts one column, for the target names saved
        family.targets_ = state["targets"]
        return family


class LastValueFamily(_CurveColumnFamily):
    """The run ends where it is now."""

    name, column = "last-value", "curve_last"


class ExtrapolationFamily(_CurveColumnFamily):
    """The mean of the power-law, exponential and log-power fits at the budget (the last value while
    the curve is too short to fit)."""

    name, column = "extrapolation", "curve_fit_ensemble"
