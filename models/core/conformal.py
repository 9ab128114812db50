"""Split-conformal intervals on a target's own scale.

The conformity score of a calibration point is ``|r|`` with ``r`` the residual on the target's
scale (``Target.residual``): ``log y - log ŷ`` on a log scale, whose intervals are then relative
(``ŷ · exp(±q)``), and ``y - ŷ`` on the identity scale (``ŷ ± q``). ``q`` is the
``⌈(n+1)c⌉``-th smallest score for coverage ``c``. Scores are kept sorted, so any coverage can be
asked for at prediction time.

The signed residuals are kept too (where they were computed here rather than given as scores),
beside the estimates they belong to: the residuals of the calibration rows whose estimates lie
nearest to a new estimate are its predictive distribution, behind ``probability_above`` (e.g. the
probability that a run ends above an incumbent's accuracy). Near-by rows rather than all of them,
because errors differ along the scale: a run predicted to end near the best accuracy anything
reaches has little room above it, one predicted far below has much.

A ``binary`` target (an event: a design fits its FPGA) has no residual scale to take quantiles of.
Its estimates are recalibrated (``recalibrated``: Platt scaling of the out-of-fold probabilities
against what happened, monotone, so rankings and AUC are kept), and its interval is the Wilson score
interval of a probability estimated from as many calibration rows as ``probability_above`` reads.
"""

from __future__ import annotations

import math

import numpy as np
from preflight.data.errors import ModelStateError, UsageError
from preflight.models.core.targets import Target
from scipy import stats
from scipy.special import expit, logit

#: ``probability_above`` reads the residuals of this many calibration rows nearest in estimate, or of
#: 1/NEIGHBOUR_SHARE of the rows when that is more. Measured on local-curves (400 runs, held out by
#: architecture; gap between P and the observed share, worst decile): 200 or a 5th -15.5 points,
#: 100 or a 10th -13.9, 50 or a 20th -12.4, 30 or a 40th -10.0.
NEIGHBOURS, NEIGHBOUR_SHARE = 30, 40


class NotConformalized(ModelStateError):
    """`interval` was called before `conformalize`."""


