"""Split-conformal intervals on a target's own scale.

The conformity score of a calibration point is ``|r|`` with ``r`` the residual on the target's
scale (``targets.residual``): ``log y - log ŷ`` for positive targets, whose intervals are then
relative (``ŷ · exp(±q)``), and ``y - ŷ`` for absolute targets (``ŷ ± q``). ``q`` is the
``⌈(n+1)c⌉``-th smallest score for coverage ``c``. Scores are kept sorted, so any coverage can be
asked for at prediction time.

The signed residuals are kept too (where they were computed here rather than given as scores):
their empirical distribution around an estimate is the predictive distribution behind
``probability_above``, e.g. the probability that a run ends above an incumbent's accuracy.
"""

from __future__ import annotations

import math

import numpy as np

from preflight.models.families import targets


class NotConformalized(RuntimeError):
    """`interval` was called before `conformalize`."""


class Conformal:
    """Staged like MAPIE's SplitConformalRegressor: conformalize, then ask for intervals."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.scores_: np.ndarray | None = None
        self.residuals_: np.ndarray | None = None  # signed and sorted

    def residual(self, y_true: np.ndarray, y_pred: np.ndarray) -> np.ndarray:
        """Signed residuals on the target's scale."""
        y_true, y_pred = np.asarray(y_true, float), np.asarray(y_pred, float)
        if not targets.is_absolute(self.target) and (np.any(y_true <= 0) or np.any(y_pred <= 0)):
            raise ValueError(f"the relative score of {self.target!r} needs y_true > 0 and y_pred > 0")
        return targets.residual(self.target, y_true, y_pred)

    def score(self, y_true: np.ndarray, y_pred: np.ndarray) -> np.ndarray:
        return np.abs(self.residual(y_true, y_pred))

    def conformalize(self, y_true: np.ndarray, y_pred: np.ndarray) -> "Conformal":
        return self.from_residuals(self.target, self.residual(y_true, y_pred), into=self)

    @classmethod
    def from_residuals(cls, target: str, residuals, into: "Conformal | None" = None) -> "Conformal":
        """A calibrator from signed residuals (``targets.residual``), as ``conformalize`` keeps them."""
        calibrator = into or cls(target)
        calibrator.residuals_ = np.sort(np.asarray(residuals, dtype=float))
        calibrator.scores_ = np.sort(np.abs(calibrator.residuals_))
        return calibrator

    @classmethod
    def from_scores(cls, target: str, scores) -> "Conformal":
        """A calibrator from conformity scores computed elsewhere (saved state, few-shot residuals)."""
        calibrator = cls(target)
        calibrator.scores_ = np.sort(np.asarray(scores, dtype=float))
        return calibrator

    def quantile(self, coverage: float) -> float:
        """The score quantile for a coverage; infinite when there are too few scores for it."""
        if self.scores_ is None:
            raise NotConformalized("call conformalize(y_cal, y_pred_cal) before asking for intervals")
        if not 0 < coverage < 1:
            raise ValueError(f"coverage must lie in (0, 1), got {coverage}")
        n = len(self.scores_)
        rank = math.ceil((n + 1) * coverage)
        return math.inf if rank > n else float(self.scores_[rank - 1])

    def probability_above(self, y_pred: np.ndarray, threshold: np.ndarray) -> np.ndarray:
        """P(y > threshold) for each estimate: the share of calibration residuals that would carry the
        estimate past the threshold, kept within [1/(n+1), n/(n+1)] (no finite sample makes it certain)."""
        if self.residuals_ is None:
            raise NotConformalized("probabilities need signed residuals: conformalize, or from_residuals")
        n = len(self.residuals_)
        needed = targets.residual(self.target, np.asarray(threshold, float), np.asarray(y_pred, float))
        above = n - np.searchsorted(self.residuals_, needed, side="right")
        return np.clip(above / n, 1 / (n + 1), n / (n + 1))

    def interval(self, y_pred: np.ndarray, coverage: float, scale: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
        """Bounds at a coverage; ``scale`` multiplies the score quantile (for scores normalised by a spread)."""
        q = self.quantile(coverage) * scale
        y_pred = np.asarray(y_pred, float)
        if targets.is_absolute(self.target):
            return y_pred - q, y_pred + q
        return y_pred * math.exp(-q) if math.isfinite(q) else np.zeros_like(y_pred), y_pred * math.exp(q)
