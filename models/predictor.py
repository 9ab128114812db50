"""A trained predictor: a family plus conformal calibration, an OOD envelope and few-shot offsets.

Calibration is cross-conformal: grouped out-of-fold predictions on the training data give the
conformity scores, then the family is fitted on every row. Groups follow the task's split for
devices seen in training, and leave one device out for a device known only by its spec sheet, so
the interval reflects the error on what a user brings new; see ``Predictor.fit``.

Few-shot: the predictor keeps its training data; ``adapted`` returns a copy in which measurements of
a device are added to it with a high weight and the family is refitted, then what error remains on
them becomes a per-device median offset. The device's intervals come from a simulation of the
same K-shot adaptation on each training device held out in calibration (or, trained on a single
device, from the leave-one-out spread of the shots' residuals under the model as trained).
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from preflight.features import Features, concat
from preflight.models.conformal import Conformal
from preflight.models.envelope import Envelope
from preflight.models.families import FAMILIES, make_family, targets
from preflight.models.families.targets import present
from sklearn.model_selection import GroupKFold

CALIBRATION_FOLDS = 4
#: Splits with at most this many groups leave one group out at a time.
LEAVE_ONE_OUT_MAX_GROUPS = 20
#: A calibration stratum with fewer scores than this falls back to the pooled scores of its side.
MIN_STRATUM_SCORES = 30
#: Weight of one measurement of an adapted device against one training row when refitting
#: (chosen on DeepBench leave-one-device-out with 10 shots: 5 → 9.0%, 20 → 8.7%, 50 → 9.8% median APE).
SHOT_WEIGHT = 20.0
#: Simulated K-shot scores kept per target (a random subset when there are more).
MAX_SHOT_SCORES = 20_000


@dataclass
class Estimates:
    """Point estimates and intervals per target, and the out-of-distribution reasons per row."""

    value: pd.DataFrame
    low: pd.DataFrame
    high: pd.DataFrame
    reasons: list[list[str]]

    def records(self) -> list[dict]:
        """One dict per row: ``{target: {value, low, high}, ood, warnings}`` (NaN and infinity as None)."""

        def column(frame: pd.DataFrame, target: str) -> list:
            values = frame[target].to_numpy(dtype=float)
            return np.where(np.isfinite(values), values, np.nan).astype(object).tolist()

        bounds = {
            t: (column(self.value, t), column(self.low, t), column(self.high, t)) for t in self.value.columns
        }
        out = []
        for i, reasons in enumerate(self.reasons):
            record = {
                t: {"value": _none(v[i]), "low": _none(lo[i]), "high": _none(hi[i])}
                for t, (v, lo, hi) in bounds.items()
            }
            missing = [
                f"no {t} estimate: the input lacks the scale it is predicted relative to (e.g. the device's tdp_w)"
                for t, estimate in record.items()
                if estimate["value"] is None
            ]
            out.append(record | {"ood": bool(reasons), "warnings": reasons + missing})
        return out


def _none(x: float) -> float | None:
    return None if x != x else x  # NaN is the only value unequal to itself


def _folds(groups: pd.Series, n_folds: int) -> list[tuple[np.ndarray, np.ndarray]]:
    n_groups = groups.nunique()
    if n_groups < 2:
        raise ValueError("calibration needs at least two groups of training rows")
    return list(GroupKFold(n_splits=min(n_folds, n_groups)).split(groups, groups=groups))


class Predictor:
    """``fit`` on features, targets and groups; ``predict`` with intervals at any coverage."""

    def __init__(
        self,
        task: str,
        family: str,
        *,
        seed: int = 0,
        calibration_folds: int = CALIBRATION_FOLDS,
        params: dict | None = None,
    ) -> None:
        self.task, self.family, self.seed, self.calibration_folds = task, family, seed, calibration_folds
        self.params = params or {}  # the family's hyperparameters, beyond its defaults

    def _new_family(self):
        return make_family(self.family, self.seed, **self.params)

    def fit(self, features: Features, Y: pd.DataFrame, groups: pd.Series) -> Predictor:
        """Calibrate on grouped out-of-fold residuals, then fit the family on every row.

        Two calibration passes: grouped by the task's split (scores for devices seen in training)
        and, with several devices, grouped by device (scores for a device known only by its spec
        sheet; ``meta["hardware"]``, where a featurizer gives it, holds out every setting of a
        machine together, e.g. all batch sizes of one GPU). Within each, rows of a featurizer's ``meta["stratum"]`` (e.g. a kernel configuration
        given or not) get their own scores when there are enough of them (Mondrian calibration).
        """
        self.oof_, self.oof_fold_ = self._out_of_fold(
            features, Y, groups, self.calibration_folds
        )  # CV metrics
        self.calibrators_ = self._calibrate(features, Y, self.oof_, "seen")
        machines = features.meta.get("hardware", features.meta["device_id"])
        self.unseen_residuals_ = pd.DataFrame({"device_id": pd.Series(dtype=str)})
        if machines.nunique() >= 2:  # a user brings one new device at a time: leave one out where affordable
            n_folds = (
                machines.nunique()
                if machines.nunique() <= LEAVE_ONE_OUT_MAX_GROUPS
                else self.calibration_folds
            )
            unseen, _ = self._out_of_fold(features, Y, machines, n_folds)
            self.calibrators_ |= self._calibrate(features, Y, unseen, "unseen")
            self.unseen_residuals_ = _residual_table(Y, unseen, features.meta["device_id"])
        self.family_ = self.base_family_ = self._new_family().fit(features, Y)
        self.envelope_ = Envelope().fit(features.X, features.meta)
        devices = features.meta["device_id"].astype(str)
        self.target_devices_ = {t: sorted(set(devices[present(t, Y[t])])) for t in Y.columns}
        self.train_ = (features, Y)  # kept for few-shot refits
        self.shot_data_: tuple[Features, pd.DataFrame] | None = None
        self.shots_: dict[str, dict[str, dict]] = {}
        return self

    def _out_of_fold(
        self, features: Features, Y: pd.DataFrame, groups: pd.Series, n_folds: int
    ) -> tuple[pd.DataFrame, np.ndarray]:
        """Estimates for every row from a family fitted without its group, and each row's fold."""
        oof = pd.DataFrame(np.nan, index=Y.index, columns=Y.columns)
        fold_of = np.zeros(len(Y), dtype=int)
        for fold, (train, held) in enumerate(_folds(groups.reset_index(drop=True), n_folds)):
            fold_of[held] = fold
            part = self._new_family().fit(features.take(train), Y.iloc[train].reset_index(drop=True))
            predicted = part.predict(features.take(held))
            oof.iloc[held, [oof.columns.get_loc(c) for c in predicted.columns]] = predicted.to_numpy()
        return oof, fold_of

    def _calibrate(self, features: Features, Y: pd.DataFrame, oof: pd.DataFrame, side: str) -> dict:
        """``{"<side>/<stratum>": {target: calibrator}}``, with ``"<side>/*"`` pooling every stratum."""
        strata = _strata(features.meta)
        out: dict[str, dict[str, Conformal]] = {}
        for target in Y.columns:
            usable = present(target, Y[target]) & present(target, oof[target])
            if not usable.any():
                continue
            out.setdefault(f"{side}/*", {})[target] = Conformal(target).conformalize(
                Y[target][usable], oof[target][usable]
            )
            for stratum in np.unique(strata[usable]):
                rows = usable & (strata == stratum)
                if rows.sum() >= MIN_STRATUM_SCORES:
                    calibrator = Conformal(target).conformalize(Y[target][rows], oof[target][rows])
                    out.setdefault(f"{side}/{stratum}", {})[target] = calibrator
        return out

    def calibrator(self, target: str, side: str, stratum: str) -> Conformal:
        """The most specific calibrator there are scores for."""
        for key in (f"{side}/{stratum}", f"{side}/*", f"seen/{stratum}", "seen/*"):
            if target in self.calibrators_.get(key, {}):
                return self.calibrators_[key][target]
        raise KeyError(f"no calibration scores for {target!r}")

    @property
    def targets(self) -> list[str]:
        return list(self.calibrators_["seen/*"])

    def adapted(self, features: Features, Y: pd.DataFrame) -> Predictor:
        """A copy refitted with measurements of one or more devices (replacing earlier ones of those).

        This predictor is left untouched, so requests in flight keep a consistent model. Targets
        this predictor has no calibration for are ignored.
        """
        Y = Y[[t for t in self.targets if t in Y]].reset_index(drop=True)
        new = copy.copy(self)
        new.shot_data_ = _merge_shots(self.shot_data_, features, Y)
        shot_features, shot_Y = new.shot_data_
        train_features, train_Y = self.train_
        both = concat([train_features, shot_features])
        weight = np.r_[np.ones(len(train_Y)), np.full(len(shot_Y), SHOT_WEIGHT)]
        new.family_ = self._new_family().fit(
            both, pd.concat([train_Y[Y.columns], shot_Y], ignore_index=True), sample_weight=weight
        )
        refit, base = new.family_.predict(shot_features), self.base_family_.predict(shot_features)
        new.shots_ = {}
        for device, rows in shot_features.meta.groupby("device_id").indices.items():
            per_target = {}
            for target in refit.columns.intersection(shot_Y.columns):
                residual = _residual(target, shot_Y[target].iloc[rows], refit[target].iloc[rows])
                if len(residual):
                    zero_shot = _residual(target, shot_Y[target].iloc[rows], base[target].iloc[rows])
                    pooled = self._k_shot_scores(target, len(residual)) if len(zero_shot) else np.array([])
                    per_target[target] = {"offset": float(np.median(residual))} | (
                        {"scores": pooled.tolist(), "scale": _spread(zero_shot)}
                        if len(pooled)
                        else {"scores": _loo_scores(zero_shot).tolist(), "scale": 1.0}
                    )
            new.shots_[device] = per_target
        return new

    def _k_shot_scores(self, target: str, k: int, draws: int = 20) -> np.ndarray:
        """Scores of a K-shot adaptation, simulated on every training device held out in calibration:
        K of its residuals fix an offset, the rest score against it, in units of the K residuals'
        spread (``_spread``), so that a device whose shots scatter widely gets a wide interval.
        Conservative: the refit on the shots does better than an offset alone."""
        if target not in self.unseen_residuals_:
            return np.array([])
        rng = np.random.default_rng(self.seed)
        scores = []
        for _, residual in self.unseen_residuals_.groupby("device_id")[target]:
            residual = residual.dropna().to_numpy()
            for _ in range(draws if len(residual) > k else 0):
                chosen = rng.choice(len(residual), size=k, replace=False)
                shots = residual[chosen]
                scores.append(np.abs(np.delete(residual, chosen) - np.median(shots)) / _spread(shots))
        scores = np.concatenate(scores) if scores else np.array([])
        return rng.choice(scores, MAX_SHOT_SCORES, replace=False) if len(scores) > MAX_SHOT_SCORES else scores

    def predict(self, features: Features, coverage: float = 0.9) -> Estimates:
        value = self.family_.predict(features)
        value = value[[t for t in self.targets if t in value]]
        low, high = value.copy(), value.copy()
        devices, strata = features.meta["device_id"].astype(str).to_numpy(), _strata(features.meta)
        for target in value.columns:
            offsets = np.array([self.shots_.get(d, {}).get(target, {}).get("offset", 0.0) for d in devices])
            value[target] = targets.clip(target, targets.shift(target, value[target].to_numpy(), offsets))
            low[target], high[target] = self._interval(
                target, value[target].to_numpy(), devices, strata, coverage
            )
        reasons = self.envelope_.reasons(features.X, features.meta)
        seen = set(self.envelope_.seen_.get("device_id", []))
        for i, device in enumerate(devices):
            if device in self.shots_:  # measured by the user: no longer unseen
                reasons[i] = [r for r in reasons[i] if not r.startswith(f"device_id={device} ")]
            measured = set(self.shots_.get(device, {}))
            reasons[i] += [
                f"{t}: device_id={device} has no {t} measurements in the training data"
                for t in value.columns
                if device in seen
                and t not in measured
                and device not in self.target_devices_.get(t, [device])
            ]
        return Estimates(value, low, high, reasons)

    def probability_above(
        self, features: Features, target: str, value: np.ndarray, threshold: np.ndarray
    ) -> np.ndarray:
        """P(target > threshold) for rows whose estimates (from ``predict``) are ``value``, from the
        signed calibration residuals of each row's side and stratum."""
        devices = features.meta["device_id"].astype(str).to_numpy()
        value, threshold = (
            np.asarray(value, float),
            np.broadcast_to(np.asarray(threshold, float), value.shape),
        )
        out = np.empty_like(value)
        for key, rows in self._calibration_groups(devices, _strata(features.meta)):
            out[rows] = self.calibrator(target, *key).probability_above(value[rows], threshold[rows])
        return out

    def _calibration_groups(self, devices: np.ndarray, strata: np.ndarray):
        """(side, stratum) and the rows of it: a device seen in training or not, and the row's stratum."""
        side = np.where(np.isin(devices, self.envelope_.seen_.get("device_id", [])), "seen", "unseen")
        for key in set(zip(side, strata)):
            yield key, (side == key[0]) & (strata == key[1])

    def _interval(
        self, target: str, value: np.ndarray, devices: np.ndarray, strata: np.ndarray, coverage: float
    ) -> tuple[np.ndarray, np.ndarray]:
        low, high = np.empty_like(value), np.empty_like(value)
        for key, rows in self._calibration_groups(devices, strata):
            low[rows], high[rows] = self.calibrator(target, *key).interval(value[rows], coverage)
        for device in set(devices) & set(self.shots_):
            shots = self.shots_[device].get(target, {})
            own = Conformal.from_scores(target, shots.get("scores", []))
            if np.isfinite(own.quantile(coverage)):
                rows = devices == device
                low[rows], high[rows] = own.interval(value[rows], coverage, scale=shots["scale"])
        return targets.clip(target, low), targets.clip(target, high)

    def save(self, directory: Path) -> None:
        directory = Path(directory)
        self.base_family_.save(
            directory / "family"
        )  # adaptations are not saved: they replay from measurements
        keys = [(key, target) for key, per_target in self.calibrators_.items() for target in per_target]
        calibrators = [self.calibrators_[k][t] for k, t in keys]
        np.savez_compressed(
            directory / "scores.npz", *(c.scores_ for c in calibrators)
        )  # what any version reads
        if all(c.residuals_ is not None for c in calibrators):
            np.savez_compressed(directory / "residuals.npz", *(c.residuals_ for c in calibrators))
            np.savez_compressed(directory / "estimates.npz", *(c.estimates_ for c in calibrators))
        _table(*self.train_).to_parquet(directory / "train.parquet")
        self.unseen_residuals_.to_parquet(directory / "unseen_residuals.parquet")
        state = {
            "task": self.task,
            "family": self.family,
            "seed": self.seed,
            "calibration_folds": self.calibration_folds,
            "params": self.params,
            "calibrators": keys,
            "envelope": self.envelope_.state(),
            "target_devices": self.target_devices_,
        }
        (directory / "predictor.json").write_text(json.dumps(state))

    @classmethod
    def load(cls, directory: Path) -> Predictor:
        directory = Path(directory)
        state = json.loads((directory / "predictor.json").read_text())
        predictor = cls(
            state["task"],
            state["family"],
            seed=state["seed"],
            calibration_folds=state["calibration_folds"],
            params=state["params"],
        )
        predictor.family_ = predictor.base_family_ = FAMILIES[state["family"]].load(directory / "family")
        predictor.calibrators_ = _load_calibrators(directory, state["calibrators"])
        predictor.envelope_ = Envelope.from_state(state["envelope"])
        predictor.target_devices_ = state.get(
            "target_devices", {}
        )  # absent from predictors saved before issue 4
        predictor.train_ = _untable(pd.read_parquet(directory / "train.parquet"))
        residuals = directory / "unseen_residuals.parquet"  # absent from predictors saved before issue 4
        predictor.unseen_residuals_ = (
            pd.read_parquet(residuals) if residuals.exists() else pd.DataFrame({"device_id": []})
        )
        predictor.shot_data_, predictor.shots_ = None, {}
        return predictor


