"""Gradient-boosted trees (LightGBM) on the featurizer's table ``X``, one booster per target, each in its
target's space (``targets.choose``)."""

from __future__ import annotations

import json
from pathlib import Path

import lightgbm as lgb
import numpy as np
import pandas as pd
from preflight.features import Features
from preflight.models.families import targets

#: Below this many rows, a second LightGBM thread costs more in synchronisation than it saves.
PARALLEL_MIN_ROWS = 20_000


class TreeFamily:
    name = "tree"

    def __init__(
        self,
        *,
        num_leaves: int = 31,
        learning_rate: float = 0.05,
        n_estimators: int = 500,
        min_child_samples: int = 10,
        feature_fraction: float = 0.9,
        target_transform: str = "log_ratio",
        objective: str = "regression",
        seed: int = 0,
    ) -> None:
        self.num_leaves, self.learning_rate, self.n_estimators = num_leaves, learning_rate, n_estimators
        self.min_child_samples, self.feature_fraction = min_child_samples, feature_fraction
        self.target_transform, self.objective, self.seed = target_transform, objective, seed

    def get_params(self) -> dict:
        return {
            k: getattr(self, k)
            for k in (
                "num_leaves",
                "learning_rate",
                "n_estimators",
                "min_child_samples",
                "feature_fraction",
                "target_transform",
                "objective",
                "seed",
            )
        }

    def _lgb_params(self, n_rows: int) -> dict:
        return {
            "objective": self.objective,
            "num_leaves": self.num_leaves,
            "learning_rate": self.learning_rate,
            "min_data_in_leaf": min(self.min_child_samples, max(1, n_rows // 10)),
            "feature_fraction": self.feature_fraction,
            "seed": self.seed,
            "deterministic": True,
            "num_threads": 1 if n_rows < PARALLEL_MIN_ROWS else 2,
            "verbosity": -1,
            "force_col_wise": True,
        }

    def fit(
        self, features: Features, Y: pd.DataFrame, sample_weight: np.ndarray | None = None
    ) -> TreeFamily:
        X, reference = features.X, features.reference
        self.columns_ = list(X.columns)
        self.boosters_: dict[str, lgb.Booster] = {}
        self.transforms_: dict[str, str] = {}
        for target in Y.columns:
            rows = targets.present(target, Y[target])
            if rows.sum() < 2:
                continue
            transform = targets.choose(target, self.target_transform, reference[target][rows])
            z = targets.encode(Y[target][rows], reference[target][rows], transform)
            weight = None if sample_weight is None else np.asarray(sample_weight)[rows]
            data = lgb.Dataset(X[rows], z, weight=weight, free_raw_data=True)
            self.boosters_[target] = lgb.train(self._lgb_params(int(rows.sum())), data, self.n_estimators)
            self.transforms_[target] = transform
        return self

    def predict(self, features: Features) -> pd.DataFrame:
        out = {}
        matrix = features.X[self.columns_].to_numpy(
            dtype=float
        )  # numpy skips LightGBM's per-call pandas checks
        for target, booster in self.boosters_.items():
            z = booster.predict(matrix, num_threads=1)
            out[target] = targets.decode(z, features.reference[target], self.transforms_[target])
        return pd.DataFrame(out, index=features.X.index)

    def save(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        for target, booster in self.boosters_.items():
            booster.save_model(directory / f"{target}.lgb")
        state = {"params": self.get_params(), "columns": self.columns_, "transforms": self.transforms_}
        (directory / "tree.json").write_text(json.dumps(state, indent=2))

    @classmethod
    def load(cls, directory: Path) -> TreeFamily:
        state = json.loads((directory / "tree.json").read_text())
        family = cls(**state["params"])
        family.columns_, family.transforms_ = state["columns"], state["transforms"]
        family.boosters_ = {
            t: lgb.Booster(model_file=str(directory / f"{t}.lgb")) for t in state["transforms"]
        }
        return family
