"""The out-of-distribution envelope: where the training data lay, and why an input is outside it."""

from __future__ import annotations

import numpy as np
import pandas as pd

#: Share of the training range an input may exceed before it is flagged.
TOLERANCE = 0.02


class Envelope:
    """Per-feature training ranges plus the categorical values (devices...) seen in training."""

    def __init__(self, categoricals: tuple[str, ...]) -> None:
        self.categoricals = categoricals

    def fit(self, X: pd.DataFrame, meta: pd.DataFrame) -> Envelope:
        numeric = X.apply(pd.to_numeric, errors="coerce")
        self.low_ = numeric.min().to_dict()
        self.high_ = numeric.max().to_dict()
        self.seen_ = {c: sorted(set(meta[c].astype(str))) for c in self.categoricals if c in meta}
        return self

    def reasons(self, X: pd.DataFrame, meta: pd.DataFrame) -> list[list[str]]:
        """Why each row lies outside the envelope (an empty list: inside)."""
        out: list[list[str]] = [[] for _ in range(len(X))]
        for column, seen in self.seen_.items():
            values = meta[column].astype(str).to_numpy()
            for i in np.flatnonzero(~np.isin(values, seen) & (values != "")).tolist():  # "": not given
                out[i].append(f"{column}={values[i]} has no measurements in the training data")
        low = np.array([self.low_.get(c, np.nan) for c in X.columns], dtype=float)
        high = np.array([self.high_.get(c, np.nan) for c in X.columns], dtype=float)
        slack = TOLERANCE * np.maximum(np.maximum(high - low, np.abs(high)), 1e-9)
        values = X.to_numpy(dtype=float, na_value=np.nan)
        with np.errstate(invalid="ignore"):
            outside = (values < low - slack) | (values > high + slack)  # NaN bounds or values compare False
        fitted = np.array([c in self.low_ for c in X.columns])  # a feature added since: no envelope for it
        # e.g. a kernel configuration, when training had none
        never_seen = fitted & np.isnan(low) & ~np.isnan(values)
        outside |= never_seen
        names = list(X.columns)
        ranges = [f"[{lo:.3g}, {hi:.3g}]" for lo, hi in zip(low, high)]
        rows, cols = np.nonzero(outside)
        for i, j, value in zip(rows.tolist(), cols.tolist(), values[rows, cols].tolist()):
            where = (
                "never present in the training data"
                if never_seen[i, j]
                else f"outside the training range {ranges[j]}"
            )
            out[i].append(f"{names[j]}={value:.3g} {where}")
        return out

    def state(self) -> dict:
        return {
            "categoricals": list(self.categoricals),
            "low": self.low_,
            "high": self.high_,
            "seen": self.seen_,
        }

    @classmethod
    def from_state(cls, state: dict) -> Envelope:
        envelope = cls(tuple(state["categoricals"]))
        envelope.low_, envelope.high_, envelope.seen_ = state["low"], state["high"], state["seen"]
        return envelope