def _load_calibrators(directory: Path, keys: list) -> dict[str, dict[str, Conformal]]:
    """Calibrators from signed residuals and their estimates, or from the |residuals| alone where a
    predictor saved none (before issue 5): intervals, but no probabilities, from those."""
    out: dict[str, dict[str, Conformal]] = {}
    if not (directory / "residuals.npz").exists():
        with np.load(directory / "scores.npz") as scores:
            for i, (key, target) in enumerate(keys):
                out.setdefault(key, {})[target] = Conformal.from_scores(target, scores[f"arr_{i}"])
        return out
    with np.load(directory / "residuals.npz") as residuals, np.load(directory / "estimates.npz") as estimates:
        for i, (key, target) in enumerate(keys):
            calibrator = Conformal.from_residuals(target, residuals[f"arr_{i}"], estimates[f"arr_{i}"])
            out.setdefault(key, {})[target] = calibrator
    return out


def _strata(meta: pd.DataFrame) -> np.ndarray:
    return meta["stratum"].astype(str).to_numpy() if "stratum" in meta else np.full(len(meta), "all")


def _aligned_residual(target: str, y: pd.Series, predicted: pd.Series) -> np.ndarray:
    """The residual of every row, NaN where the measurement or the estimate is unusable."""
    ok = present(target, y) & present(target, predicted)
    residual = np.full(len(y), np.nan)
    residual[ok] = targets.residual(target, y[ok].to_numpy(dtype=float), predicted[ok].to_numpy(dtype=float))
    return residual


