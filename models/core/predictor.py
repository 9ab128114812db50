"""A trained predictor: a family plus conformal calibration, an OOD envelope and few-shot adaptation.

Calibration is cross-conformal (``calibration.py``): grouped out-of-fold predictions on the training
data give the conformity scores, then the family is fitted on every row. Groups follow the task's
split for devices seen in training, and leave one machine out for a device known only by its spec
sheet, so the interval reflects the error on what a user brings new. Few-shot adaptation
(``fewshot.py``) refits on a device's measurements; ``artifacts.py`` saves and loads predictors.
"""

from __future__ import annotations

import copy
import functools
import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from urllib.parse import quote

import numpy as np
import pandas as pd
from preflight.data.errors import DataError, UsageError
from preflight.features import Features, among, concat
from preflight.models.core import envelope, fewshot, metrics
from preflight.models.core.calibration import Calibration, RowGroups, residual_table, row_groups, strata
from preflight.models.core.envelope import Envelope
from preflight.models.core.fingerprint import Mix, References
from preflight.models.core.parallel import fan_out
from preflight.models.core.residual import ResidualAdaptation, ZeroShot
from preflight.models.core.targets import Target
from preflight.models.core.task import Task
from preflight.models.families import Family, family_class, make_family
from preflight.models.presentation import progress
from sklearn.model_selection import GroupKFold

CALIBRATION_FOLDS = 4
#: The coverage of the bounds computed beside the estimates that residual adaptation reads (it reads
#: only the estimates).
CALIBRATED_COVERAGE = 0.9
#: Splits with at most this many groups leave one group out at a time.
LEAVE_ONE_OUT_MAX_GROUPS = 20
#: From this many rows a family's fits run side by side on this machine's CPUs (``fan_out``'s ``local``
#: pool of threads); smaller fits take milliseconds and run one after another.
LOCAL_POOL_MIN_ROWS = 500


#: Every kind of warning code and what it says: the envelope's (``envelope.CODES``) and the predictor's.
CODES = envelope.CODES | {
    "unmeasured": "unmeasured:TARGET: the device was measured in training, but never for this target",
    "missing": "missing:TARGET: no estimate (null): the input lacks the scale the target is predicted "
    "relative to (e.g. the device's tdp_w)",
    "prior": "prior:TARGET: the estimate comes from a physical prior, not from measurements of the "
    "target; its interval spans the prior and is not calibrated",
    "adapted": "adapted:K: the estimate is adapted to K measurements of its subject (a kernel's "
    "synthesized designs)",
    "exact": "exact:TARGET: the value is fixed by definition, not estimated (a workload with no neighbours "
    "runs as it does alone)",
    "ambiguous": "ambiguous:NAME=ID: the device name fits several devices of the catalogue (GET "
    "/v1/devices/NAME lists them); the estimate is for ID, the one data sets mean by it",
}


