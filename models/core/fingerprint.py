"""Adaptation by a device fingerprint (HELP's insight: a device's measured latencies on a few
architectures describe it better than any spec sheet can).

Every device setting of training is a *reference*: the model can estimate any architecture's latency
on it (its context columns in place of the row's). A measured device's few shots fix how its latency
reads as a mix of the references' estimates and its own zero-shot estimate: on the target's scale, a
non-negative combination of the basis (centred on the shots) plus the shots' mean, shrunk towards no
weight by a ridge (``RIDGE``), so a phone mixes phones and an FPGA whatever ranks like it. The mix
answers for that device only.

Intervals come from the same adaptation simulated on every reference held out in turn (its own
machine's settings dropped from the basis, its zero-shot estimate out of fold), scored in units of the
shots' own leave-one-out spread, per number of shots and per stratum: with a spec sheet, and with the
spec sheet hidden (a device the catalogue does not know). The spread is shrunk toward a prior (a few
shots that happen to agree must not give a razor-thin interval): the mean error of the references the
device's mix leans on when they were held out (a phone's from phones), weighted as the mix weighs
them, the simulation's typical spread for the weight on its own estimate.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from preflight.features import Features
from preflight.models.core.conformal import Conformal
from preflight.models.core.targets import Target
from preflight.models.families import Family
from scipy.optimize import nnls

#: Ridge on the mix's weights, relative to the shots' scale (no weight when the shots say nothing).
RIDGE = 0.3
#: Shot counts the adaptation is simulated at; a device with K shots reads the largest at most K.
SHOTS = (3, 5, 10, 20, 50)
#: Draws of K shots per reference in the simulation, and rows scored per draw.
DRAWS, SCORED_PER_DRAW = 4, 200
#: Floor of a spread (1% on a log scale), so that near-identical shots do not give a zero-width interval.
MIN_SPREAD = 0.01
#: A device's spread is shrunk toward its prior one (``prior``) as if that came from this many shots:
#: five shots that happen to fit well must not give a razor-thin interval.
PRIOR_SHOTS = 5
#: Strata of the simulated scores: a device with a spec sheet, and one without.
STRATA = ("spec", "no-spec")
#: The column of the saved contexts naming each reference's machine.
MACHINE = "machine:"


@dataclass(frozen=True)
class Mix:
    """One device's fingerprint for one target: weights over the basis columns, the basis' and the
    shots' means (on the target's scale), the leave-one-out spread of the shots, and their number."""

    weights: np.ndarray
    centre: np.ndarray
    level: float
    spread: float
    shots: int

    @classmethod
    def fit(cls, basis: np.ndarray, z: np.ndarray) -> Mix:
        weights, centre, level = _solve(basis, z)
        return cls(weights, centre, level, _loo_spread(basis, z), len(z))

    def __call__(self, basis: np.ndarray) -> np.ndarray:
        return (basis - self.centre) @ self.weights + self.level


def _solve(basis: np.ndarray, z: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Non-negative ridge weights of the centred basis for the centred shots."""
    centre, level = basis.mean(axis=0), float(z.mean())
    columns = basis.shape[1]
    scale = max(float(np.std(z)), MIN_SPREAD)
    design = np.vstack([(basis - centre) / scale, np.sqrt(RIDGE) * np.eye(columns)])
    weights, _ = nnls(design, np.r_[(z - level) / scale, np.zeros(columns)])
    return weights, centre, level


def _loo_spread(basis: np.ndarray, z: np.ndarray) -> float:
    """Mean absolute error of each shot under the mix fitted without it."""
    if len(z) < 3:
        return max(float(np.std(z)), MIN_SPREAD)
    errors = []
    for i in range(len(z)):
        others = np.delete(np.arange(len(z)), i)
        weights, centre, level = _solve(basis[others], z[others])
        errors.append(abs(z[i] - ((basis[i] - centre) @ weights + level)))
    return max(float(np.mean(errors)), MIN_SPREAD)


