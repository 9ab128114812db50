"""A linear baseline: ridge regression per target on the standardized table ``X``, in the target's space
(L2-regularised logistic regression for a binary target, predicting probabilities).

It is what a table of features gives without interactions, the yardstick the NAS tasks report
beside every model (the architecture-agnostic roofline means nothing there).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
from preflight.features import Features
from preflight.models.core.targets import Encoding, Target, encoded, encodings_from_state
from scipy.special import logit
from sklearn.linear_model import LogisticRegression, Ridge


class LinearFamily:
    name = "linear"
    concurrent = True

    def __init__(self, *, targets: dict[str, Target], alpha: float = 1.0, seed: int = 0) -> None:
        self.targets, self.alpha, self.seed = targets, alpha, seed

    def _matrix(self, X: pd.DataFrame) -> np.ndarray:
        values = X.reindex(columns=self.columns_).to_numpy(dtype=float, na_value=np.nan)
        return (np.where(np.isnan(values), self.center_, values) - self.center_) / self.scale_

    def fit(
        self, features: Features, Y: pd.DataFrame, sample_weight: np.ndarray | None = None
    ) -> LinearFamily:
        X = features.X
        self.columns_ = list(X.columns)
        self.center_ = np.nan_to_num(X.median().to_numpy(dtype=float))  # never given (all NaN): 0
        spread = X.std(ddof=0).to_numpy(dtype=float)
        self.scale_ = np.where(np.isfinite(spread) & (spread > 0), spread, 1.0)
        matrix = self._matrix(X)
        self.coef_: dict[str, list[float]] = {}
        self.intercept_: dict[str, float] = {}
        self.encodings_: dict[str, Encoding] = {}
        for name, rows, encoding, z in encoded(self.targets, Y, features.reference, relative=False):
            weight = None if sample_weight is None else np.asarray(sample_weight)[rows]
            if encoding.target.kind.event:
                coef, intercept = _logistic(matrix[rows], z, weight, self.alpha)
            else:
                model = Ridge(alpha=self.alpha).fit(matrix[rows], z, sample_weight=weight)
                coef, intercept = model.coef_, model.intercept_
            self.coef_[name], self.intercept_[name] = np.ravel(coef).tolist(), float(intercept)
            self.encodings_[name] = encoding
        return self

    def predict(self, features: Features) -> pd.DataFrame:
        matrix = self._matrix(features.X)
        out = {
            t: self._decode(t, matrix @ np.asarray(c) + self.intercept_[t], features)
            for t, c in self.coef_.items()
        }
        return pd.DataFrame(out, index=features.X.index)

    def _decode(self, target: str, predictor: np.ndarray, features: Features) -> np.ndarray:
        """A linear predictor as estimates (an event's probability from its logit)."""
        encoding = self.encodings_[target]
        return encoding.decode(encoding.target.kind.from_raw(predictor), features.reference[target])

    def save(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        state = {
            "alpha": self.alpha,
            "seed": self.seed,
            "columns": self.columns_,
            "center": self.center_.tolist(),
            "scale": self.scale_.tolist(),
            "coef": self.coef_,
            "intercept": self.intercept_,
            "encodings": {t: e.state() for t, e in self.encodings_.items()},
        }
        (directory / "linear.json").write_text(json.dumps(state))

    @classmethod
    def load(cls, directory: Path) -> LinearFamily:
        state = json.loads((directory / "linear.json").read_text())
        encodings = encodings_from_state(state)
        family = cls(
            targets={t: e.target for t, e in encodings.items()}, alpha=state["alpha"], seed=state["seed"]
        )
        family.columns_, family.coef_, family.intercept_ = state["columns"], state["coef"], state["intercept"]
        family.center_, family.scale_ = np.array(state["center"]), np.array(state["scale"])
        family.encodings_ = encodings
        return family


def _logistic(
    matrix: np.ndarray, labels: np.ndarray, weight: np.ndarray | None, alpha: float
) -> tuple[np.ndarray, float]:
    """Logistic regression's coefficients and intercept (no slope when only one outcome was seen)."""
    if len(np.unique(labels)) < 2:
        rate = float(np.clip(labels.mean(), 1e-3, 1 - 1e-3))
        return np.zeros(matrix.shape[1]), float(logit(rate))
    model = LogisticRegression(C=1 / alpha, max_iter=1000).fit(matrix, labels, sample_weight=weight)
    return model.coef_[0], float(model.intercept_[0])