@dataclass
class Estimates:
    """Point estimates and intervals per target, the out-of-distribution reason codes per row, and
    notes per row that qualify an estimate without putting the input out of distribution."""

    value: pd.DataFrame
    low: pd.DataFrame
    high: pd.DataFrame
    reasons: list[list[str]]
    notes: list[list[str]] = field(default_factory=list)

    def records(self) -> list[dict]:
        """One dict per row: ``{target: {value, low, high}, ood, warnings}`` (NaN and infinity as None;
        the warnings as :meth:`warnings` gives them)."""
        targets = list(self.value.columns)
        value, low, high = (_by_target(frame, targets) for frame in (self.value, self.low, self.high))
        per_target = [
            [{"value": v, "low": lo, "high": hi} for v, lo, hi in zip(*bounds)]
            for bounds in zip(_finite(value), _finite(low), _finite(high))
        ]
        return [
            dict(zip(targets, estimates)) | {"ood": bool(reasons), "warnings": warnings}
            for *estimates, reasons, warnings in zip(*per_target, self.reasons, self.warnings(value))
        ]

    def note(self, rows: Iterable[int], *codes: str) -> None:
        """Add notes (codes, after any the rows have) to some rows (positions). A row's notes are
        replaced, never changed in place, so rows that had none share one list of the codes."""
        if not self.notes:
            self.notes = [[]] * len(self.reasons)
        added = list(codes)
        for row in rows:
            self.notes[row] = [*self.notes[row], *added] if self.notes[row] else added

    def take(self, rows: np.ndarray) -> Estimates:
        """The estimates of some rows (positions)."""
        value, low, high = (
            frame.iloc[rows].reset_index(drop=True) for frame in (self.value, self.low, self.high)
        )
        notes = [self.notes[i] for i in rows] if self.notes else []
        return Estimates(value, low, high, [self.reasons[i] for i in rows], notes)

    def warnings(self, value: np.ndarray | None = None) -> list[list[str]]:
        """Each row's warning codes: its reason codes, ``missing:TARGET`` for each target without an
        estimate, then its notes (``value``: the estimates by target, when already at hand)."""
        targets = list(self.value.columns)
        value = _by_target(self.value, targets) if value is None else value
        missing: dict[int, list[str]] = {}  # few rows lack an estimate: no list for every row
        for j, i in zip(*np.nonzero(~np.isfinite(value))):  # target by target: each row's in order
            missing.setdefault(int(i), []).append(f"missing:{targets[j]}")
        notes = self.notes or [[]] * len(self.reasons)  # one empty list, only read
        return [
            reasons + missing.get(i, []) + noted
            for i, (reasons, noted) in enumerate(zip(self.reasons, notes))
        ]


def _by_target(frame: pd.DataFrame, targets: list[str]) -> np.ndarray:
    """A frame's target columns as floats, one row per target."""
    ordered = frame if list(frame.columns) == targets else frame[targets]  # selecting costs a copy
    return ordered.to_numpy(dtype=float).T


def _finite(array: np.ndarray) -> list[list[float | None]]:
    """An array as nested lists, NaN and infinity as None."""
    out = array.tolist()
    for i, j in zip(*np.nonzero(~np.isfinite(array))):
        out[i][j] = None
    return out