@dataclass
class References:
    """The reference device settings (their context columns) and, per target, the simulated scores of
    K-shot fingerprints by stratum and K."""

    columns: list[str]
    contexts: pd.DataFrame  # one row per reference setting, indexed by its device id
    machines: pd.Series  # each reference's machine
    #: target -> stratum -> K -> scores, the simulation's median spread (``typical``) and each
    #: reference's mean error when it was held out (``by_reference``, in the order of ``contexts``)
    scores: dict[str, dict[str, dict[int, np.ndarray]]] = field(default_factory=dict)
    typical: dict[str, dict[str, dict[int, float]]] = field(default_factory=dict)
    by_reference: dict[str, dict[str, dict[int, np.ndarray]]] = field(default_factory=dict)

    @classmethod
    def of(cls, features: Features, device: str, machine: str | None) -> References:
        """Every device setting of ``features`` with its context (``ctx_*`` columns but the dataset)."""
        columns = [c for c in features.X.columns if c.startswith("ctx_") and c != "ctx_dataset"]
        keyed = features.X[columns].assign(_device=features.meta[device].astype(str).to_numpy())
        contexts = keyed[keyed["_device"] != ""].groupby("_device", sort=True)[columns].first()
        machines = (
            features.meta.assign(_device=features.meta[device].astype(str))
            .groupby("_device")[machine or device]
            .first()
        )
        return cls(columns, contexts, machines.reindex(contexts.index).astype(str))

    def bases(self, family: Family, features: Features, targets: dict[str, Target]) -> dict[str, np.ndarray]:
        """Per target, ``[rows, references]``: the family's estimate of each row on each reference
        setting, on the target's scale (one prediction per reference for every target)."""
        columns: dict[str, list[np.ndarray]] = {name: [] for name in targets}
        for _, context in self.contexts.iterrows():
            X = features.X.copy()
            X[self.columns] = context.to_numpy()
            moved = Features(X=X, reference=features.reference, meta=features.meta, graphs=features.graphs)
            estimate = family.predict(moved)
            for name, target in targets.items():
                columns[name].append(target.kind.to_scale(estimate[name].to_numpy(dtype=float)))
        return {
            name: np.column_stack(found) if found else np.zeros((len(features.X), 0))
            for name, found in columns.items()
        }

    def simulate(
        self,
        family: Family,
        features: Features,
        Y: pd.DataFrame,
        unseen: pd.DataFrame,
        devices: np.ndarray,
        targets: dict[str, Target],
        seed: int,
    ) -> None:
        """Scores ``|z - mix| / spread`` of K-shot fingerprints of each reference held out (its machine's
        settings out of the basis; its own estimate the out-of-fold one, or with its spec sheet hidden
        the family's without it), per target, stratum and K; the spread shrunk toward the median one
        (``shrunk``)."""
        rng = np.random.default_rng(seed)
        hidden = features.X.copy()
        hidden[self.columns] = np.nan
        without_spec = Features(
            X=hidden, reference=features.reference, meta=features.meta, graphs=features.graphs
        )
        measured = {name: targets[name].present(Y[name]) & targets[name].present(unseen[name]) for name in Y}
        measured = {name: present for name, present in measured.items() if present.any()}
        bases = self.bases(family, features, {name: targets[name] for name in measured})
        unspecified = family.predict(without_spec)
        for name, basis in bases.items():
            target, present = targets[name], measured[name]
            own = {
                "spec": target.kind.to_scale(unseen[name].to_numpy(dtype=float)),
                "no-spec": target.kind.to_scale(unspecified[name].to_numpy(dtype=float)),
            }
            z = target.kind.to_scale(Y[name].to_numpy(dtype=float))
            drawn: dict[str, dict[int, list[Draw]]] = {s: {k: [] for k in SHOTS} for s in STRATA}
            for position, reference in enumerate(self.contexts.index):
                rows = np.flatnonzero((devices == reference) & present)
                others = np.flatnonzero((self.machines != self.machines.iloc[position]).to_numpy())
                for stratum in STRATA:
                    own_estimate = own[stratum][rows]
                    if not np.isfinite(own_estimate).all():
                        continue
                    matrix = np.column_stack([basis[rows][:, others], own_estimate])
                    for k in SHOTS:
                        for _ in range(DRAWS if len(rows) > k + 1 else 0):
                            shots = rng.choice(len(rows), k, replace=False)
                            rest = np.setdiff1d(np.arange(len(rows)), shots)
                            rest = rng.choice(rest, min(len(rest), SCORED_PER_DRAW), replace=False)
                            mix = Mix.fit(matrix[shots], z[rows][shots])
                            weights = np.zeros(len(self.contexts) + 1)  # over every reference, then its own
                            weights[np.r_[others, len(self.contexts)]] = mix.weights
                            errors = np.abs(z[rows][rest] - mix(matrix[rest]))
                            drawn[stratum][k].append(Draw(errors, mix.spread, position, weights))
            self._score(name, drawn)

    def _score(self, name: str, drawn: dict[str, dict[int, list[Draw]]]) -> None:
        """Each draw's errors in units of its spread shrunk toward its prior (``prior``), per stratum
        and K; the typical spread (the draws' median) and each reference's mean error when held out."""
        self.scores[name], self.typical[name], self.by_reference[name] = {}, {}, {}
        for stratum, by_k in drawn.items():
            self.scores[name][stratum], self.typical[name][stratum], self.by_reference[name][stratum] = (
                {},
                {},
                {},
            )
            for k, draws in ((k, d) for k, d in by_k.items() if d):
                typical = float(np.median([draw.spread for draw in draws]))
                errors: dict[int, list[np.ndarray]] = {}
                for draw in draws:
                    errors.setdefault(draw.reference, []).append(draw.errors)
                by_reference = np.array(  # hundreds of errors each: steadier than a few shots' spreads
                    [
                        float(np.mean(np.concatenate(errors[r]))) if r in errors else typical
                        for r in range(len(self.contexts))
                    ]
                )
                self.typical[name][stratum][k], self.by_reference[name][stratum][k] = typical, by_reference
                self.scores[name][stratum][k] = np.concatenate(
                    [
                        draw.errors / shrunk(draw.spread, prior(draw.weights, by_reference, typical), k)
                        for draw in draws
                    ]
                )

    def half_width(self, name: str, target: Target, stratum: str, mix: Mix, coverage: float) -> float:
        """The interval's half-width on the target's scale for a device's fingerprint: the score quantile
        of the largest simulated K at most its shots, times its spread shrunk toward its prior; NaN
        where none was simulated."""
        by_k = self.scores.get(name, {}).get(stratum, {})
        ks = [k for k in by_k if k <= mix.shots]
        if not ks:
            return float("nan")
        k = max(ks)
        quantile = Conformal.from_scores(target, by_k[k]).quantile(coverage)
        toward = typical = self.typical[name][stratum][k]
        by_reference = self.by_reference.get(name, {}).get(stratum, {}).get(k)
        if by_reference is not None and len(by_reference) + 1 == len(mix.weights):  # else saved before
            toward = prior(mix.weights, by_reference, typical)
        return quantile * shrunk(mix.spread, toward, mix.shots)


