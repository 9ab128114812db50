"""Train a task's model on the data at hand, log it to MLflow, register it, apply the champion gate."""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from preflight.data.catalogue import Catalogue
from preflight.data.settings import Settings
from preflight.models.core.conformal import Conformal
from preflight.models.core.datasets import available_sources, task_data
from preflight.models.core.evaluate import Outcome
from preflight.models.core.predictor import Estimates, Predictor
from preflight.models.core.task import Task
from preflight.models.presentation import plots
from preflight.models.presentation.analysis import Evaluation
from preflight.models.registry import tracking

log = logging.getLogger("preflight.train")
#: Nominal coverage of the out-of-fold intervals that the run's metrics score.
COVERAGE = 0.9


@dataclass
class TrainResult:
    promotion: tracking.Promotion
    report: dict  # the out-of-fold evaluation's summary (``Evaluation.summary``)


def data_checksum(checksums: dict[str, str], max_rows: int | None, seed: int) -> str:
    """Identifies the training data: source files, and how (with which seed) they were sampled."""
    payload = json.dumps(
        {"sources": checksums, "max_rows_per_source": max_rows, "seed": seed}, sort_keys=True
    )
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def summary(task: Task, report: dict, sha: str) -> str:
    """One paragraph on a trained model: family, data, split, its primary metric beside the baseline's."""
    target, metric = task.primary_target, task.metric
    model, baseline = report["metrics"][target][metric], report["baseline"]["metrics"][target][metric]
    return (
        f"{task.name} model of family {report['family']}, trained on {report['n_train']:,} rows of "
        f"{report['source']} (data sha {sha}) and scored out of fold by {report['split']}: {target} "
        f"{metric} {model:.4g}, against {baseline:.4g} for the {report['baseline']['name']} baseline."
    )


def location(paths: dict[str, Path]) -> str:
    """The URI of the source files: the file, or the folder that holds them all."""
    return Path(os.path.commonpath([p.resolve() for p in paths.values()])).as_uri()


def _oof_estimates(predictor: Predictor, Y: pd.DataFrame, coverage: float = COVERAGE) -> Estimates:
    """The out-of-fold estimates, each fold's intervals calibrated on the other folds' scores."""
    raw = predictor.oof_[predictor.targets]
    value, low, high = raw.copy(), raw.copy(), raw.copy()
    for fold in np.unique(predictor.oof_fold_):
        held = predictor.oof_fold_ == fold
        for target in value.columns:
            spec = predictor.task.targets[target]
            others = ~held & spec.present(Y[target]) & spec.present(raw[target])
            calibrator = Conformal(spec).conformalize(Y[target][others], raw[target][others])
            value.loc[held, target] = calibrator.recalibrated(raw[target][held].to_numpy())
            low.loc[held, target], high.loc[held, target] = calibrator.interval(
                value[target][held].to_numpy(), coverage
            )
    return Estimates(value, low, high, [[] for _ in range(len(value))])


def flat_metrics(report: dict) -> dict[str, float]:
    """``{target}_{metric}`` and ``baseline_{target}_{metric}`` for MLflow."""
    out = {
        f"{t}_{k}": v for t, ms in report["metrics"].items() for k, v in ms.items() if isinstance(v, float)
    }
    out |= {
        f"baseline_{t}_{k}": v
        for t, ms in report["baseline"]["metrics"].items()
        for k, v in ms.items()
        if isinstance(v, float)
    }
    return out


def outcome_figures(task: Task, outcome: Outcome, groupings: dict[str, pd.Series]) -> dict:
    """Predicted vs measured, and error by each named grouping (shape, device...), per target."""
    figures = {}
    for name in outcome.model.value.columns:
        target = task.targets[name]
        ok = target.present(outcome.y[name]) & outcome.model.value[name].notna().to_numpy()
        if ok.sum() < 2:
            continue
        y, pred = outcome.y[name][ok], outcome.model.value[name][ok]
        figures[f"{name}_predicted_vs_actual"] = plots.predicted_vs_actual(y, pred, name, target)
        for by, groups in groupings.items():
            figures[f"{name}_error_by_{by}"] = plots.error_by_group(y, pred, groups[ok], name, target, by=by)
    return figures


def train(
    task: Task,
    settings: Settings,
    catalogue: Catalogue,
    *,
    family: str | None = None,
    paths: dict[str, Path] | None = None,
    promote: bool = False,
    seed: int = 0,
) -> TrainResult:
    """Fit on every available source; the grouped out-of-fold estimates are the run's CV metrics.

    The reported n_train is every row: the metrics come from the calibration folds, each trained on
    the other folds' groups.
    """
    family = task.family(family)
    paths = paths or available_sources(task, settings)
    data = task_data(task, settings, catalogue, paths, task.max_rows_per_source, seed)
    features, Y = task.featurize(data.rows, catalogue), task.target_frame(data.rows)
    groups = task.group_values(features.meta, task.group_key)
    log.info("training %s/%s on %d rows from %s", task.name, family, len(data.rows), ", ".join(paths))
    predictor = Predictor(task, family, seed=seed).fit(features, Y, groups)
    baseline = Predictor(task, task.baseline, seed=seed).fit(features, Y, groups)
    outcome = Outcome(
        Y, _oof_estimates(predictor, Y), _oof_estimates(baseline, Y), groups, np.arange(len(Y)), len(Y)
    )
    split, sources = f"grouped-cv:{task.group_key}", "+".join(paths)
    report = Evaluation(task, family, sources, split, COVERAGE, outcome, data.rows).summary()
    sha = data_checksum(data.checksums, task.max_rows_per_source, seed)
    description = summary(task, report, sha)
    roles = {"device": task.device_column, "stratum": task.stratum_column}
    groupings = {task.group_key: groups} | {
        role: features.meta[column] for role, column in roles.items() if column and column in features.meta
    }
    figures = outcome_figures(task, outcome, groupings)
    run_id = tracking.log_run(
        settings,
        task,
        params={
            "family": family,
            "seed": seed,
            "sources": ",".join(paths),
            "source_files": json.dumps({source: str(path.resolve()) for source, path in paths.items()}),
            "split": split,
            "n_rows": len(Y),
            **getattr(predictor.family_, "get_params", dict)(),
        },
        metrics=flat_metrics(report),
        figures=figures,
        tags={"kind": "train", "data_sha": sha},
        predictor=predictor,
        report=report,
        run_name=f"{task.name} · {family} · {sources} · {split}",
        note=description,
        table=tracking.TrainingTable(data.rows, f"{task.name}:{sources}", location(paths), sha),
    )
    metric = report["metrics"][task.primary_target][task.metric]
    promotion = tracking.register(settings, task, run_id, family, metric, sha, split, promote, description)
    verdict = "promoted" if promotion.promoted else "not promoted"
    log.info(
        "registered %s v%s, %s: %s", promotion.info.name, promotion.info.version, verdict, promotion.reason
    )
    return TrainResult(promotion, report)
