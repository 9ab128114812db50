"""A trained predictor: a family plus conformal calibration, an OOD envelope and few-shot offsets.

Calibration is cross-conformal: grouped out-of-fold predictions on the training data give the
conformity scores, then the family is fitted on every row. Groups follow the task's split, so the
interval reflects the error on what a user brings new (a new shape, a new device).

Few-shot: measurements of a device shift its predictions by the median log residual of those
measurements, and (with enough of them) its intervals come from their leave-one-out residuals.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.model_selection import GroupKFold

from preflight.features import Features
from preflight.models.conformal import RelativeConformal
from preflight.models.envelope import Envelope
from preflight.models.families import FAMILIES, make_family
from preflight.models.families.targets import present

CALIBRATION_FOLDS = 4


@dataclass
class Estimates:
    """Point estimates and intervals per target, and the out-of-distribution reasons per row."""

    value: pd.DataFrame
    low: pd.DataFrame
    high: pd.DataFrame
    reasons: list[list[str]]

    def records(self) -> list[dict]:
        """One dict per row: ``{target: {value, low, high}, ood, warnings}`` (NaN as None)."""
        def clean(x: float) -> float | None:
            return None if not np.isfinite(x) else float(x)

        out = []
        for i, reasons in enumerate(self.reasons):
            record = {t: {"value": clean(self.value[t].iat[i]), "low": clean(self.low[t].iat[i]),
                          "high": clean(self.high[t].iat[i])} for t in self.value.columns}
            out.append(record | {"ood": bool(reasons), "warnings": reasons})
        return out


def _folds(groups: pd.Series, n_folds: int) -> list[tuple[np.ndarray, np.ndarray]]:
    n_groups = groups.nunique()
    if n_groups < 2:
        raise ValueError("calibration needs at least two groups of training rows")
    return list(GroupKFold(n_splits=min(n_folds, n_groups)).split(groups, groups=groups))


class Predictor:
    """``fit`` on features, targets and groups; ``predict`` with intervals at any coverage."""

    def __init__(self, task: str, family: str, *, seed: int = 0, calibration_folds: int = CALIBRATION_FOLDS,
                 params: dict | None = None) -> None:
        self.task, self.family, self.seed, self.calibration_folds = task, family, seed, calibration_folds
        self.params = params or {}  # the family's hyperparameters, beyond its defaults

    def _new_family(self):
        return make_family(self.family, self.seed, **self.params)

    def fit(self, features: Features, Y: pd.DataFrame, groups: pd.Series) -> "Predictor":
        oof = pd.DataFrame(np.nan, index=Y.index, columns=Y.columns)
        for train, held in _folds(groups.reset_index(drop=True), self.calibration_folds):
            part = self._new_family().fit(features.X.iloc[train], Y.iloc[train], features.reference.iloc[train])
            predicted = part.predict(features.X.iloc[held], features.reference.iloc[held])
            oof.iloc[held, [oof.columns.get_loc(c) for c in predicted.columns]] = predicted.to_numpy()
        self.oof_ = oof  # grouped out-of-fold estimates: the training run's CV metrics (not saved)
        self.calibrators_ = {}
        for target in Y.columns:
            usable = present(Y[target]) & present(oof[target])
            if usable.any():
                self.calibrators_[target] = RelativeConformal().conformalize(Y[target][usable], oof[target][usable])
        self.family_ = self._new_family().fit(features.X, Y, features.reference)
        self.envelope_ = Envelope().fit(features.X, features.meta)
        self.shots_: dict[str, dict[str, dict]] = {}
        return self

    @property
    def targets(self) -> list[str]:
        return list(self.calibrators_)

    def adapt(self, features: Features, Y: pd.DataFrame) -> "Predictor":
        """Learn per-device offsets (and, with enough shots, intervals) from measurements."""
        base = self.family_.predict(features.X, features.reference)
        for device, rows in features.meta.groupby("device_id").indices.items():
            per_target = {}
            for target in base.columns.intersection(Y.columns):
                y, p = Y[target].iloc[rows], base[target].iloc[rows]
                ok = present(y) & present(p)
                if ok.any():
                    residual = np.log(y[ok].to_numpy()) - np.log(p[ok].to_numpy())
                    per_target[target] = {"offset": float(np.median(residual)), "scores": _loo_scores(residual).tolist()}
            self.shots_[device] = per_target
        return self

    def predict(self, features: Features, coverage: float = 0.9) -> Estimates:
        value = self.family_.predict(features.X, features.reference)
        low, high = value.copy(), value.copy()
        devices = features.meta["device_id"].astype(str).to_numpy()
        for target in value.columns:
            offsets = np.array([self.shots_.get(d, {}).get(target, {}).get("offset", 0.0) for d in devices])
            value[target] = value[target].to_numpy() * np.exp(offsets)
            low[target], high[target] = self._interval(target, value[target].to_numpy(), devices, coverage)
        reasons = self.envelope_.reasons(features.X, features.meta)
        for i, device in enumerate(devices):
            if device in self.shots_:  # measured by the user: no longer unseen
                reasons[i] = [r for r in reasons[i] if not r.startswith(f"device_id={device} ")]
        return Estimates(value, low, high, reasons)

    def _interval(self, target: str, value: np.ndarray, devices: np.ndarray, coverage: float) -> tuple[np.ndarray, np.ndarray]:
        low, high = self.calibrators_[target].interval(value, coverage)
        for device in set(devices) & set(self.shots_):
            scores = self.shots_[device].get(target, {}).get("scores", [])
            own = RelativeConformal.from_scores(scores)
            if np.isfinite(own.quantile(coverage)):
                rows = devices == device
                low[rows], high[rows] = own.interval(value[rows], coverage)
        return low, high

    def save(self, directory: Path) -> None:
        directory = Path(directory)
        self.family_.save(directory / "family")
        np.savez_compressed(directory / "scores.npz", **{t: c.scores_ for t, c in self.calibrators_.items()})
        state = {"task": self.task, "family": self.family, "seed": self.seed, "calibration_folds": self.calibration_folds,
                 "params": self.params,
                 "envelope": self.envelope_.state(), "shots": self.shots_}
        (directory / "predictor.json").write_text(json.dumps(state))

    @classmethod
    def load(cls, directory: Path) -> "Predictor":
        directory = Path(directory)
        state = json.loads((directory / "predictor.json").read_text())
        predictor = cls(state["task"], state["family"], seed=state["seed"], calibration_folds=state["calibration_folds"],
                        params=state["params"])
        predictor.family_ = FAMILIES[state["family"]].load(directory / "family")
        with np.load(directory / "scores.npz") as scores:
            predictor.calibrators_ = {t: RelativeConformal.from_scores(scores[t]) for t in scores.files}
        predictor.envelope_ = Envelope.from_state(state["envelope"])
        predictor.shots_ = state["shots"]
        return predictor


def _loo_scores(residual: np.ndarray) -> np.ndarray:
    """|r_i - median of the others|: how far a new measurement lies from an offset fitted without it."""
    if len(residual) < 2:
        return np.array([])
    return np.array([abs(r - np.median(np.delete(residual, i))) for i, r in enumerate(residual)])
