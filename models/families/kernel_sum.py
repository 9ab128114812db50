"""Whole-model time as the sum of its parts, each part timed by the GEMM performance law.

Parts (``Features.parts``) are the kernels of one operator and pass. Each part's time follows the
same law as a GEMM (``models/families/physics.py``): per device and dtype a launch floor and a
compute and a bandwidth efficiency (fitted where traces timed that device, from spec-sheet facts
where not), and a bounded shape term learned from every part a profiler timed (the part's kind and
size relative to the device). So no part beats its roofline, a GPU absent from training takes its
efficiencies from the same prior as its GEMMs, and a dtype no trace measured (fp16 on tensor cores)
takes the matrix units' stated prior. An item's estimate is Σ count × part estimate. The predictor
calibrates the *sum* against measured end-to-end times, so its interval never treats the parts'
errors as independent.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
from preflight.data.errors import DataError
from preflight.features import Features, Parts
from preflight.features.model_latency import LAW_COLUMNS, PART_COUNT, PART_OBSERVED, PART_REFERENCE
from preflight.models.families.physics import PhysicsFamily
from preflight.models.targets import Target

#: The parts' own target, learned by the law.
PART_TARGET = "part_ms"


class KernelSumFamily:
    name = "kernel-sum"

    def __init__(
        self,
        *,
        targets: dict[str, Target],
        num_leaves: int = 31,
        learning_rate: float = 0.05,
        n_estimators: int = 300,
        seed: int = 0,
    ) -> None:
        if len(targets) != 1:
            raise DataError("kernel-sum predicts one time target, the sum of its parts")
        self.targets, self.target = targets, next(iter(targets))
        self.num_leaves, self.learning_rate, self.n_estimators = num_leaves, learning_rate, n_estimators
        self.seed = seed

    def get_params(self) -> dict:
        return {k: getattr(self, k) for k in ("num_leaves", "learning_rate", "n_estimators", "seed")}

    def fit(
        self, features: Features, Y: pd.DataFrame, sample_weight: np.ndarray | None = None
    ) -> KernelSumFamily:
        parts = _parts_of(features)
        observed = parts.frame[PART_OBSERVED].to_numpy()
        if not (np.isfinite(observed) & (observed > 0)).any():
            raise DataError(
                "kernel-sum learns from timed parts (per-operator traces); none in the training data"
            )
        weight = None if sample_weight is None else np.asarray(sample_weight)[parts.owner]
        self.law_ = PhysicsFamily(
            targets={PART_TARGET: Target("ms")},
            n_estimators=self.n_estimators,
            num_leaves=self.num_leaves,
            learning_rate=self.learning_rate,
            seed=self.seed,
        ).fit(_part_features(parts), pd.DataFrame({PART_TARGET: observed}), sample_weight=weight)
        return self

    def predict(self, features: Features) -> pd.DataFrame:
        parts = _parts_of(features)
        estimate = self.law_.predict(_part_features(parts))[PART_TARGET].to_numpy()
        weights = parts.frame[PART_COUNT].to_numpy() * estimate
        summed = np.bincount(parts.owner, weights=weights, minlength=len(features.X))
        return pd.DataFrame({self.target: summed}, index=features.X.index)

    def save(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.law_.save(directory / "parts")
        state = {"params": self.get_params(), "targets": {t: s.state() for t, s in self.targets.items()}}
        (directory / "kernel_sum.json").write_text(json.dumps(state, indent=2))

    @classmethod
    def load(cls, directory: Path) -> KernelSumFamily:
        state = json.loads((directory / "kernel_sum.json").read_text())
        targets = {t: Target.from_state(s) for t, s in state["targets"].items()}
        family = cls(targets=targets, **state["params"])
        family.law_ = PhysicsFamily.load(directory / "parts")
        return family


def _parts_of(features: Features) -> Parts:
    if features.parts is None:
        raise DataError("kernel-sum needs items made of parts (a featurizer that fills Features.parts)")
    return features.parts


def _part_features(parts: Parts) -> Features:
    """The parts as rows of the law: their inputs, their roofline, and the law's terms as meta."""
    frame = parts.frame
    return Features(
        X=frame.drop(columns=[PART_REFERENCE, PART_OBSERVED, PART_COUNT, *LAW_COLUMNS]),
        reference=pd.DataFrame({PART_TARGET: frame[PART_REFERENCE].to_numpy()}),
        meta=frame[list(LAW_COLUMNS)].reset_index(drop=True),
    )
