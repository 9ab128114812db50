"""Adaptation by residuals: a subject's measurements (a kernel's synthesized designs) correct the
model's answers for that subject only.

Per subject and target, a Gaussian process (scikit-learn: constant × RBF plus white noise, fitted by
marginal likelihood on normalised residuals) learns the residual of the unadapted predictor's
estimates, on the target's scale, over the measured rows' features: near a measured design it
follows the measurement, far from every one it reverts to their mean (the subject's offset).
Features are scaled by their spread within a subject in training (``Scaler``), so what differs
between a subject's rows (pragma values) sets the distance and what they share (the graph) drops out.

Intervals are the process's predictive spread times a quantile of scores ``|r - μ| / σ`` from the
same adaptation simulated on the training subjects' zero-shot residuals (``ZeroShot``: out of fold,
each subject held out) with as many measurements, so they are calibrated on subjects the model
never saw and shrink as measurements arrive. A subject's measurements are seldom a random sample: a
search synthesizes the promising corner of a space and asks about the rest. So the simulation draws
them both ways, at random and as one neighbourhood (a random design and its nearest), and the
intervals hold for either (a random-only simulation left those of a replayed search short: see
docs/BENCHMARKS.md, issue 27).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from preflight.features import Features
from preflight.models.core.calibration import aligned_residual
from preflight.models.core.conformal import Conformal
from preflight.models.core.targets import Target
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel

#: Measurement counts the adaptation is simulated at; a subject's K reads the largest at most K.
SHOTS = (2, 5, 10, 20, 50, 100)
#: Fewer usable measurements than this leave a target unadapted.
MIN_SHOTS = SHOTS[0]
#: Draws of K measurements per training subject and way of drawing in the simulation, and rows
#: scored per draw.
DRAWS, SCORED_PER_DRAW = 2, 300
#: A probability corrected by residuals stays this far inside (0, 1).
EVENT_MARGIN = 1e-3


@dataclass(frozen=True)
class Scaler:
    """Feature columns divided by their spread within a subject (the root mean square of each row's
    deviation from its subject's mean, over the training rows); columns that never vary within a
    subject are left out, and a missing value counts as no difference (0)."""

    columns: tuple[str, ...]
    spread: np.ndarray

    @classmethod
    def fit(cls, X: pd.DataFrame, subjects: np.ndarray) -> Scaler:
        numeric = X.select_dtypes("number")
        deviation = numeric - numeric.groupby(subjects).transform("mean")
        spread = np.sqrt((deviation**2).mean()).fillna(0.0)
        varying = spread[spread > 1e-9]
        return cls(tuple(varying.index), varying.to_numpy(dtype=float))

    def __call__(self, X: pd.DataFrame) -> np.ndarray:
        return np.nan_to_num(X[list(self.columns)].to_numpy(dtype=float) / self.spread)

    def state(self) -> dict:
        return {"columns": list(self.columns), "spread": self.spread.tolist()}

    @classmethod
    def from_state(cls, state: dict) -> Scaler:
        return cls(tuple(state["columns"]), np.asarray(state["spread"], dtype=float))


def gaussian_process(x: np.ndarray, residual: np.ndarray) -> GaussianProcessRegressor:
    """A process fitted to residuals at scaled features (length scale from a few to many spreads)."""
    kernel = ConstantKernel(1.0, (1e-2, 1e2)) * RBF(5.0, (0.5, 100.0)) + WhiteKernel(0.1, (1e-3, 10.0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return GaussianProcessRegressor(kernel, normalize_y=True, random_state=0).fit(x, residual)


def _correct(process: GaussianProcessRegressor, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The residual's mean and spread at scaled features."""
    mean, spread = process.predict(x, return_std=True)
    return mean, np.maximum(spread, 1e-6)


@dataclass
class ZeroShot:
    """The training subjects' zero-shot residuals per target (``residuals``: one row per training row,
    NaN where unmeasured) at their scaled features (``x``, by ``scaler``), on which K-measurement
    adaptation is simulated once per target and K (cached); ``quality``: how good the zero-shot
    estimates were, per target, in words."""

    subjects: np.ndarray
    scaler: Scaler
    x: np.ndarray
    residuals: pd.DataFrame
    quality: dict[str, str]
    seed: int = 0
    _scores: dict[tuple[str, int], np.ndarray] = field(default_factory=dict, repr=False)

    @classmethod
    def of(
        cls, targets: dict[str, Target], Y: pd.DataFrame, oof: pd.DataFrame, subjects: np.ndarray,
        X: pd.DataFrame, quality: dict[str, str], seed: int,
    ) -> ZeroShot:  # fmt: skip
        """From the measurements and their out-of-fold estimates, each subject held out."""
        residuals = pd.DataFrame({t: aligned_residual(targets[t], Y[t], oof[t]) for t in Y.columns})
        scaler = Scaler.fit(X, subjects)
        return cls(np.asarray(subjects, dtype=str), scaler, scaler(X), residuals, quality, seed)

    def scores(self, target: str, shots: int) -> np.ndarray:
        """Scores ``|r - μ| / σ`` of a simulated adaptation to ``shots`` measurements (the nearest
        simulated count at most that)."""
        k = max(s for s in SHOTS if s <= max(shots, MIN_SHOTS))
        if (target, k) not in self._scores:
            self._scores[target, k] = self._simulate(target, k)
        return self._scores[target, k]

    def _simulate(self, target: str, k: int) -> np.ndarray:
        rng = np.random.default_rng(self.seed)
        residual = self.residuals[target].to_numpy(dtype=float)
        scores = []
        for subject in np.unique(self.subjects):
            rows = np.flatnonzero((self.subjects == subject) & np.isfinite(residual))
            for draw in range(2 * DRAWS if len(rows) > k else 0):
                shots = self._neighbourhood(rows, k, rng) if draw % 2 else rng.permutation(rows)[:k]
                scored = rng.permutation(np.setdiff1d(rows, shots))[:SCORED_PER_DRAW]
                mean, spread = _correct(gaussian_process(self.x[shots], residual[shots]), self.x[scored])
                scores.append(np.abs(residual[scored] - mean) / spread)
        return np.concatenate(scores) if scores else np.array([])

    def _neighbourhood(self, rows: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
        """A random row and its ``k - 1`` nearest (by scaled features), ties broken at random."""
        centre = self.x[rng.choice(rows)]
        distance = np.sum((self.x[rows] - centre) ** 2, axis=1)
        return rows[np.lexsort((rng.random(len(rows)), distance))[:k]]


@dataclass
class ResidualAdaptation:
    """Per measured subject and target, the process over its residuals and how many measurements
    it read."""

    scaler: Scaler
    processes: dict[str, dict[str, tuple[GaussianProcessRegressor, int]]]

    @classmethod
    def fit(
        cls, targets: dict[str, Target], scaler: Scaler, features: Features, Y: pd.DataFrame,
        estimates: pd.DataFrame, subjects: np.ndarray,
    ) -> ResidualAdaptation:  # fmt: skip
        """Processes over each subject's residuals of ``estimates`` (the unadapted predictor's) for the
        measurements ``Y``."""
        x = scaler(features.X)
        processes: dict[str, dict[str, tuple[GaussianProcessRegressor, int]]] = {}
        for subject in np.unique(subjects):
            rows = subjects == subject
            for name in Y.columns.intersection(estimates.columns):
                residual = aligned_residual(targets[name], Y[name][rows], estimates[name][rows])
                usable = np.isfinite(residual)
                if usable.sum() >= MIN_SHOTS:
                    process = gaussian_process(x[rows][usable], residual[usable])
                    processes.setdefault(str(subject), {})[name] = (process, int(usable.sum()))
        return cls(scaler, processes)

    def shots(self, subject: str) -> int:
        """How many measurements of a subject adapted it (the most over its targets)."""
        return max((k for _, k in self.processes.get(subject, {}).values()), default=0)

    def apply(
        self, targets: dict[str, Target], features: Features, subjects: np.ndarray, value: pd.DataFrame,
        low: pd.DataFrame, high: pd.DataFrame, zero_shot: ZeroShot, coverage: float,
    ) -> None:  # fmt: skip
        """Corrects the rows of measured subjects in place: estimates moved by the residual's mean,
        intervals its spread times the simulated adaptation's score quantile."""
        for subject, per_target in self.processes.items():
            rows = np.flatnonzero(subjects == subject)
            if not len(rows):
                continue
            x = self.scaler(features.X.iloc[rows])
            for name, (process, shots) in per_target.items():
                if name not in value:
                    continue
                target, column = targets[name], value.columns.get_loc(name)
                mean, spread = _correct(process, x)
                estimate = target.shift(value.iloc[rows, column].to_numpy(dtype=float), mean)
                if target.kind.event:  # a probability: its bounds move with it
                    estimate = np.clip(estimate, EVENT_MARGIN, 1 - EVENT_MARGIN)
                    bounds = tuple(
                        target.shift(f.iloc[rows, column].to_numpy(dtype=float), mean) for f in (low, high)
                    )
                else:
                    q = Conformal.from_scores(target, zero_shot.scores(name, shots)).quantile(coverage)
                    bounds = target.interval(estimate, q * spread)
                for frame, values in zip((value, low, high), (estimate, *bounds)):
                    frame.iloc[rows, column] = target.clip(values)
