"""Whole-model time as the sum of its parts: a LightGBM model of each part's efficiency relative to its
roofline, learned from every part a profiler timed, summed over the parts of an item.

Parts (``Features.parts``) are the kernels of one operator and pass; each is learned as
``log(measured / roofline)`` from device-relative features, so it carries to a GPU absent from
training, and never faster than the roofline; a GEMM part is never slower on a board with more
power headroom (``PART_MONOTONE``). On a GPU and dtype (a unit) whose GEMM parts no training trace
timed, a GEMM part is timed by the GEMM performance law instead (the ``physics`` family: per-unit
efficiencies from the spec sheet's prior, a bounded shape term), fitted on the timed parts that are one
GEMM kernel: its GEMM kernels by the law, its other kernels at their roofline. Leaving each GPU out,
the law's parameters carried to the new GPU where the part tree's device-relative columns did not; on
a GPU in training, the tree, which learned that GPU's own parts, is the closer of the two
(docs/BENCHMARKS.md, issue 24, whole models). A model saved before it had the law times every GEMM
part with the tree. An item's estimate is Σ count × part estimate. (A
learned whole-run factor per mode, for launch gaps no part shows, changed leave-one-GPU-out error by
0.2 points on NeuSight's traces and was left out.) The predictor calibrates the *sum* against
measured end-to-end times, so its interval never treats the parts' errors as independent.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import lightgbm as lgb
import numpy as np
import pandas as pd
from preflight.data.errors import DataError
from preflight.features import Features, Parts, among
from preflight.features.gemm import HEADROOM
from preflight.features.model_latency import (
    KIND_CODES,
    MEMORY_BOUND_COLUMNS,
    NOT_INPUTS,
    PART_COUNT,
    PART_KERNELS,
    PART_MONOTONE,
    PART_OBSERVED,
    PART_REFERENCE,
)
from preflight.models.core.targets import Target
from preflight.models.families.physics import PhysicsFamily, units
from preflight.models.families.tree import lgb_params

#: What the GEMM law learns of a GEMM kernel: its time, never below its roofline.
GEMM_TIME = {"runtime_ms": Target("ms", at_least_reference=True)}
LAW_DIRECTORY = "gemm_law"


class KernelSumFamily:
    name = "kernel-sum"
    concurrent = True

    def __init__(
        self,
        *,
        targets: dict[str, Target],
        num_leaves: int = 31,
        learning_rate: float = 0.05,
        n_estimators: int = 300,
        min_child_samples: int = 20,
        seed: int = 0,
    ) -> None:
        if len(targets) != 1:
            raise DataError("kernel-sum predicts one time target, the sum of its parts")
        self.targets, self.target = targets, next(iter(targets))
        self.num_leaves, self.learning_rate, self.n_estimators = num_leaves, learning_rate, n_estimators
        self.min_child_samples, self.seed = min_child_samples, seed

    def get_params(self) -> dict:
        return {
            k: getattr(self, k)
            for k in ("num_leaves", "learning_rate", "n_estimators", "min_child_samples", "seed")
        }

    def _inputs(self, frame: pd.DataFrame) -> pd.DataFrame:
        """The parts' model inputs (``columns_``). A GEMM part leaves ``MEMORY_BOUND_COLUMNS`` empty,
        unless the model was fitted before parts had the board's power headroom: it reads them as then."""
        inputs = frame[self.columns_].copy()
        if HEADROOM in self.columns_:
            gemm = inputs["kind"].to_numpy() == KIND_CODES["gemm"]
            inputs.loc[gemm, list(MEMORY_BOUND_COLUMNS)] = np.nan
        return inputs

    def fit(
        self, features: Features, Y: pd.DataFrame, sample_weight: np.ndarray | None = None
    ) -> KernelSumFamily:
        parts = _parts_of(features)
        frame = parts.frame
        observed, reference = frame[PART_OBSERVED].to_numpy(), frame[PART_REFERENCE].to_numpy()
        timed = np.isfinite(observed) & (observed > 0) & (reference > 0)
        if not timed.any():
            raise DataError(
                "kernel-sum learns from timed parts (per-operator traces); none in the training data"
            )
        weight = None if sample_weight is None else np.asarray(sample_weight)[parts.owner[timed]]
        self.columns_ = [c for c in frame.columns if c not in NOT_INPUTS]
        data = lgb.Dataset(
            self._inputs(frame)[timed], np.log(observed[timed] / reference[timed]), weight=weight
        )
        params = {
            **lgb_params(
                self.num_leaves, self.learning_rate, self.min_child_samples, int(timed.sum()), self.seed
            ),
            "objective": "regression",
            "num_threads": 1,
            "monotone_constraints": [PART_MONOTONE.get(c, 0) for c in self.columns_],
        }
        self.booster_ = lgb.train(params, data, self.n_estimators)
        self.law_ = self._fit_law(parts, sample_weight)
        return self

    def _fit_law(self, parts: Parts, sample_weight: np.ndarray | None) -> PhysicsFamily | None:
        """The GEMM law, fitted on the GEMM kernels that are a timed part on their own; None with fewer
        than two. The units it fitted (``units_``) are those whose GEMM parts the tree times."""
        if parts.gemms is None or parts.gemm_part is None:
            return None
        frame = parts.frame
        observed = frame[PART_OBSERVED].to_numpy()
        alone = np.isfinite(observed) & (observed > 0) & (frame[PART_KERNELS].to_numpy() == 1)
        kernels = np.flatnonzero(alone[parts.gemm_part])
        if len(kernels) < 2:
            return None
        part = parts.gemm_part[kernels]
        weight = None if sample_weight is None else np.asarray(sample_weight)[parts.owner[part]]
        law = PhysicsFamily(targets=GEMM_TIME, seed=self.seed)
        return law.fit(parts.gemms.take(kernels), pd.DataFrame({"runtime_ms": observed[part]}), weight)

    def _part_estimates(self, parts: Parts) -> np.ndarray:
        """Each part's time: the tree's, or for a GEMM part on a unit no training part timed, the law's
        for its GEMM kernels plus its other kernels' roofline."""
        frame = parts.frame
        matrix = self._inputs(frame).to_numpy(dtype=float)
        estimate = frame[PART_REFERENCE].to_numpy() * np.exp(
            np.maximum(self.booster_.predict(matrix, num_threads=1), 0.0)
        )
        if self.law_ is None or parts.gemms is None or parts.gemm_part is None:
            return estimate
        untimed = np.flatnonzero(~among(units(parts.gemms.meta), list(self.law_.units_)))
        if not len(untimed):
            return estimate
        by_part = functools.partial(np.bincount, minlength=len(frame))
        part = parts.gemm_part[untimed]
        law = by_part(part, self.law_.predict(parts.gemms.take(untimed))["runtime_ms"].to_numpy())
        other = frame[PART_REFERENCE].to_numpy() - by_part(
            parts.gemm_part, parts.gemms.reference["runtime_ms"].to_numpy()
        )
        by_law = (frame["kind"].to_numpy() == KIND_CODES["gemm"]) & (by_part(part) > 0)
        return np.where(by_law, law + np.maximum(other, 0.0), estimate)

    def _summed(self, features: Features) -> np.ndarray:
        parts = _parts_of(features)
        frame = parts.frame
        weights = frame[PART_COUNT].to_numpy() * self._part_estimates(parts)
        return np.bincount(parts.owner, weights=weights, minlength=len(features.X))

    def predict(self, features: Features) -> pd.DataFrame:
        return pd.DataFrame({self.target: self._summed(features)}, index=features.X.index)

    def save(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.booster_.save_model(directory / "parts.lgb")
        state = {
            "params": self.get_params(),
            "targets": {t: target.state() for t, target in self.targets.items()},
            "columns": self.columns_,
        }
        (directory / "kernel_sum.json").write_text(json.dumps(state, indent=2))
        if self.law_ is not None:
            self.law_.save(directory / LAW_DIRECTORY)

    @classmethod
    def load(cls, directory: Path) -> KernelSumFamily:
        state = json.loads((directory / "kernel_sum.json").read_text())
        targets = {t: Target.from_state(s) for t, s in state["targets"].items()}
        family = cls(targets=targets, **state["params"])
        family.columns_ = state["columns"]
        family.booster_ = lgb.Booster(model_file=str(directory / "parts.lgb"))
        law = directory / LAW_DIRECTORY
        family.law_ = PhysicsFamily.load(law) if law.exists() else None
        return family


def _parts_of(features: Features):
    if features.parts is None:
        raise DataError("kernel-sum needs items made of parts (a featurizer that fills Features.parts)")
    return features.parts