@dataclass(frozen=True)
class Draw:
    """One simulated fingerprint: its errors on the rows it did not see, its shots' spread, the
    reference it stood for (a position in ``contexts``) and its mix's weights over every reference,
    then over its own estimate."""

    errors: np.ndarray
    spread: float
    reference: int
    weights: np.ndarray


def prior(weights: np.ndarray, by_reference: np.ndarray, typical: float) -> float:
    """The spread a mix's device is expected to have: its references' mean errors when held out,
    weighted as the mix weighs them; the typical spread for its own estimate's weight (and for a mix of
    nothing)."""
    total = float(weights.sum())
    if total <= 0:
        return typical
    return float((weights[:-1] @ by_reference + weights[-1] * typical) / total)


def shrunk(spread: float, toward: float, shots: int) -> float:
    """A device's spread from ``shots`` shots, shrunk toward its prior one (``PRIOR_SHOTS``)."""
    return (shots * spread + PRIOR_SHOTS * toward) / (shots + PRIOR_SHOTS)


def most_informative(basis: np.ndarray, k: int) -> list[int]:
    """``k`` rows of ``basis`` (candidates by reference estimates) that together pin a mix down best:
    greedily the row of largest leverage under those chosen so far (D-optimal design, columns centred
    and scaled, a unit ridge), so the set spreads over every direction the references differ in."""
    scaled = (basis - basis.mean(axis=0)) / np.maximum(basis.std(axis=0), MIN_SPREAD)
    information = np.eye(scaled.shape[1])
    chosen: list[int] = []
    for _ in range(min(k, len(scaled))):
        leverage = np.einsum("ij,jk,ik->i", scaled, np.linalg.inv(information), scaled)
        leverage[chosen] = -np.inf
        best = int(np.argmax(leverage))
        chosen.append(best)
        information += np.outer(scaled[best], scaled[best])
    return chosen


#: Files of a predictor's references (``models/core/artifacts.py``).
CONTEXTS, SCORES = "fingerprint_contexts.parquet", "fingerprint_scores.npz"


def save(references: References, directory: Path) -> None:
    """The references' contexts (with their machines) and simulated scores, beside the predictor."""
    references.contexts.assign(**{MACHINE: references.machines}).to_parquet(directory / CONTEXTS)
    typical = {key: np.array([value]) for key, value in _keyed(references.typical, "|typical").items()}
    scores = _keyed(references.scores) | typical | _keyed(references.by_reference, "|by_reference")
    np.savez_compressed(directory / SCORES, **scores)


def _keyed(nested: dict[str, dict[str, dict[int, Any]]], suffix: str = "") -> dict[str, Any]:
    """Target -> stratum -> K -> value, flat under ``TARGET|STRATUM|K`` plus ``suffix``."""
    return {
        f"{name}|{stratum}|{k}{suffix}": value
        for name, by_stratum in nested.items()
        for stratum, by_k in by_stratum.items()
        for k, value in by_k.items()
    }


def load(directory: Path) -> References | None:
    """A predictor's saved references; None for a predictor that adapts otherwise."""
    if not (directory / CONTEXTS).exists():
        return None
    contexts = pd.read_parquet(directory / CONTEXTS)
    machines = contexts.pop(MACHINE).astype(str)
    references = References(list(contexts.columns), contexts, machines)
    with np.load(directory / SCORES) as stored:
        for key in stored.files:
            name, stratum, k, *kind = key.split("|")
            if kind == ["typical"]:
                references.typical.setdefault(name, {}).setdefault(stratum, {})[int(k)] = float(
                    stored[key][0]
                )
            else:
                held = references.by_reference if kind == ["by_reference"] else references.scores
                held.setdefault(name, {}).setdefault(stratum, {})[int(k)] = stored[key]
    return references
