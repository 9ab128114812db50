"""Calibration of any family: conformal scores from grouped out-of-fold residuals, by side and stratum.

A *side* says whether a row's device was seen in training (``seen``), is known only by its spec sheet
but its machine (architecture) was seen (``sibling``), or neither (``unseen``); a *stratum* is the
task's ``stratum_column`` (rows that err differently, e.g. a tuner's kernel sweep and a library call),
dotted from parent to child (``gpu.kernel``). Each (side, stratum) and (side, parent) with at least
``MIN_STRATUM_SCORES`` scores gets its own calibrator (Mondrian calibration); ``<side>/*`` pools a
side's strata.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from preflight.data.errors import ModelStateError
from preflight.features import rows_of_each
from preflight.models.core.conformal import Conformal
from preflight.models.core.targets import Target

#: A calibration stratum with fewer scores than this falls back to the pooled scores of its side.
MIN_STRATUM_SCORES = 30

#: The coverage at which an unmeasured stratum's two candidate calibrators are compared.
COMPARED_COVERAGE = 0.9

#: Sides: a device measured in training, one whose machine (architecture) was, one entirely new.
SIDES = ("seen", "sibling", "unseen")
#: Where a side without scores borrows them: a sibling is as uncertain as a new device before a seen one.
FALLBACK = {"seen": ("seen",), "sibling": ("sibling", "unseen", "seen"), "unseen": ("unseen", "seen")}

#: Calibrators per key (``seen/*``, ``unseen/kernel``...) and target.
Calibrators = dict[str, dict[str, Conformal]]
#: The rows (positions) of each (side, stratum) among rows to calibrate.
RowGroups = dict[tuple[str, str], np.ndarray]


def strata(meta: pd.DataFrame, column: str | None) -> np.ndarray:
    """Each row's stratum (``all`` for a task without one)."""
    if column is None or column not in meta:
        return np.full(len(meta), "all")
    return meta[column].astype(str).to_numpy()


def row_groups(sides: np.ndarray, row_strata: np.ndarray) -> RowGroups:
    """Each (side, stratum) and its rows, found once for all of a prediction's targets."""
    return rows_of_each(sides, row_strata)


def aligned_residual(target: Target, y: pd.Series, predicted: pd.Series) -> np.ndarray:
    """The residual of every row, NaN where the measurement or the estimate is unusable."""
    ok = target.present(y) & target.present(predicted)
    residual = np.full(len(y), np.nan)
    residual[ok] = target.residual(y[ok].to_numpy(dtype=float), predicted[ok].to_numpy(dtype=float))
    return residual


def residuals(target: Target, y: pd.Series, predicted: pd.Series) -> np.ndarray:
    """The residuals of the rows where both sides are usable."""
    residual = aligned_residual(target, y, predicted)
    return residual[~np.isnan(residual)]


def residual_table(
    targets: dict[str, Target], Y: pd.DataFrame, predicted: pd.DataFrame, devices: np.ndarray
) -> pd.DataFrame:
    """Residuals per row and target, beside each row's device."""
    return pd.DataFrame(
        {"device_id": devices} | {t: aligned_residual(targets[t], Y[t], predicted[t]) for t in Y.columns}
    )


class Calibration:
    """Calibrators by side, stratum and target, and intervals and probabilities from them."""

    def __init__(self, targets: dict[str, Target], calibrators: Calibrators | None = None) -> None:
        self.targets, self.calibrators = targets, calibrators or {}

    def add(self, side: str, Y: pd.DataFrame, oof: pd.DataFrame, row_strata: np.ndarray) -> None:
        """Calibrators of one side from measured targets and their out-of-fold estimates: pooled, per
        stratum, and per parent of a stratum (``gpu`` of ``gpu.kernel``)."""
        for name in Y.columns:
            target = self.targets[name]
            usable = target.present(Y[name]) & target.present(oof[name])
            if not usable.any():
                continue
            self._put(f"{side}/*", name, Y[name][usable], oof[name][usable])
            for stratum in {s for leaf in np.unique(row_strata[usable]) for s in _lineage(str(leaf))}:
                rows = usable & _within(row_strata, stratum)
                if rows.sum() >= MIN_STRATUM_SCORES:
                    self._put(f"{side}/{stratum}", name, Y[name][rows], oof[name][rows])

    def _put(self, key: str, name: str, y: pd.Series, estimate: pd.Series) -> None:
        self.calibrators.setdefault(key, {})[name] = Conformal(self.targets[name]).conformalize(y, estimate)

    @property
    def calibrated(self) -> list[str]:
        """The targets there are scores for."""
        return list(self.calibrators.get("seen/*", {}))

    def calibrator(self, target: str, side: str, stratum: str) -> Conformal:
        """The most specific calibrator there are scores for: the row's side, its stratum, then the
        stratum's parents, then the side pooled. A stratum no side has scores for (a GEMM on matrix
        units, a whole model in fp16: never measured) is at least as uncertain as a device never seen
        and as the row's side: the wider of the two at ``COMPARED_COVERAGE``."""
        lineage = [*_lineage(stratum), "*"]
        if any(target in self.calibrators.get(f"{s}/{stratum}", {}) for s in SIDES):
            return self._most_specific(target, FALLBACK[side], lineage)
        unseen = self._most_specific(target, ("unseen", *FALLBACK[side]), lineage)
        if self.targets[target].kind.event:
            return unseen
        own = self._most_specific(target, FALLBACK[side], lineage)
        return max(unseen, own, key=lambda c: c.quantile(COMPARED_COVERAGE))

    def _most_specific(self, target: str, sides: tuple[str, ...], lineage: list[str]) -> Conformal:
        for key in (f"{s}/{level}" for s in sides for level in lineage):
            if target in self.calibrators.get(key, {}):
                return self.calibrators[key][target]
        raise ModelStateError(f"no calibration scores for {target!r}")

    def recalibrated(self, target: str, value: np.ndarray, groups: RowGroups) -> np.ndarray:
        """Estimates as they should be read (a binary target's probabilities recalibrated)."""
        out = np.asarray(value, float).copy()
        for key, rows in groups.items():
            out[rows] = self.calibrator(target, *key).recalibrated(out[rows])
        return out

    def interval(
        self, target: str, value: np.ndarray, groups: RowGroups, coverage: float
    ) -> tuple[np.ndarray, np.ndarray]:
        low, high = np.empty_like(value), np.empty_like(value)
        for key, rows in groups.items():
            low[rows], high[rows] = self.calibrator(target, *key).interval(value[rows], coverage)
        return low, high

    def probability_above(
        self, target: str, value: np.ndarray, threshold: np.ndarray, groups: RowGroups
    ) -> np.ndarray:
        out = np.empty_like(value)
        for key, rows in groups.items():
            out[rows] = self.calibrator(target, *key).probability_above(value[rows], threshold[rows])
        return out


def _lineage(stratum: str) -> list[str]:
    """A stratum and its parents, most specific first: ``gpu.kernel``, ``gpu``."""
    parts = stratum.split(".")
    return [".".join(parts[:i]) for i in range(len(parts), 0, -1)]


def _within(row_strata: np.ndarray, stratum: str) -> np.ndarray:
    """Rows of a stratum or of its children."""
    values = row_strata.astype(str)
    return (values == stratum) | np.char.startswith(values, stratum + ".")
