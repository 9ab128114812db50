"""Where a predictor errs: an evaluation's out-of-sample estimates as tables a user can slice (by
group, worst cases with their inputs, interval coverage, calibration, out-of-distribution rate) and the
figures of them. ``preflight.evaluate`` returns an :class:`Evaluation`; the notebook, ``preflight
report`` and ``preflight evaluate`` (its :meth:`Evaluation.summary`) read it."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from preflight.data.catalogue import Catalogue
from preflight.data.settings import Settings
from preflight.models.core import evaluate
from preflight.models.core.datasets import available_sources, task_data
from preflight.models.core.evaluate import Outcome
from preflight.models.core.task import Task
from preflight.models.presentation import plots, progress

#: Nominal coverages of the calibration curve.
LEVELS = evaluate.CALIBRATION_LEVELS
#: A grouping is shown when its typical group holds this many rows.
MIN_GROUP_ROWS = 3


def rows_for(
    task: Task,
    settings: Settings,
    catalogue: Catalogue,
    files: dict[str, Path] | None,
    max_rows: int | None,
    seed: int,
) -> tuple[pd.DataFrame, list[str]]:
    """The rows to evaluate on: the given source files, or every source at hand, each sampled down to
    ``max_rows`` (seeded); nothing is stored."""
    paths = files or available_sources(task, settings)
    with progress.step(f"{task.name}: loading {', '.join(paths)}"):
        loaded = task_data(task, settings, catalogue, paths, max_rows, seed, store=False)
    return loaded.rows, list(paths)


def cross_validated(
    task: Task,
    rows: pd.DataFrame,
    catalogue: Catalogue,
    family: str,
    split: str,
    source: str,
    *,
    seed: int = 0,
    train_size: int | None = None,
    coverage: float = 0.9,
    params: dict | None = None,
) -> Evaluation:
    """Grouped cross-validation of the task's rows (``Task.rows``) as an :class:`Evaluation`."""
    with progress.step(f"{task.name} {family}: grouped cross-validation by {split}"):
        outcome = evaluate.cross_validate(
            task, rows, catalogue, family, split, seed, train_size, coverage, params, select=False
        )
    return _evaluation(task, family, source, split, coverage, outcome, rows)


def train_tested(
    task: Task,
    train_rows: pd.DataFrame,
    test_rows: pd.DataFrame,
    catalogue: Catalogue,
    family: str,
    split: str,
    source: str,
    *,
    seed: int = 0,
    shots: int = 0,
    coverage: float = 0.9,
    params: dict | None = None,
) -> Evaluation:
    """Fit on one loaded table and test on another (``evaluate.train_test``, with ``shots`` rows of each
    test device given as measurements) as an :class:`Evaluation` of split ``train/test``."""
    outcome = evaluate.train_test(
        task, train_rows, test_rows, catalogue, family, split, seed, shots, coverage, params
    )
    tested = task.rows(test_rows)
    return _evaluation(task, family, source, "train/test", coverage, outcome, tested, shots)


def _evaluation(
    task: Task,
    family: str,
    source: str,
    split: str,
    coverage: float,
    outcome: Outcome,
    rows: pd.DataFrame,
    shots: int = 0,
) -> Evaluation:
    """An :class:`Evaluation` of ``outcome``, whose test rows are positions in ``rows``."""
    inputs = _catalogue_ids(rows.iloc[outcome.test_index].reset_index(drop=True), task, outcome.meta)
    return Evaluation(task, family, source, split, coverage, outcome, inputs, shots)


def _catalogue_ids(inputs: pd.DataFrame, task: Task, meta: pd.DataFrame) -> pd.DataFrame:
    """The inputs with each device named by its catalogue id (the featurizer's, in ``meta``), as groups
    and warnings name it, rather than as its source spelled it (``NV_1080Ti``)."""
    column = task.device_column
    if "device" not in inputs or column is None or column not in meta:
        return inputs
    return inputs.assign(device=meta[column].to_numpy())


