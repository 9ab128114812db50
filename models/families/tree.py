"""Gradient-boosted trees (LightGBM) on the featurizer's table ``X``, one booster per target, each on
its target's scale, relative to the reference where every training row has one (``Encoding``); a
binary target (an event) gets a classifier (LightGBM's ``binary`` objective, predicting probabilities)."""

from __future__ import annotations

import json
from pathlib import Path

import lightgbm as lgb
import numpy as np
import pandas as pd
from preflight.data.errors import ModelStateError
from preflight.features import Features
from preflight.models.targets import Encoding, Target, encoded, encodings_from_state

#: Below this many rows, a second LightGBM thread costs more in synchronisation than it saves.
PARALLEL_MIN_ROWS = 20_000


class TreeFamily:
    name = "tree"

    def __init__(
        self,
        *,
        targets: dict[str, Target],
        num_leaves: int = 31,
        learning_rate: float = 0.05,
        n_estimators: int = 500,
        min_child_samples: int = 10,
        feature_fraction: float = 0.9,
        relative: bool = True,
        objective: str = "regression",
        seed: int = 0,
    ) -> None:
        self.num_leaves, self.learning_rate, self.n_estimators = num_leaves, learning_rate, n_estimators
        self.min_child_samples, self.feature_fraction = min_child_samples, feature_fraction
        self.targets, self.relative, self.objective, self.seed = targets, relative, objective, seed

    def get_params(self) -> dict:
        return {
            k: getattr(self, k)
            for k in (
                "num_leaves",
                "learning_rate",
                "n_estimators",
                "min_child_samples",
                "feature_fraction",
                "relative",
                "objective",
                "seed",
            )
        }

    def _lgb_params(self, n_rows: int, monotone: dict[str, int], binary: bool) -> dict:
        constraints = [monotone.get(c, 0) for c in self.columns_]
        return {
            **({"monotone_constraints": constraints} if any(constraints) else {}),
            "objective": "binary" if binary else self.objective,
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

    def fit(self, features: Features, Y: pd.DataFrame, sample_weight: np.ndarray | None = None) -> TreeFamily:
        self.columns_ = list(features.X.columns)
        self.boosters_: dict[str, lgb.Booster] = {}
        self.encodings_: dict[str, Encoding] = {}
        for name, rows, encoding, z in encoded(self.targets, Y, features.reference, self.relative):
            weight = None if sample_weight is None else np.asarray(sample_weight)[rows]
            data = lgb.Dataset(features.X[rows], z, weight=weight, free_raw_data=True)
            # physics' directions hold for the ratio to the reference, not for the bare target
            monotone = features.monotone.get(name, {}) if encoding.relative else {}
            params = self._lgb_params(int(rows.sum()), monotone, encoding.target.binary)
            self.boosters_[name] = lgb.train(params, data, self.n_estimators)
            self.encodings_[name] = encoding
        return self

    def predict(self, features: Features) -> pd.DataFrame:
        if missing := [c for c in self.columns_ if c not in features.X]:
            named = ", ".join(missing[:5]) + ("..." if len(missing) > 5 else "")
            raise ModelStateError(
                f"this model was trained on features this version no longer computes ({named}): "
                "retrain it (`preflight train TASK`)"
            )
        matrix = features.X[self.columns_].to_numpy(dtype=float)  # numpy skips LightGBM's pandas checks
        out = {
            name: self.encodings_[name].decode(
                np.asarray(booster.predict(matrix, num_threads=1)), features.reference[name]
            )
            for name, booster in self.boosters_.items()
        }
        return pd.DataFrame(out, index=features.X.index)

    def save(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        for name, booster in self.boosters_.items():
            booster.save_model(directory / f"{name}.lgb")
        encodings = {t: e.state() for t, e in self.encodings_.items()}
        state = {"params": self.get_params(), "columns": self.columns_, "encodings": encodings}
        (directory / "tree.json").write_text(json.dumps(state, indent=2))

    @classmethod
    def load(cls, directory: Path) -> TreeFamily:
        state = json.loads((directory / "tree.json").read_text())
        encodings = encodings_from_state(state)
        params = {
            k: v for k, v in state["params"].items() if k != "target_transform"
        }  # saved before issue 11
        family = cls(targets={t: e.target for t, e in encodings.items()}, **params)
        family.columns_, family.encodings_ = state["columns"], encodings
        family.boosters_ = {t: lgb.Booster(model_file=str(directory / f"{t}.lgb")) for t in encodings}
        return family
