"""The out-of-distribution envelope: where the training data lay, and why an input is outside it."""

from __future__ import annotations

import numpy as np
import pandas as pd

#: Share of the training range an input may exceed before it is flagged.
TOLERANCE = 0.02


class Envelope:
    """Per-feature training ranges plus the categorical values (devices...) seen in training."""

    def __init__(self, categoricals: tuple[str, ...] = ("device_id",)) -> None:
        self.categoricals = categoricals

    def fit(self, X: pd.DataFrame, meta: pd.DataFrame) -> "Envelope":
        numeric = X.apply(pd.to_numeric, errors="coerce")
        self.low_ = numeric.min().to_dict()
        self.high_ = numeric.max().to_dict()
        self.seen_ = {c: sorted(set(meta[c].astype(str))) for c in self.categoricals if c in meta}
        return self

    def reasons(self, X: pd.DataFrame, meta: pd.DataFrame) -> list[list[str]]:
        """Why each row lies outside the envelope (an empty list: inside)."""
        out: list[list[str]] = [[] for _ in range(len(X))]
        for column, seen in self.seen_.items():
            unseen = ~meta[column].astype(str).isin(seen)
            for i in np.flatnonzero(unseen.to_numpy()):
                out[i].append(f"{column}={meta[column].iloc[i]} has no measurements in the training data")
        for column in X.columns:
            low, high = self.low_.get(column), self.high_.get(column)
            if low is None or pd.isna(low):
                continue
            slack = TOLERANCE * max(high - low, abs(high), 1e-9)
            values = pd.to_numeric(X[column], errors="coerce").to_numpy(dtype=float)
            for i in np.flatnonzero((values < low - slack) | (values > high + slack)):
                out[i].append(f"{column}={values[i]:.3g} outside the training range [{low:.3g}, {high:.3g}]")
        return out

    def state(self) -> dict:
        return {"categoricals": list(self.categoricals), "low": self.low_, "high": self.high_, "seen": self.seen_}

    @classmethod
    def from_state(cls, state: dict) -> "Envelope":
        envelope = cls(tuple(state["categoricals"]))
        envelope.low_, envelope.high_, envelope.seen_ = state["low"], state["high"], state["seen"]
        return envelope
