"""The out-of-distribution envelope: where the training data lay, and why an input is outside it.

Reasons are short codes, ``kind:subject`` (``unseen:device_id=nvidia-h100-sxm5-80gb``,
``range:m_log2``, ``absent:kernel_block_m``); ``CODES`` says what each kind means and ``explain``
gives a code's full text with the training range it refers to.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from preflight.features import among

#: Share of the training range an input may exceed before it is flagged.
TOLERANCE = 0.02

#: What each kind of reason code says; a code is ``kind:subject``.
CODES = {
    "unseen": "unseen:COLUMN=VALUE: the training data has no measurements of this value "
    "(e.g. a device known only by its spec sheet)",
    "range": "range:FEATURE: the feature lies outside its training range (by more than "
    f"{TOLERANCE:.0%} of the range)",
    "absent": "absent:FEATURE: the feature was never present in the training data "
    "(e.g. a kernel configuration, when training had none)",
}


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
        """The codes of why each row lies outside the envelope (an empty list: inside); categorical
        values first, then features in column order."""
        out: list[list[str]] = [[] for _ in range(len(X))]
        for rows, codes in (self._unseen(meta), self._outside(X)):
            for i, code in zip(rows.tolist(), codes.tolist()):  # flagged cells only
                out[i].append(code)
        return out

    def _unseen(self, meta: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        """Rows and codes of categorical values without measurements, column after column."""
        rows, codes = [np.array([], dtype=int)], [np.array([], dtype=str)]
        for column, seen in self.seen_.items():
            values = meta[column].astype(str).to_numpy()
            flagged = np.flatnonzero(~among(values, seen) & (values != ""))  # "": not given
            rows.append(flagged)
            codes.append(np.char.add(f"unseen:{column}=", values[flagged].astype(str)))
        return np.concatenate(rows), np.concatenate(codes)

    def _outside(self, X: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        """Rows and codes of features outside their training range or never present in it."""
        low = np.array([self.low_.get(c, np.nan) for c in X.columns], dtype=float)
        high = np.array([self.high_.get(c, np.nan) for c in X.columns], dtype=float)
        slack = TOLERANCE * np.maximum(np.maximum(high - low, np.abs(high)), 1e-9)
        values = X.to_numpy(dtype=float, na_value=np.nan)
        with np.errstate(invalid="ignore"):
            outside = (values < low - slack) | (values > high + slack)  # NaN bounds or values compare False
        fitted = np.array([c in self.low_ for c in X.columns])  # a feature added since: no envelope for it
        never_seen = fitted & np.isnan(low) & ~np.isnan(values)
        rows, cols = np.nonzero(outside | never_seen)
        names = np.asarray(X.columns, dtype=str)
        kinds = np.where(never_seen[rows, cols], "absent:", "range:")
        return rows, np.char.add(kinds, names[cols])

    def explain(self, code: str) -> str | None:
        """The full text of one of this envelope's codes (None for a code of another kind)."""
        kind, _, subject = code.partition(":")
        if kind == "unseen":
            return f"{subject} has no measurements in the training data"
        if kind == "absent":
            return f"{subject} never present in the training data"
        if kind == "range" and subject in self.low_:
            low, high = self.low_[subject], self.high_[subject]
            return f"{subject} outside the training range [{low:.3g}, {high:.3g}]"
        return None

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
