"""Honest evaluation: grouped cross-validation, explicit train/test files, and few-shot devices.

Every result carries the task's baseline family (``roofline`` for GEMM), evaluated on the same folds.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from preflight.data.catalogue import Catalogue
from preflight.data.errors import DataError, UsageError
from preflight.features import Features
from preflight.models.core import metrics
from preflight.models.core.datasets import register_measured_devices
from preflight.models.core.fingerprint import most_informative
from preflight.models.core.parallel import fan_out
from preflight.models.core.predictor import LEAVE_ONE_OUT_MAX_GROUPS, Estimates, Predictor
from preflight.models.core.targets import Target
from preflight.models.core.task import Task
from preflight.models.presentation import progress
from sklearn.model_selection import GroupKFold, LeaveOneGroupOut

#: Nominal coverages at which a cross-validation also takes the model's intervals (a calibration curve).
CALIBRATION_LEVELS = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99)


@dataclass
class Outcome:
    """Out-of-sample estimates for a set of rows, for a model and the baseline."""

    y: pd.DataFrame
    model: Estimates
    baseline: Estimates
    groups: pd.Series
    test_index: np.ndarray  # positions of the evaluated rows in the input table
    n_train: int  # training rows per fit (the mean over folds)
    meta: pd.DataFrame = field(default_factory=pd.DataFrame)  # the evaluated rows' feature meta
    #: the model's (low, high) at each of ``CALIBRATION_LEVELS`` (cross-validation only)
    levels: dict[float, tuple[pd.DataFrame, pd.DataFrame]] = field(default_factory=dict)


def _fit(
    task: Task,
    family: str,
    features: Features,
    Y: pd.DataFrame,
    group: str,
    seed: int,
    params: dict | None = None,
) -> Predictor:
    predictor = Predictor(task, family, seed=seed, params=params if family != task.baseline else None)
    return predictor.fit(features, Y, task.group_values(features.meta, group))


def _fold(
    train: np.ndarray, test: np.ndarray, setting: tuple, features: Features, Y: pd.DataFrame
) -> tuple[Estimates, Estimates, dict[float, Estimates]]:
    """One fold of a grouped cross-validation (``setting``: task, family, group, seed, params, coverage):
    the model's and the baseline's estimates for the held-out rows, and the model's at each
    calibration level."""
    task, family, group, seed, params, coverage = setting
    train_f, train_y, test_f = features.take(train), Y.iloc[train].reset_index(drop=True), features.take(test)
    model = _fit(task, family, train_f, train_y, group, seed, params)
    baseline = _fit(task, task.baseline, train_f, train_y, group, seed, params)
    estimates = model.predict(test_f, coverage)
    levels = {
        level: estimates if level == coverage else model.predict(test_f, level)
        for level in CALIBRATION_LEVELS
    }
    return estimates, baseline.predict(test_f, coverage), levels


def _concat(parts: list[Estimates]) -> Estimates:
    def stack(attr: str) -> pd.DataFrame:
        return pd.concat([getattr(p, attr) for p in parts], ignore_index=True)

    reasons = [r for p in parts for r in p.reasons]
    notes = [n for p in parts for n in (p.notes or [[] for _ in p.reasons])]
    return Estimates(stack("value"), stack("low"), stack("high"), reasons, notes)


def _splits(groups: pd.Series, seed: int, train_size: int | None):
    if train_size is not None:
        rng = np.random.default_rng(seed)
        unique = groups.unique()
        if train_size >= len(unique):
            raise UsageError(f"--train-size {train_size} leaves no test groups (there are {len(unique)})")
        chosen = set(rng.choice(unique, size=train_size, replace=False))
        mask = groups.isin(chosen).to_numpy()
        return [(np.flatnonzero(mask), np.flatnonzero(~mask))]
    if groups.nunique() < 2:
        raise DataError(f"a grouped split needs at least two groups; the data holds {groups.nunique()}")
    if groups.nunique() <= LEAVE_ONE_OUT_MAX_GROUPS:
        return list(LeaveOneGroupOut().split(groups, groups=groups))
    return list(GroupKFold(n_splits=5, shuffle=True, random_state=seed).split(groups, groups=groups))


def cross_validate(
    task: Task,
    rows: pd.DataFrame,
    catalogue: Catalogue,
    family: str,
    group: str,
    seed: int = 0,
    train_size: int | None = None,
    coverage: float = 0.9,
    params: dict | None = None,
    select: bool = True,
) -> Outcome:
    """Out-of-fold estimates where each fold holds out whole groups. ``rows`` are a loaded table, narrowed
    to the task's rows (``Task.rows``) unless ``select`` is off: they already are (``task_data``'s)."""
    if select:
        rows = task.rows(rows)
    register_measured_devices(task, rows, catalogue, persist=False)
    features, Y = task.featurize(rows, catalogue), task.target_frame(rows)
    groups = task.group_values(features.meta, group)
    splits = _splits(groups, seed, train_size)
    folds = fan_out(
        _fold,
        splits,
        f"{task.name} {family} vs {task.baseline}: {group} splits",
        shared={"setting": (task, family, group, seed, params, coverage), "features": features, "Y": Y},
    )
    model_parts = [model for model, _, _ in folds]
    baseline_parts = [baseline for _, baseline, _ in folds]
    level_parts = {level: [levels[level] for _, _, levels in folds] for level in CALIBRATION_LEVELS}
    test_parts = [test for _, test in splits]
    order = np.concatenate(test_parts)
    levels = {level: _concat(parts) for level, parts in level_parts.items()}
    return Outcome(
        Y.iloc[order].reset_index(drop=True),
        _concat(model_parts),
        _concat(baseline_parts),
        groups.iloc[order].reset_index(drop=True),
        order,
        int(np.mean([len(tr) for tr, _ in splits])),
        features.meta.iloc[order].reset_index(drop=True),
        {level: (estimates.low, estimates.high) for level, estimates in levels.items()},
    )


def train_test(
    task: Task,
    train_rows: pd.DataFrame,
    test_rows: pd.DataFrame,
    catalogue: Catalogue,
    family: str,
    group: str,
    seed: int = 0,
    shots: int = 0,
    coverage: float = 0.9,
    params: dict | None = None,
    informative: bool = False,
) -> Outcome:
    """Fit on one file, test on another; with ``shots``, K rows per test subject (a device, an FPGA
    kernel) are given as measurements: drawn at random, or with ``informative`` the K that the
    model recommends measuring (a task adapting by fingerprint: ``fingerprint.most_informative``)."""
    train_rows, test_rows = task.rows(train_rows), task.rows(test_rows)
    for rows in (train_rows, test_rows):
        register_measured_devices(task, rows, catalogue, persist=False)
    train_f, train_y = task.featurize(train_rows, catalogue), task.target_frame(train_rows)
    test_f, test_y = task.featurize(test_rows, catalogue), task.target_frame(test_rows)
    if shots and task.subject is None:
        raise UsageError(
            f"--shots adapts to measurements of a device or a kernel; task {task.name!r} adapts to neither"
        )
    devices = test_f.meta[task.subject] if task.subject else task.group_values(test_f.meta, group)
    predictors = [
        _fit(task, name, train_f, train_y, group, seed, params)
        for name in progress.track((family, task.baseline), f"{task.name}: model and baseline")
    ]
    shot_rows = (
        _informative_rows(predictors[0], test_f, devices, shots)
        if informative
        else _shot_rows(devices, shots, seed)
    )
    keep = np.setdiff1d(np.arange(len(test_rows)), shot_rows)
    estimates: list[Estimates] = []
    for predictor in predictors:
        if shots:
            predictor = predictor.adapted(
                test_f.take(shot_rows), test_y.iloc[shot_rows].reset_index(drop=True)
            )
        estimates.append(predictor.predict(test_f.take(keep), coverage))
    model, baseline = estimates
    return Outcome(
        test_y.iloc[keep].reset_index(drop=True),
        model,
        baseline,
        devices.iloc[keep].reset_index(drop=True),
        keep,
        len(train_rows),
        test_f.meta.iloc[keep].reset_index(drop=True),
    )


def _informative_rows(predictor: Predictor, features: Features, devices: pd.Series, shots: int) -> np.ndarray:
    """Per test device, the ``shots`` rows whose measurement pins its fingerprint down best."""
    basis = predictor.fingerprint_bases(features)[predictor.task.primary_target]
    chosen = [
        rows[most_informative(basis[rows], min(shots, len(rows) - 1))]
        for rows in devices.groupby(devices).indices.values()
    ]
    return np.sort(np.concatenate(chosen)).astype(int)


def _shot_rows(devices: pd.Series, shots: int, seed: int) -> np.ndarray:
    if shots <= 0:
        return np.array([], dtype=int)
    rng = np.random.default_rng(seed)
    chosen = [
        rng.choice(rows, size=min(shots, len(rows) - 1), replace=False)
        for rows in devices.groupby(devices).indices.values()
    ]
    return np.sort(np.concatenate(chosen)).astype(int)


def target_metrics(task: Task, outcome: Outcome, estimates: Estimates, by_group: bool = False) -> dict:
    """Metrics per target; with ``by_group``, keyed by group (device) with a ``mean`` entry."""
    out = {}
    for target in estimates.value.columns:
        spec = task.targets[target]
        ok = task.targets[target].present(outcome.y[target]) & estimates.value[target].notna().to_numpy()
        if not ok.any():
            continue
        if not by_group:
            out[target] = _metrics_on(outcome, estimates, target, ok, spec)
            continue
        per_group = {
            str(g): _metrics_on(outcome, estimates, target, ok & (outcome.groups == g).to_numpy(), spec)
            for g in outcome.groups[ok].unique()
        }
        keys = set.intersection(*(set(m) for m in per_group.values()))
        per_group["mean"] = {k: float(np.mean([m[k] for m in per_group.values()])) for k in sorted(keys)}
        out[target] = per_group
    return out


def _metrics_on(outcome: Outcome, estimates: Estimates, target: str, rows: np.ndarray, spec: Target) -> dict:
    if spec.kind.event:
        return metrics.classification(outcome.y[target][rows], estimates.value[target][rows])
    return metrics.regression(
        outcome.y[target][rows],
        estimates.value[target][rows],
        estimates.low[target][rows],
        estimates.high[target][rows],
        relative=spec.kind.relative,
    )
