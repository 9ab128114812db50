"""Turning canonical rows into model inputs. Pure functions, no I/O."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd


@dataclass
class Features:
    """What a featurizer returns.

    ``X`` holds the model inputs; ``reference`` a per-target scale the model may predict relative to
    (e.g. the roofline time for ``runtime_ms``); ``meta`` the non-input columns that splits, the
    out-of-distribution envelope and few-shot adaptation use (device id, shape...).
    """

    X: pd.DataFrame
    reference: pd.DataFrame
    meta: pd.DataFrame

    def take(self, index) -> Features:
        """Rows by position, as a new Features."""
        return Features(
            self.X.iloc[index].reset_index(drop=True),
            self.reference.iloc[index].reset_index(drop=True),
            self.meta.iloc[index].reset_index(drop=True),
        )


def concat(parts: list[Features]) -> Features:
    """Rows of several Features, one after the other."""

    def stack(attr: str) -> pd.DataFrame:
        return pd.concat([getattr(p, attr) for p in parts], ignore_index=True)

    return Features(stack("X"), stack("reference"), stack("meta"))