class Conformal:
    """Staged like MAPIE's SplitConformalRegressor: conformalize, then ask for intervals."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self.scores_: np.ndarray | None = None
        self.residuals_: np.ndarray | None = None  # signed, in the order of their estimates
        self.estimates_: np.ndarray | None = None  # sorted
        self._platt: tuple[float, float] | None = None

    def residual(self, y_true: np.ndarray, y_pred: np.ndarray) -> np.ndarray:
        """Signed residuals on the target's scale."""
        y_true, y_pred = np.asarray(y_true, float), np.asarray(y_pred, float)
        if not (self.target.present(y_true).all() and self.target.present(y_pred).all()):
            raise ValueError(f"scores on the {self.target.scale} scale need values inside its domain")
        return self.target.residual(y_true, y_pred)

    def score(self, y_true: np.ndarray, y_pred: np.ndarray) -> np.ndarray:
        return np.abs(self.residual(y_true, y_pred))

    def conformalize(self, y_true: np.ndarray, y_pred: np.ndarray) -> Conformal:
        return self.from_residuals(self.target, self.residual(y_true, y_pred), y_pred, into=self)

    @classmethod
    def from_residuals(
        cls, target: Target, residuals, estimates=None, into: Conformal | None = None
    ) -> Conformal:
        """A calibrator from signed residuals (``Target.residual``) and the estimates they belong to
        (none: every residual is a neighbour of every estimate)."""
        calibrator = into or cls(target)
        residuals = np.asarray(residuals, dtype=float)
        estimates = np.zeros_like(residuals) if estimates is None else np.asarray(estimates, dtype=float)
        order = np.argsort(estimates, kind="stable")
        calibrator.estimates_, calibrator.residuals_ = estimates[order], residuals[order]
        calibrator.scores_ = np.sort(np.abs(residuals))
        return calibrator

    @classmethod
    def from_scores(cls, target: Target, scores) -> Conformal:
        """A calibrator from conformity scores computed elsewhere (saved state, few-shot residuals)."""
        calibrator = cls(target)
        calibrator.scores_ = np.sort(np.asarray(scores, dtype=float))
        return calibrator

    def quantile(self, coverage: float) -> float:
        """The score quantile for a coverage; infinite when there are too few scores for it."""
        if self.scores_ is None:
            raise NotConformalized("call conformalize(y_cal, y_pred_cal) before asking for intervals")
        if not 0 < coverage < 1:
            raise UsageError(f"coverage must lie in (0, 1), got {coverage}")
        n = len(self.scores_)
        rank = math.ceil((n + 1) * coverage)
        return math.inf if rank > n else float(self.scores_[rank - 1])

    def probability_above(self, y_pred: np.ndarray, threshold: np.ndarray) -> np.ndarray:
        """P(y > threshold) for each estimate: the share of the residuals of its neighbours in estimate
        that would carry it past the threshold, kept within [1/(k+1), k/(k+1)] for k neighbours (no
        finite sample makes it certain), and 0 where the threshold is at or above what the target can be."""
        # residuals_ and estimates_ are set together (by from_residuals)
        if self.residuals_ is None or self.estimates_ is None:
            raise NotConformalized("probabilities need signed residuals: conformalize, or from_residuals")
        n = len(self.residuals_)
        k = self.neighbours
        y_pred = np.atleast_1d(np.asarray(y_pred, float))
        with np.errstate(divide="ignore", invalid="ignore"):  # a threshold outside the scale's domain
            needed = self.target.residual(np.asarray(threshold, float), y_pred)
        needed = np.broadcast_to(needed, y_pred.shape)
        first = np.clip(np.searchsorted(self.estimates_, y_pred) - k // 2, 0, n - k)
        above = np.array(
            [np.count_nonzero(self.residuals_[f : f + k] > need) for f, need in zip(first, needed)]
        )
        p = np.clip(above / k, 1 / (k + 1), k / (k + 1))
        bound = np.inf if self.target.upper is None else self.target.upper
        return np.where(np.broadcast_to(np.asarray(threshold, float), p.shape) >= bound, 0.0, p)

    @property
    def neighbours(self) -> int:
        """How many calibration rows nearest in estimate a probability is read from."""
        n = len(self.scores_ if self.scores_ is not None else [])
        return min(n, max(NEIGHBOURS, n // NEIGHBOUR_SHARE))

    def recalibrated(self, y_pred: np.ndarray) -> np.ndarray:
        """Estimates as they should be read: recalibrated probabilities for a binary target, unchanged
        for any other."""
        y_pred = np.asarray(y_pred, float)
        if not self.target.kind.event:
            return y_pred
        slope, intercept = self._platt_fit()
        return expit(slope * _logit(y_pred) + intercept)

    def _platt_fit(self) -> tuple[float, float]:
        if self._platt is None:
            if self.residuals_ is None or self.estimates_ is None:
                raise NotConformalized("a binary target's calibration needs its residuals and estimates")
            from sklearn.linear_model import LogisticRegression

            labels = np.round(self.estimates_ + self.residuals_)
            if len(np.unique(labels)) < 2:  # one outcome only: nothing to rescale against
                self._platt = (1.0, 0.0)
            else:
                model = LogisticRegression().fit(_logit(self.estimates_)[:, None], labels)
                slope, intercept = float(model.coef_[0, 0]), float(model.intercept_[0])
                # a slope at or below 0 would reverse the ranking: keep the estimates as they are
                self._platt = (slope, intercept) if slope > 0 else (1.0, 0.0)
        return self._platt

    def interval(
        self, y_pred: np.ndarray, coverage: float, scale: float = 1.0
    ) -> tuple[np.ndarray, np.ndarray]:
        """Bounds at a coverage; ``scale`` multiplies the score quantile (for scores normalised by a
        spread). A binary target's bounds are the Wilson interval of its (calibrated) probability."""
        if self.target.kind.event:
            return _wilson(np.asarray(y_pred, float), self.neighbours, coverage)
        return self.target.interval(y_pred, self.quantile(coverage) * scale)


def _logit(p: np.ndarray) -> np.ndarray:
    return logit(np.clip(p, 1e-6, 1 - 1e-6))


def _wilson(p: np.ndarray, n: int, coverage: float) -> tuple[np.ndarray, np.ndarray]:
    """The Wilson score interval of a share ``p`` observed in ``n`` trials."""
    if not 0 < coverage < 1:
        raise UsageError(f"coverage must lie in (0, 1), got {coverage}")
    if n == 0:
        return np.zeros_like(p), np.ones_like(p)
    z = float(stats.norm.isf((1 - coverage) / 2))  # finite for a coverage a hair below 1
    centre = (p + z**2 / (2 * n)) / (1 + z**2 / n)
    half = z / (1 + z**2 / n) * np.sqrt(p * (1 - p) / n + z**2 / (4 * n**2))
    return np.clip(centre - half, 0, 1), np.clip(centre + half, 0, 1)