def folds(groups: pd.Series, n_folds: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Grouped folds: at most ``n_folds``, each holding out whole groups."""
    n_groups = groups.nunique()
    if n_groups < 2:
        raise DataError("calibration needs at least two groups of training rows")
    return list(GroupKFold(n_splits=min(n_folds, n_groups)).split(groups, groups=groups))


def _held_out_estimates(
    train: np.ndarray, held: np.ndarray, family: Callable[[], Family], features: Features, Y: pd.DataFrame
) -> pd.DataFrame:
    """A new family (``family()``) fitted on the training rows of a split: its estimates for the held-out
    rows."""
    return (
        family().fit(features.take(train), Y.iloc[train].reset_index(drop=True)).predict(features.take(held))
    )


class Predictor:
    """``fit`` on features, targets and groups; ``predict`` with intervals at any coverage."""

    def __init__(
        self, task: Task, family: str, *, seed: int = 0, calibration_folds: int = CALIBRATION_FOLDS,
        params: dict | None = None,
    ) -> None:  # fmt: skip
        self.task, self.family, self.seed, self.calibration_folds = task, family, seed, calibration_folds
        self.params = params or {}  # the family's hyperparameters, beyond its defaults
        self.shot_data_: tuple[Features, pd.DataFrame] | None = None
        self.shots_: fewshot.DeviceShots = {}
        self.zero_shot_: ZeroShot | None = None  # where measurements adapt by residuals
        self.residual_: ResidualAdaptation | None = None
        self.references_: References | None = None  # where measurements adapt by fingerprint
        self.mixes_: dict[str, dict[str, Mix]] = {}  # device -> target -> its fingerprint

    def new_family(self) -> Family:
        return self._family_maker()()

    def _family_maker(self) -> Callable[[], Family]:
        """What makes a new family of this predictor's kind: small, so that it travels to a cluster."""
        params = self.task.family_params.get(self.family, {}) | self.params
        return functools.partial(make_family, self.family, self.task.targets, self.seed, **params)

    def fit(self, features: Features, Y: pd.DataFrame, groups: pd.Series) -> Predictor:
        """Calibrate on grouped out-of-fold residuals (the task's split, then one machine out at a time
        when there are several), then fit the family on every row."""
        task = self.task
        Y = Y[[t for t in Y.columns if t in task.learned_targets]]
        self.oof_, self.oof_fold_ = self.out_of_fold(
            features, Y, folds(groups.reset_index(drop=True), self.calibration_folds), "calibration folds"
        )
        row_strata, devices = strata(features.meta, task.stratum_column), self._devices(features.meta)
        self.calibration_ = Calibration(task.targets)
        self.calibration_.add("seen", Y, self.oof_, row_strata)
        self.unseen_residuals_ = pd.DataFrame({"device_id": pd.Series(dtype=str)})
        machines = features.meta[task.machine] if task.machine else pd.Series(dtype=str)
        unseen = self.oof_
        if machines.nunique() >= 2:  # a user brings one new device at a time: leave one out where affordable
            splits = folds(machines.reset_index(drop=True), self._n_folds(machines))
            unseen, _ = self.out_of_fold(features, Y, splits, "unseen-device folds")
            self.calibration_.add("unseen", Y, unseen, row_strata)
            self.unseen_residuals_ = residual_table(task.targets, Y, unseen, devices)
        self._calibrate_siblings(features, Y, row_strata)
        if task.adaptation == "residual":
            self.zero_shot_ = self._zero_shot(features, Y)
        if task.primary_target not in self.targets:
            raise DataError(f"too few rows with {task.primary_target} to learn it ({len(Y)} rows in all)")
        with progress.step(f"{task.name} {self.family}: fit on every row"):
            self.family_ = self.base_family_ = self.new_family().fit(features, Y)
        if task.adaptation == "fingerprint" and task.device_column:
            with progress.step(f"{task.name} {self.family}: fingerprints simulated on every device"):
                self.references_ = References.of(features, task.device_column, task.machine_column)
                self.references_.simulate(self.family_, features, Y, unseen, devices, task.targets, self.seed)
        self.envelope_ = Envelope(task.envelope_columns).fit(features.X, features.meta)
        self.target_devices_ = {
            t: sorted(set(devices[task.targets[t].present(Y[t])])) for t in Y.columns if task.device_column
        }
        self.train_ = (features, Y)  # kept for few-shot refits
        return self

    def _zero_shot(self, features: Features, Y: pd.DataFrame) -> ZeroShot:
        """Each training subject's out-of-fold residuals (the calibration folds hold subjects out),
        where residual adaptation is simulated, and how good the estimates were there."""
        quality = {name: _zero_shot_quality(self.task.targets[name], Y[name], self.oof_[name]) for name in Y}
        return ZeroShot.of(
            self.task.targets, Y, self.oof_, self._subjects(features.meta), features.X, quality, self.seed
        )

    def _n_folds(self, groups: pd.Series) -> int:
        """Leave one group out where affordable, else the calibration folds."""
        return groups.nunique() if groups.nunique() <= LEAVE_ONE_OUT_MAX_GROUPS else self.calibration_folds

    def _calibrate_siblings(self, features: Features, Y: pd.DataFrame, row_strata: np.ndarray) -> None:
        """The ``sibling`` side: a device never measured whose machine (architecture) was, calibrated on
        the devices of machines with at least two, held out a few devices at a time (at most the
        calibration folds) while every other row trains (an A100 80GB beside the A100 40GB errs less
        than a generation never seen)."""
        shared, splits = self.sibling_splits(features.meta)
        if not splits:
            return
        sibling, _ = self.out_of_fold(features, Y, splits, "sibling-device folds")
        self.calibration_.add("sibling", Y.iloc[shared], sibling.iloc[shared], row_strata[shared])

    def sibling_splits(self, meta: pd.DataFrame) -> tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray]]]:
        """The rows of devices whose machine has at least two, and the folds that hold a few of those
        devices out at a time while every other row trains (none where fewer than two such devices)."""
        machine, device = self.task.machine_column, self.task.device_column
        if machine is None or device is None or machine == device:
            return np.array([], dtype=int), []
        devices, machines = meta[device].astype(str), meta[machine].astype(str)
        shared = np.flatnonzero(machines.map(devices.groupby(machines).nunique()).to_numpy() >= 2)
        if devices.iloc[shared].nunique() < 2:
            return shared, []
        splits = [
            (np.setdiff1d(np.arange(len(meta)), shared[held]), shared[held])
            for _, held in folds(devices.iloc[shared].reset_index(drop=True), self.calibration_folds)
        ]
        return shared, splits

    def out_of_fold(
        self, features: Features, Y: pd.DataFrame, splits: list[tuple[np.ndarray, np.ndarray]], label: str
    ) -> tuple[pd.DataFrame, np.ndarray]:
        """Estimates for the held-out rows of each split from a family fitted on its training rows (NaN
        for rows no split holds out), and each row's fold (``label`` names the folds on the progress
        bar)."""
        oof = pd.DataFrame(np.nan, index=Y.index, columns=Y.columns)
        fold_of = np.zeros(len(Y), dtype=int)
        parts = fan_out(
            _held_out_estimates,
            splits,
            f"{self.task.name} {self.family}: {label}",
            shared={"family": self._family_maker(), "features": features, "Y": Y},
            local=family_class(self.family).concurrent and len(Y) >= LOCAL_POOL_MIN_ROWS,
        )
        for fold, ((_, held), predicted) in enumerate(zip(splits, parts)):
            fold_of[held] = fold
            oof.iloc[held, [oof.columns.get_loc(c) for c in predicted.columns]] = predicted.to_numpy()
        return oof, fold_of

    @property
    def targets(self) -> list[str]:
        return self.calibration_.calibrated

    def _devices(self, meta: pd.DataFrame) -> np.ndarray:
        column = self.task.device_column
        return meta[column].astype(str).to_numpy() if column else np.full(len(meta), "")

    def _sides(self, meta: pd.DataFrame) -> np.ndarray:
        """``seen`` for rows of a device measured in training (every row, for a task without devices),
        ``sibling`` for a device whose machine (architecture) was, ``unseen`` for the others."""
        devices = self._devices(meta)
        if not self.task.device_column:
            return np.full(len(devices), "seen")
        seen = among(devices, self.envelope_.seen_.get(self.task.device_column, []))
        machine = self.task.machine_column
        if machine is None or machine == self.task.device_column or machine not in meta:
            return np.where(seen, "seen", "unseen")
        known = among(meta[machine].astype(str).to_numpy(), self._machines)
        return np.where(seen, "seen", np.where(known, "sibling", "unseen"))

    def _row_groups(self, meta: pd.DataFrame) -> RowGroups:
        """The rows of each (side, stratum) that calibrate them."""
        return row_groups(self._sides(meta), strata(meta, self.task.stratum_column))

    @functools.cached_property
    def _machines(self) -> np.ndarray:
        """The machines (architectures) measured in training."""
        return self.train_[0].meta[self.task.machine].astype(str).unique()

    def _subjects(self, meta: pd.DataFrame) -> np.ndarray:
        """Each row's value of what measurements adapt (its device, its kernel)."""
        column = self.task.subject
        return meta[column].astype(str).to_numpy() if column else np.full(len(meta), "")

    def design_space(self, features: Features) -> np.ndarray:
        """Rows as points of the space residual adaptation measures nearness in (each feature in units
        of its spread within a subject); a task adapting otherwise has no such space."""
        if self.zero_shot_ is None:
            raise UsageError(f"task {self.task.name!r} does not adapt by residuals: no design space")
        return self.zero_shot_.scaler(features.X)

    def adapted(self, features: Features, Y: pd.DataFrame) -> Predictor:
        """A copy adapted to measurements of one or more subjects (devices, kernels), replacing earlier
        ones of those.

        Adaptation is local: a family that adapts itself (``adapt``: per-device parameters) updates
        the measured devices only; a task adapting by residuals corrects the measured subjects'
        answers only (``residual.py``); any other family is refitted with the shots and answers for the
        measured devices only, while every other device keeps the unadapted family's answer, bit for
        bit. This predictor is left untouched, so requests in flight keep a consistent model. Targets
        this predictor has no calibration for are ignored."""
        column = self.task.subject
        if column is None:
            raise DataError(f"task {self.task.name!r} has nothing that measurements adapt")
        Y = Y[[t for t in self.targets if t in Y]].reset_index(drop=True)
        new = copy.copy(self)
        new.shot_data_ = fewshot.merge(self.shot_data_, features, Y, column)
        shot_features, shot_Y = new.shot_data_
        if self.references_ is not None:
            new.mixes_ = self._fingerprints(shot_features, shot_Y)
            return new
        if self.zero_shot_ is not None:
            unadapted = self._calibrated(shot_features, CALIBRATED_COVERAGE)[0]
            new.residual_ = ResidualAdaptation.fit(
                self.zero_shot_, shot_features, shot_Y, unadapted, self._subjects(shot_features.meta)
            )
            return new
        if self._adapts_itself:
            new.family_ = self.base_family_.adapt(shot_features, shot_Y)  # type: ignore[attr-defined]
        else:
            train_features, train_Y = self.train_
            both = pd.concat([train_Y[Y.columns], shot_Y], ignore_index=True)
            weight = fewshot.weights(len(train_Y), len(shot_Y))
            new.family_ = self.new_family().fit(
                concat([train_features, shot_features]), both, sample_weight=weight
            )
        refit, base = new.family_.predict(shot_features), self.base_family_.predict(shot_features)
        devices = shot_features.meta[column].astype(str)
        new.shots_ = fewshot.device_shots(
            self.task.targets,
            devices,
            shot_Y,
            refit,
            base,
            self.unseen_residuals_,
            self.seed,
            offset=not self._adapts_itself,
        )
        return new

    def _fingerprints(self, features: Features, Y: pd.DataFrame) -> dict[str, dict[str, Mix]]:
        """Each measured device's fingerprint per target: its shots read as a mix of the references'
        estimates and its own."""
        devices, out = self._devices(features.meta), {}
        for device in np.unique(devices):
            rows = np.flatnonzero(devices == device)
            bases, per_target = self.fingerprint_bases(features.take(rows)), {}
            for name in (t for t in Y.columns if t in bases):
                target = self.task.targets[name]
                present = np.flatnonzero(target.present(Y[name].iloc[rows]))
                if len(present) < 2:
                    continue
                z = target.kind.to_scale(Y[name].iloc[rows].to_numpy(dtype=float)[present])
                per_target[name] = Mix.fit(bases[name][present], z)
            out[str(device)] = per_target
        return out

    def fingerprint_bases(self, features: Features, own: pd.DataFrame | None = None) -> dict[str, np.ndarray]:
        """Per target, the references' estimates and the row's own (``own``: the unadapted family's
        estimates when already at hand), on the target's scale."""
        assert self.references_ is not None
        targets = {name: self.task.targets[name] for name in self.targets}
        own = self.base_family_.predict(features) if own is None else own
        return {
            name: np.column_stack([basis, targets[name].kind.to_scale(own[name].to_numpy(dtype=float))])
            for name, basis in self.references_.bases(self.base_family_, features, targets).items()
        }

    @property
    def _adapts_itself(self) -> bool:
        """Whether the family adapts to measurements by itself (``adapt``: local by construction)
        rather than by a refit with the shots."""
        return hasattr(self.base_family_, "adapt")

    @property
    def adaptation(self) -> str | None:
        """A digest of the measurements this predictor is adapted to (None: not adapted), so that two
        different answers never carry the same model label."""
        if self.shot_data_ is None:
            return None
        features, Y = self.shot_data_
        table = pd.concat([features.X, Y], axis=1).assign(device=self._subjects(features.meta))
        digest = hashlib.sha256(pd.util.hash_pandas_object(table, index=False).to_numpy().tobytes())
        return f"shots:{len(Y)}:{digest.hexdigest()[:12]}"

    def _estimate(self, features: Features) -> pd.DataFrame:
        """The family's estimates: the adapted family's for rows of measured devices, the unadapted
        family's for every other row."""
        if self.mixes_:
            return self._mixed(features)
        if self.family_ is self.base_family_ or self._adapts_itself:
            return self.family_.predict(features)
        measured = among(self._devices(features.meta), list(self.shots_))
        value = self.base_family_.predict(features)
        if measured.any():
            adapted = self.family_.predict(features.take(np.flatnonzero(measured)))
            value.iloc[np.flatnonzero(measured), [value.columns.get_loc(c) for c in adapted]] = (
                adapted.to_numpy()
            )
        return value

    def _mixed(self, features: Features) -> pd.DataFrame:
        """The unadapted family's estimates, the fingerprinted devices' rows replaced by their mix."""
        value = self.base_family_.predict(features)
        devices = self._devices(features.meta)
        for device in set(devices) & set(self.mixes_):
            rows = np.flatnonzero(devices == device)
            bases = self.fingerprint_bases(features.take(rows), own=value.iloc[rows])
            for name, mix in self.mixes_[device].items():
                value.iloc[rows, value.columns.get_loc(name)] = self.task.targets[name].kind.from_scale(
                    mix(bases[name])
                )
        return value

    def _fingerprint_bounds(
        self, features: Features, name: str, estimate: np.ndarray, coverage: float, bounds: tuple
    ) -> tuple[np.ndarray, np.ndarray]:
        """``bounds`` with the fingerprinted devices' rows replaced by their own intervals: the simulated
        score quantile of their stratum and shot count times their shots' (shrunk) spread."""
        low, high = bounds
        if not self.mixes_:
            return low, high
        assert self.references_ is not None
        target, devices = self.task.targets[name], self._devices(features.meta)
        context = features.X[self.references_.columns].to_numpy(dtype=float)
        for device in set(devices) & set(self.mixes_):
            mix = self.mixes_[device].get(name)
            rows = devices == device
            if mix is None:
                continue
            stratum = "no-spec" if np.isnan(context[rows]).all() else "spec"
            half_width = self.references_.half_width(name, target, stratum, mix, coverage)
            if np.isfinite(half_width):
                low[rows], high[rows] = target.interval(estimate[rows], half_width)
        return low, high

    def predict(self, features: Features, coverage: float = 0.9) -> Estimates:
        value, low, high = self._calibrated(features, coverage)
        subjects = self._subjects(features.meta)
        notes: list[list[str]] = []
        if self.residual_ is not None and self.zero_shot_ is not None:
            self.residual_.apply(features, subjects, value, low, high, self.zero_shot_, coverage)
            notes = [[f"adapted:{k}"] if (k := self.residual_.shots(s)) else [] for s in subjects]
        reasons = self._reasons(features, self._devices(features.meta), subjects, list(value.columns))
        estimates = Estimates(value, low, high, reasons, notes)
        if self.task.derive is not None:
            self.task.derive(features, estimates)
        return estimates

    def _calibrated(self, features: Features, coverage: float) -> tuple[pd.DataFrame, ...]:
        """Estimates and their bounds, calibrated, with the devices' shots (before residual adaptation)."""
        value = self._estimate(features)
        value = value[[t for t in self.targets if t in value]]
        low, high = value.copy(), value.copy()
        devices, groups = self._devices(features.meta), self._row_groups(features.meta)
        shot_devices = self._answered_by_shots(features.meta, devices)
        for name in value.columns:
            target = self.task.targets[name]
            estimate = target.clip(
                target.shift(value[name].to_numpy(), fewshot.offsets(self.shots_, devices, name))
            )
            estimate = self.calibration_.recalibrated(name, estimate, groups)
            bounds = self.calibration_.interval(name, estimate, groups, coverage)
            bounds = fewshot.intervals(self.shots_, target, name, estimate, shot_devices, coverage, bounds)
            bounds = self._fingerprint_bounds(features, name, estimate, coverage, bounds)
            floor = features.reference[name].to_numpy(dtype=float) if target.at_least_reference else None
            value[name], low[name], high[name] = (target.clip(v, floor) for v in (estimate, *bounds))
        return value, low, high

    def _answered_by_shots(self, meta: pd.DataFrame, devices: np.ndarray) -> np.ndarray:
        """Each row's device where its answer comes from the device's shots, else "" (its calibrated
        interval stands): a family that adapts itself may keep some measured units as they were (physics:
        a unit measured once, or whose shots predict each other no better than the model did)."""
        if not hasattr(self.family_, "moved"):
            return devices
        return np.where(self.family_.moved(meta), devices, "")

    def _reasons(
        self, features: Features, devices: np.ndarray, subjects: np.ndarray, targets: list[str]
    ) -> list[list[str]]:
        """Codes of why each row lies outside what the model has seen: the envelope's, less the subject
        (device, kernel) for subjects measured since, plus ``unmeasured:TARGET`` for targets never
        measured on a device seen in training."""
        reasons = self.envelope_.reasons(features.X, features.meta)
        measured = (
            list(self.shots_) + list(self.mixes_) + list(self.residual_.corrections if self.residual_ else [])
        )
        for i in np.flatnonzero(among(subjects, measured)).tolist():  # measured by the user
            reasons[i] = [r for r in reasons[i] if r != f"unseen:{self.task.subject}={subjects[i]}"]
        column = self.task.device_column
        if column is None:
            return reasons
        seen = among(devices, self.envelope_.seen_.get(column, []))
        for target in (t for t in targets if t in self.target_devices_):
            shot = [device for device, measured in self.shots_.items() if target in measured]
            lacking = seen & ~among(devices, [*self.target_devices_[target], *shot])
            for i in np.flatnonzero(lacking).tolist():
                reasons[i].append(f"unmeasured:{target}")
        return reasons

    def explain(self, code: str) -> str:
        """The full text of a warning code, with the training range it refers to; a warning that is
        not a code (a task's note) is its own text."""
        kind, _, subject = code.partition(":")
        if kind == "unmeasured":
            return f"{subject}: the device has no {subject} measurements in the training data"
        if kind == "missing":
            return (
                f"no {subject} estimate: the input lacks the scale it is predicted relative to (e.g. tdp_w)"
            )
        if kind == "adapted":
            return f"adapted to {subject} measurements of its {self.task.subject} (``adapted:K``)"
        if kind == "unseen" and self.zero_shot_ is not None and subject.startswith(f"{self.task.subject}="):
            quality = "; ".join(f"{t} {q}" for t, q in self.zero_shot_.quality.items())
            return (
                f"{self.envelope_.explain(code) or code}: a zero-shot estimate; on {self.task.subject}s held "
                f"out in training: {quality}. Measurements of it adapt its estimates"
            )
        if kind == "ambiguous":
            name, _, device = subject.rpartition("=")
            return (
                f"{name!r} fits several devices (GET /v1/devices/{quote(name)} lists them); the estimate is "
                f"for {device}, the one data sets mean by it: name a device exactly to choose another"
            )
        if kind == "exact":
            return f"{subject}: fixed by definition for this input, not estimated; its interval is the value"
        if kind == "prior":
            return (
                f"{subject}: the estimate comes from a physical prior, never from measurements of it; "
                "its interval spans the prior and is not calibrated"
            )
        return self.envelope_.explain(code) or code

    def probability_above(
        self, features: Features, target: str, value: np.ndarray, threshold: np.ndarray | float
    ) -> np.ndarray:
        """P(target > threshold) for rows whose estimates (from ``predict``) are ``value``, from the
        signed calibration residuals of each row's side and stratum."""
        value = np.asarray(value, float)
        threshold = np.broadcast_to(np.asarray(threshold, float), value.shape)
        return self.calibration_.probability_above(target, value, threshold, self._row_groups(features.meta))


def _zero_shot_quality(target: Target, y: pd.Series, estimate: pd.Series) -> str:
    """How good estimates for subjects never seen were, in words: ROC AUC for an event, the median
    error otherwise."""
    ok = target.present(y) & target.present(estimate)
    if not ok.any():
        return "not measured"
    if target.kind.event:
        auc = metrics.classification(y[ok].to_numpy(), estimate[ok].to_numpy()).get("auc")
        return "not measured" if auc is None else f"ROC AUC {auc:.2f}"
    error = float(target.error(y[ok], estimate[ok]).median())
    return f"median {target.error_label} {error:.3g}"