def _residual(target: str, y: pd.Series, predicted: pd.Series) -> np.ndarray:
    """The residuals of the rows where both sides are usable."""
    residual = _aligned_residual(target, y, predicted)
    return residual[~np.isnan(residual)]


def _residual_table(Y: pd.DataFrame, predicted: pd.DataFrame, devices: pd.Series) -> pd.DataFrame:
    """Residuals per row and target, beside each row's device."""
    return pd.DataFrame(
        {"device_id": devices.astype(str).to_numpy()}
        | {t: _aligned_residual(t, Y[t], predicted[t]) for t in Y.columns}
    )


#: Floor of a spread of residuals (1% on a log scale), so that near-identical shots do not give a zero-width interval.
MIN_SPREAD = 0.01


def _spread(residual: np.ndarray) -> float:
    """Mean absolute deviation of residuals from their median."""
    return max(float(np.mean(np.abs(residual - np.median(residual)))), MIN_SPREAD)


def _loo_scores(residual: np.ndarray) -> np.ndarray:
    """|r_i - median of the others|: how far a new measurement lies from an offset fitted without it."""
    if len(residual) < 2:
        return np.array([])
    return np.array([abs(r - np.median(np.delete(residual, i))) for i, r in enumerate(residual)])


def _merge_shots(
    old: tuple[Features, pd.DataFrame] | None, features: Features, Y: pd.DataFrame
) -> tuple[Features, pd.DataFrame]:
    """Earlier measurements, less those of the devices measured anew, plus the new ones."""
    if old is None:
        return features, Y.reset_index(drop=True)
    keep = np.flatnonzero(~old[0].meta["device_id"].isin(set(features.meta["device_id"])).to_numpy())
    return concat([old[0].take(keep), features]), pd.concat([old[1].iloc[keep], Y], ignore_index=True)


_PARTS = ("X", "reference", "meta")


def _table(features: Features, Y: pd.DataFrame) -> pd.DataFrame:
    """Features and targets as one flat table with prefixed columns (for parquet)."""
    frames = [getattr(features, part).add_prefix(f"{part}:") for part in _PARTS] + [Y.add_prefix("y:")]
    return pd.concat([f.reset_index(drop=True) for f in frames], axis=1)


def _untable(table: pd.DataFrame) -> tuple[Features, pd.DataFrame]:
    def part(prefix: str) -> pd.DataFrame:
        columns = [c for c in table.columns if c.startswith(f"{prefix}:")]
        return table[columns].rename(columns=lambda c: c.split(":", 1)[1])

    return Features(*(part(p) for p in _PARTS)), part("y")
