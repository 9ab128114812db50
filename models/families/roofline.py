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
from preflight.models.core.targets import Encoding, Target, encoded, encodings_from_state


class RooflineFamily:
    name = "roofline"
    concurrent = True

    def __init__(self, *, targets: dict[str, Target], seed: int = 0) -> None:
        self.targets, self.seed = targets, seed

    def fit(
        self, features: Features, Y: pd.DataFrame, sample_weight: np.ndarray | None = None
    ) -> RooflineFamily:
        weight = np.ones(len(Y)) if sample_weight is None else np.asarray(sample_weight, dtype=float)
        self.log_efficiency_: dict[str, float] = {}
        self.encodings_: dict[str, Encoding] = {}
        for name, rows, encoding, z in encoded(self.targets, Y, features.reference, True, min_rows=1):
            self.encodings_[name] = encoding
            self.log_efficiency_[name] = float(
                np.quantile(z, 0.5, weights=weight[rows], method="inverted_cdf")
            )
        return self

    def predict(self, features: Features) -> pd.DataFrame:
        n, reference = len(features.reference), features.reference
        out = {
            t: self.encodings_[t].decode(np.full(n, c), reference[t]) for t, c in self.log_efficiency_.items()
        }
        return pd.DataFrame(out, index=features.reference.index)

    def save(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        encodings = {t: e.state() for t, e in self.encodings_.items()}
        state = {"seed": self.seed, "log_efficiency": self.log_efficiency_, "encodings": encodings}
        (directory / "roofline.json").write_text(json.dumps(state, indent=2))

    @classmethod
    def load(cls, directory: Path) -> RooflineFamily:
        state = json.loads((directory / "roofline.json").read_text())
        encodings = encodings_from_state(state)
        family = cls(targets={t: e.target for t, e in encodings.items()}, seed=state["seed"])
        family.log_efficiency_, family.encodings_ = state["log_efficiency"], encodings
        return family