@dataclass
class Evaluation:
    """Out-of-sample estimates of a family and the task's baseline, row by row, with the rows' inputs."""

    task: Task
    family: str
    source: str
    split: str
    coverage: float
    outcome: Outcome
    #: the evaluated rows as loaded, in the outcome's order (``cross_validated`` and ``train_tested``
    #: name devices by catalogue id)
    inputs: pd.DataFrame
    shots: int = 0  # rows of each test device given to the model as measurements (train/test only)

    def summary(self, by_group: bool | None = None) -> dict:
        """The ``evaluate --json`` object (a contract: ``../shared/DESIGN.md``; the CLI prints it as
        strict JSON, NaN as null): task, family, source, split, row counts, then per target the
        model's metrics and the baseline's. ``by_group`` (by default: when test devices were given
        shots) keys each target's metrics by group (device), with their ``mean``."""
        by_group = self.shots > 0 if by_group is None else by_group
        outcome = self.outcome
        return {
            "task": self.task.name,
            "family": self.family,
            "source": self.source,
            "split": self.split,
            "n_train": outcome.n_train,
            "n_test": len(outcome.y),
            "metrics": evaluate.target_metrics(self.task, outcome, outcome.model, by_group),
            "baseline": {
                "name": self.task.baseline,
                "metrics": evaluate.target_metrics(self.task, outcome, outcome.baseline, by_group),
            },
        }

    @property
    def targets(self) -> list[str]:
        """Targets with at least two measured, estimated rows."""
        return [t for t in self.outcome.model.value.columns if self._measured(t).sum() >= 2]

    def metrics(self) -> pd.DataFrame:
        """One row per target and metric: the model's value (``model``) beside the baseline's."""
        summary = self.summary(by_group=False)
        model, baseline = summary["metrics"], summary["baseline"]["metrics"]
        return pd.DataFrame(
            [
                {"target": t, "metric": k, "model": v, "baseline": baseline.get(t, {}).get(k)}
                for t, values in model.items()
                for k, v in values.items()
            ]
        ).set_index(["target", "metric"])

    @cached_property
    def groupings(self) -> dict[str, pd.Series]:
        """Each split the task knows whose columns the rows carry, as a label per row."""
        meta = self.outcome.meta
        return {
            name: plots.readable_labels(self.task.group_values(meta, name))
            for name, columns in self.task.groups.items()
            if all(column in meta for column in columns)
        }

    def table(self, target: str | None = None) -> pd.DataFrame:
        """Every measured row of ``target`` (the primary one by default): its group, the measurement, the
        estimate with its interval, the baseline's estimate, the error, whether the interval covers
        it, the out-of-distribution flag and codes, then the row's inputs."""
        target = target or self.task.primary_target
        model, baseline = self.outcome.model, self.outcome.baseline
        ok = self._measured(target)
        measured, predicted = self.outcome.y[target], model.value[target]
        low, high = model.low[target], model.high[target]
        frame = pd.DataFrame(
            {
                "group": plots.readable_labels(self.outcome.groups),
                "measured": measured,
                "predicted": predicted,
                "error": self.errors(measured, predicted, target),
                "low": low,
                "high": high,
                "covered": (measured >= low) & (measured <= high),
                "baseline": baseline.value[target],
                "ood": [bool(r) for r in model.reasons],
                "warnings": [", ".join(r) for r in model.reasons],
            }
        )
        inputs = self.inputs[[c for c in self._input_columns() if c not in frame]]
        return pd.concat([frame, inputs], axis=1)[ok].reset_index(drop=True)

    def errors(self, measured: pd.Series, predicted: pd.Series, target: str) -> pd.Series:
        """The target's error of each estimate (``Target.error``)."""
        return self.task.targets[target].error(measured, predicted)

    def error_name(self, target: str) -> str:
        """What :meth:`errors` measures, with its unit."""
        return self.task.targets[target].error_label

    def by_group(self, target: str | None = None, grouping: str | None = None) -> pd.DataFrame:
        """Per group (of the split, or of another ``grouping``): rows, median error of the model and
        the baseline, interval coverage and the share out of distribution; worst first."""
        table = self.table(target)
        if grouping is not None:
            labels = self.groupings[grouping][self._measured(target or self.task.primary_target)]
            table["group"] = labels.reset_index(drop=True)
        target = target or self.task.primary_target
        table["baseline_error"] = self.errors(table["measured"], table["baseline"], target)
        summary = table.groupby("group").agg(
            rows=("error", "size"),
            median_error=("error", "median"),
            baseline_median_error=("baseline_error", "median"),
            coverage=("covered", "mean"),
            ood_share=("ood", "mean"),
        )
        return summary.sort_values("median_error", ascending=False)

    def worst(self, target: str | None = None, n: int = 10) -> pd.DataFrame:
        """The ``n`` rows the model errs on most, with their inputs (devices by catalogue id)."""
        return self.table(target).sort_values("error", ascending=False).head(n).reset_index(drop=True)

    def calibration(self, target: str | None = None) -> pd.DataFrame:
        """Observed interval coverage at each nominal coverage (``LEVELS``)."""
        target = target or self.task.primary_target
        ok = self._measured(target)
        y = self.outcome.y[target][ok]
        observed = [
            float(((y >= low[target][ok]) & (y <= high[target][ok])).mean())
            for low, high in (self.outcome.levels[level] for level in LEVELS)
        ]
        return pd.DataFrame({"nominal": LEVELS, "observed": observed})

    @property
    def ood_rate(self) -> float:
        """The share of evaluated rows flagged out of distribution."""
        return float(np.mean([bool(r) for r in self.outcome.model.reasons]))

    def figures(self, target: str | None = None) -> dict[str, Figure]:
        """The figures of one target: predicted vs measured; error by each grouping whose groups hold a
        few rows each; coverage and the out-of-distribution share by the :meth:`focus` grouping; and the
        calibration curve (the reliability diagram for an event's probability)."""
        target = target or self.task.primary_target
        spec = self.task.targets[target]
        table = self.table(target)
        figures = {"predicted_vs_actual": plots.predicted_vs_actual(table["measured"], table["predicted"],
                                                                    target, spec)}  # fmt: skip
        if spec.kind.event:
            return figures
        error = f"median {self.error_name(target)}"
        for name in self.telling_groupings(target):
            groups = self.by_group(target, name)
            figures[f"error_by_{name}"] = plots.group_bars(
                groups["median_error"], groups["rows"], error, f"{target}: error by {name}"
            )
        focus = self.focus(target)
        if focus is not None:
            groups = self.by_group(target, focus)
            figures[f"coverage_by_{focus}"] = plots.coverage_by_group(
                groups["coverage"], groups["rows"], self.coverage, focus
            )
            figures[f"ood_by_{focus}"] = plots.ood_by_group(groups["ood_share"], groups["rows"], focus)
        figures["calibration"] = plots.calibration_curve(self.calibration(target), target)
        return figures

    def telling_groupings(self, target: str | None = None) -> list[str]:
        """Groupings with two groups or more whose typical group holds at least ``MIN_GROUP_ROWS`` rows
        (a median over singletons says little)."""
        ok = self._measured(target or self.task.primary_target)
        telling = []
        for name, labels in self.groupings.items():
            sizes = labels[ok].value_counts()
            if len(sizes) >= 2 and sizes.median() >= MIN_GROUP_ROWS:
                telling.append(name)
        return telling

    def focus(self, target: str | None = None) -> str | None:
        """The grouping that coverage and the out-of-distribution share are shown by: the telling one
        with the most groups, up to ``plots.TOP_GROUPS`` (a device, a mix...)."""
        ok = self._measured(target or self.task.primary_target)
        sizes = {name: self.groupings[name][ok].nunique() for name in self.telling_groupings(target)}
        fitting = {name: n for name, n in sizes.items() if n <= plots.TOP_GROUPS}
        return max(fitting, key=lambda name: fitting[name]) if fitting else None

    def beside(self, other: Evaluation, names: tuple[str, str], target: str | None = None) -> pd.DataFrame:
        """This evaluation and another of the same rows side by side (columns ``names``): median error
        per group of the :meth:`focus` grouping (the split when none), worst first."""
        return self._beside(other, names, target or self.task.primary_target)[0]

    def beside_figure(self, other: Evaluation, names: tuple[str, str], target: str | None = None) -> Figure:
        """:meth:`beside` as paired bars."""
        target = target or self.task.primary_target
        errors, rows = self._beside(other, names, target)
        xlabel, by = f"median {self.error_name(target)}", self.focus(target) or self.split
        return plots.side_by_side(errors, rows, xlabel, f"{target}: error by {by}")

    def _beside(
        self, other: Evaluation, names: tuple[str, str], target: str
    ) -> tuple[pd.DataFrame, pd.Series]:
        """:meth:`beside`'s table and this evaluation's rows per group."""
        grouping = self.focus(target)
        mine = self.by_group(target, grouping)
        errors = pd.DataFrame(
            {names[0]: mine["median_error"], names[1]: other.by_group(target, grouping)["median_error"]}
        )
        return errors.sort_values(names[0], ascending=False), mine["rows"]

    def _measured(self, target: str) -> np.ndarray:
        spec = self.task.targets[target]
        return spec.present(self.outcome.y[target]) & self.outcome.model.value[target].notna().to_numpy()

    def _input_columns(self) -> list[str]:
        """The item's fields as the rows carry them (a kernel configuration's knobs included)."""
        fields = list(self.task.item.model_fields)
        known = [c for c in fields if c in self.inputs]
        return known or list(self.inputs.columns)
