"""Adaptation by residuals: a subject's measurements (a kernel's synthesized designs) correct the
model's answers for that subject only.

Per subject and target, a Gaussian process (scikit-learn: constant × RBF plus white noise, fitted by
marginal likelihood) learns from the measured rows what the unadapted predictor gets wrong: near a
measured design it follows the measurement, far from every one it reverts to what the measurements
share. For a quantity (cycles, a resource) the process learns the measurement on the target's scale
over the rows' features and the unadapted estimate, weighted by whichever of ``ESTIMATE_WEIGHTS``
explains the measurements best (``Correction``): on a kernel never seen the estimates often rank its
designs little better than chance, and a process told to follow them (learning their residual alone)
erred more than one that may ignore them (docs/BENCHMARKS.md, issue 27). For an event (a design that
fits) it learns the residual of the probability, which carries what the trees learned about fitting.
Features are scaled by their spread within a subject in training (``Scaler``), so what differs
between a subject's rows (pragma values) sets the distance and what they share (the graph) drops out.

Intervals are the process's predictive spread times a quantile of scores ``|r - μ| / σ`` (or one
width, a quantile of ``|r - μ|``, where that was the narrower: with few measurements) from the same
adaptation simulated on the training subjects' zero-shot estimates (``ZeroShot``: out of fold, each
subject held out) with as many measurements, so they are calibrated on subjects the model never saw
and shrink as measurements arrive. A subject's measurements are seldom a random sample: a search
synthesizes the promising corner of a space and asks about the rest. So the simulation draws
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
#: Weights a quantity's unadapted estimate may carry among its process's inputs, in units of the
#: estimates' spread within a training subject (0: the process ignores it).
ESTIMATE_WEIGHTS = (0.0, 2.0, 8.0)


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
        spread = _spread_within(numeric, subjects).fillna(0.0)
        varying = spread[spread > 1e-9]
        return cls(tuple(varying.index), varying.to_numpy(dtype=float))

    def __call__(self, X: pd.DataFrame) -> np.ndarray:
        return np.nan_to_num(X[list(self.columns)].to_numpy(dtype=float) / self.spread)

    def state(self) -> dict:
        return {"columns": list(self.columns), "spread": self.spread.tolist()}

    @classmethod
    def from_state(cls, state: dict) -> Scaler:
        return cls(tuple(state["columns"]), np.asarray(state["spread"], dtype=float))


def _spread_within(frame: pd.DataFrame, subjects: np.ndarray) -> pd.Series:
    """Per column, the root mean square of each row's deviation from its subject's mean (NaN skipped)."""
    deviation = frame - frame.groupby(subjects).transform("mean")
    return np.sqrt((deviation**2).mean())


def gaussian_process(x: np.ndarray, y: np.ndarray) -> GaussianProcessRegressor:
    """A process fitted to values at scaled features (length scale from a few to many spreads)."""
    kernel = ConstantKernel(1.0, (1e-2, 1e2)) * RBF(5.0, (0.5, 100.0)) + WhiteKernel(0.1, (1e-3, 10.0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return GaussianProcessRegressor(kernel, normalize_y=True, random_state=0).fit(x, y)


@dataclass(frozen=True)
class Correction:
    """One subject's process for one target, and how many measurements it read. ``scale`` is
    ``None`` where the process learns the residual over the features alone (an event); otherwise it
    learns the measurement over the features and the estimate times ``scale`` (its weight per unit of
    the estimates' spread)."""

    process: GaussianProcessRegressor
    shots: int
    scale: float | None = None

    @classmethod
    def fit(
        cls, x: np.ndarray, estimate: np.ndarray, residual: np.ndarray, target: Target, unit: float
    ) -> Correction:
        """From measured rows' scaled features, unadapted estimates and residuals (target's scale)."""
        if target.kind.event:
            return cls(gaussian_process(x, residual), len(residual))
        measured = estimate + residual
        scales = [weight / unit for weight in ESTIMATE_WEIGHTS]
        fits = {scale: gaussian_process(_with_estimate(x, estimate, scale), measured) for scale in scales}
        scale = max(fits, key=lambda s: fits[s].log_marginal_likelihood_value_)
        return cls(fits[scale], len(residual), scale)

    def residual(self, x: np.ndarray, estimate: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The residual's mean and spread at scaled features and unadapted estimates (target's scale)."""
        if self.scale is None:
            mean, spread = self.process.predict(x, return_std=True)
        else:
            mean, spread = self.process.predict(_with_estimate(x, estimate, self.scale), return_std=True)
            mean = mean - estimate
        return mean, np.maximum(spread, 1e-6)


def _with_estimate(x: np.ndarray, estimate: np.ndarray, scale: float) -> np.ndarray:
    """Scaled features and the estimate as one more input (a missing or infinite estimate reads 0:
    its row's answer stays what the estimate makes it)."""
    return np.column_stack([x, scale * np.where(np.isfinite(estimate), estimate, 0.0)])


@dataclass(frozen=True)
class Simulation:
    """An adaptation simulated on training subjects: at each held-out row, the process's error
    ``|r - μ|`` and its spread ``σ``."""

    error: np.ndarray
    spread: np.ndarray

    def half_width(self, target: Target, coverage: float, spread: np.ndarray) -> np.ndarray:
        """Intervals' half-widths (target's scale) at ``coverage`` for rows whose process spread is
        ``spread``: the spread times the quantile of ``|r - μ| / σ``, or one width for every row (the
        quantile of ``|r - μ|``) where that was narrower in the simulation at the median. A process
        fitted to a handful of measurements knows its spread poorly: from two designs, spread-scaled
        intervals were e^±97 wide at the median (held-out kernels), one width e^±3.3."""
        scaled = Conformal.from_scores(target, self.error / self.spread).quantile(coverage)
        flat = Conformal.from_scores(target, self.error).quantile(coverage)
        if len(self.spread) and np.median(scaled * self.spread) <= flat:
            return scaled * spread
        return np.full(len(spread), flat)


@dataclass
class ZeroShot:
    """The training subjects' zero-shot estimates (out of fold, on each target's scale) and their
    residuals per target (one row per training row, both NaN where unmeasured) at their scaled features
    (``x``, by ``scaler``), on which K-measurement adaptation is simulated once per target and K
    (cached); ``quality``: how good the zero-shot estimates were, per target, in words."""

    targets: dict[str, Target]
    subjects: np.ndarray
    scaler: Scaler
    x: np.ndarray
    estimates: pd.DataFrame
    residuals: pd.DataFrame
    quality: dict[str, str]
    seed: int = 0
    _simulations: dict[tuple[str, int], Simulation] = field(default_factory=dict, repr=False)
    _units: dict[str, float] = field(default_factory=dict, repr=False)

    @classmethod
    def of(
        cls, targets: dict[str, Target], Y: pd.DataFrame, oof: pd.DataFrame, subjects: np.ndarray,
        X: pd.DataFrame, quality: dict[str, str], seed: int,
    ) -> ZeroShot:  # fmt: skip
        """From the measurements and their out-of-fold estimates, each subject held out."""
        residuals = pd.DataFrame({t: aligned_residual(targets[t], Y[t], oof[t]) for t in Y.columns})
        return cls.restored(targets, Y, residuals, subjects, Scaler.fit(X, subjects), X, quality, seed)

    @classmethod
    def restored(
        cls, targets: dict[str, Target], Y: pd.DataFrame, residuals: pd.DataFrame, subjects: np.ndarray,
        scaler: Scaler, X: pd.DataFrame, quality: dict[str, str], seed: int,
    ) -> ZeroShot:  # fmt: skip
        """From the measurements and their residuals (the estimates are what the residuals miss)."""
        estimates = pd.DataFrame(
            {t: _on_scale(targets[t], Y[t]) - residuals[t].to_numpy(dtype=float) for t in residuals.columns}
        )
        subjects = np.asarray(subjects, dtype=str)
        return cls(targets, subjects, scaler, scaler(X), estimates, residuals, quality, seed)

    def unit(self, target: str) -> float:
        """The spread of a target's estimates within a training subject, over its measured rows (1
        where they never vary)."""
        if target not in self._units:
            spread = float(_spread_within(self.estimates[[target]], self.subjects).iloc[0])
            self._units[target] = spread if np.isfinite(spread) and spread > 1e-9 else 1.0
        return self._units[target]

    def simulation(self, target: str, shots: int) -> Simulation:
        """The adaptation to ``shots`` measurements (the nearest simulated count at most that),
        simulated on the training subjects."""
        k = max(s for s in SHOTS if s <= max(shots, MIN_SHOTS))
        if (target, k) not in self._simulations:
            self._simulations[target, k] = self._simulate(target, k)
        return self._simulations[target, k]

    def _simulate(self, target: str, k: int) -> Simulation:
        rng = np.random.default_rng(self.seed)
        residual = self.residuals[target].to_numpy(dtype=float)
        estimate, unit = self.estimates[target].to_numpy(dtype=float), self.unit(target)
        errors, spreads = [np.array([])], [np.array([])]
        for subject in np.unique(self.subjects):
            rows = np.flatnonzero((self.subjects == subject) & np.isfinite(residual))
            for draw in range(2 * DRAWS if len(rows) > k else 0):
                shots = self._neighbourhood(rows, k, rng) if draw % 2 else rng.permutation(rows)[:k]
                scored = rng.permutation(np.setdiff1d(rows, shots))[:SCORED_PER_DRAW]
                correction = Correction.fit(
                    self.x[shots], estimate[shots], residual[shots], self.targets[target], unit
                )
                mean, spread = correction.residual(self.x[scored], estimate[scored])
                errors.append(np.abs(residual[scored] - mean))
                spreads.append(spread)
        return Simulation(np.concatenate(errors), np.concatenate(spreads))

    def _neighbourhood(self, rows: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
        """A random row and its ``k - 1`` nearest (by scaled features), ties broken at random."""
        centre = self.x[rng.choice(rows)]
        distance = np.sum((self.x[rows] - centre) ** 2, axis=1)
        return rows[np.lexsort((rng.random(len(rows)), distance))[:k]]


def _on_scale(target: Target, y: pd.Series) -> np.ndarray:
    """Measurements on the target's scale, NaN where unusable."""
    values = np.full(len(y), np.nan)
    present = target.present(y)
    values[present] = target.kind.to_scale(y[present].to_numpy(dtype=float))
    return values


@dataclass
class ResidualAdaptation:
    """Per measured subject and target, the correction its measurements taught."""

    scaler: Scaler
    corrections: dict[str, dict[str, Correction]]

    @classmethod
    def fit(
        cls, zero_shot: ZeroShot, features: Features, Y: pd.DataFrame, estimates: pd.DataFrame,
        subjects: np.ndarray,
    ) -> ResidualAdaptation:  # fmt: skip
        """Corrections of each subject's ``estimates`` (the unadapted predictor's) by the measurements
        ``Y``."""
        x = zero_shot.scaler(features.X)
        corrections: dict[str, dict[str, Correction]] = {}
        for subject in np.unique(subjects):
            rows = subjects == subject
            for name in Y.columns.intersection(estimates.columns):
                target = zero_shot.targets[name]
                residual = aligned_residual(target, Y[name][rows], estimates[name][rows])
                usable = np.isfinite(residual)
                if usable.sum() >= MIN_SHOTS:
                    estimate = target.kind.to_scale(estimates[name][rows].to_numpy(dtype=float)[usable])
                    correction = Correction.fit(
                        x[rows][usable], estimate, residual[usable], target, zero_shot.unit(name)
                    )
                    corrections.setdefault(str(subject), {})[name] = correction
        return cls(zero_shot.scaler, corrections)

    def shots(self, subject: str) -> int:
        """How many measurements of a subject adapted it (the most over its targets)."""
        return max((c.shots for c in self.corrections.get(subject, {}).values()), default=0)

    def apply(
        self, features: Features, subjects: np.ndarray, value: pd.DataFrame, low: pd.DataFrame,
        high: pd.DataFrame, zero_shot: ZeroShot, coverage: float,
    ) -> None:  # fmt: skip
        """Corrects the rows of measured subjects in place: estimates moved by the residual's mean,
        intervals as wide as the simulated adaptation's errors (``Simulation.half_width``)."""
        for subject, per_target in self.corrections.items():
            rows = np.flatnonzero(subjects == subject)
            if not len(rows):
                continue
            x = self.scaler(features.X.iloc[rows])
            for name, correction in per_target.items():
                if name not in value:
                    continue
                target, column = zero_shot.targets[name], value.columns.get_loc(name)
                unadapted = value.iloc[rows, column].to_numpy(dtype=float)
                mean, spread = correction.residual(x, target.kind.to_scale(unadapted))
                estimate = target.shift(unadapted, mean)
                if target.kind.event:  # a probability: its bounds move with it
                    estimate = np.clip(estimate, EVENT_MARGIN, 1 - EVENT_MARGIN)
                    bounds = tuple(
                        target.shift(f.iloc[rows, column].to_numpy(dtype=float), mean) for f in (low, high)
                    )
                else:
                    simulation = zero_shot.simulation(name, correction.shots)
                    bounds = target.interval(estimate, simulation.half_width(target, coverage, spread))
                for frame, values in zip((value, low, high), (estimate, *bounds)):
                    frame.iloc[rows, column] = target.clip(values)
