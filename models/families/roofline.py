"""The roofline baseline: the reference scale times one efficiency per target, fitted on training data.

For GEMM runtime this is the device's roofline bound divided by the median achieved efficiency; it
stands beside every model result in ``evaluate`` and is a family of its own so it can be served.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
from preflight.features import Features
from preflight.models.families import targets


class RooflineFamily:
    name = "roofline"

    def __init__(self, *, seed: int = 0) -> None:
        self.seed = seed

    def fit(
        self, features: Features, Y: pd.DataFrame, sample_weight: np.ndarray | None = None
    ) -> RooflineFamily:
        reference = features.reference
        weight = np.ones(len(Y)) if sample_weight is None else np.asarray(sample_weight, dtype=float)
        self.log_efficiency_: dict[str, float] = {}
        self.transforms_: dict[str, str] = {}
        for target in Y.columns:
            rows = targets.present(target, Y[target])
            if not rows.any():
                continue
            transform = targets.choose(target, "log_ratio", reference[target][rows])
            self.transforms_[target] = transform
            z = targets.encode(Y[target][rows], reference[target][rows], transform)
            self.log_efficiency_[target] = _weighted_median(z, weight[rows])
        return self

    def predict(self, features: Features) -> pd.DataFrame:
        n, reference = len(features.reference), features.reference
        out = {
            t: targets.decode(np.full(n, c), reference[t], self.transforms_[t])
            for t, c in self.log_efficiency_.items()
        }
        return pd.DataFrame(out, index=features.reference.index)

    def save(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        state = {"seed": self.seed, "log_efficiency": self.log_efficiency_, "transforms": self.transforms_}
        (directory / "roofline.json").write_text(json.dumps(state, indent=2))

    @classmethod
    def load(cls, directory: Path) -> RooflineFamily:
        state = json.loads((directory / "roofline.json").read_text())
        family = cls(seed=state["seed"])
        family.log_efficiency_, family.transforms_ = state["log_efficiency"], state["transforms"]
        return family


def _weighted_median(values: np.ndarray, weight: np.ndarray) -> float:
    order = np.argsort(values)
    cumulative = np.cumsum(weight[order])
    return float(values[order][np.searchsorted(cumulative, cumulative[-1] / 2)])
