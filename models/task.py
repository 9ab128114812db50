"""The one abstraction: a Task is a declarative spec that train, evaluate, serve and the CLI all read."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import get_args

import pandas as pd
from preflight.data.catalogue import Catalogue
from preflight.data.errors import UnknownTask
from preflight.features import Features
from pydantic import BaseModel


@dataclass(frozen=True)
class Task:
    """What a task predicts, from what, and how to split its data honestly.

    ``groups`` maps a split name (``shape``, ``device``...) to the ``Features.meta`` columns whose
    values form a group; ``group_key`` is the default split. ``metric`` on the first target decides
    promotions (lower is better, except for ``metrics.HIGHER_IS_BETTER``: rank correlations, r2...).
    """

    name: str
    item: type[BaseModel]
    targets: dict[str, str]
    sources: tuple[str, ...]
    featurize: Callable[[pd.DataFrame, Catalogue], Features]
    groups: dict[str, tuple[str, ...]]
    group_key: str
    families: tuple[str, ...]
    default_family: str
    #: the simple family every evaluation reports beside the model
    baseline: str
    metric: str = "mape"
    #: sources sampled down to this many rows when training the service's default model
    max_rows_per_source: int = 20_000
    #: the rows of a canonical table this task learns from (e.g. one row per architecture); all by default
    select: Callable[[pd.DataFrame], pd.DataFrame] | None = None

    @property
    def primary_target(self) -> str:
        return next(iter(self.targets))

    def family(self, name: str | None) -> str:
        """The named family (or the default), refused unless this task supports it."""
        name = name or self.default_family
        if name not in self.families:
            raise ValueError(
                f"task {self.name!r} has no family {name!r}; its families: {', '.join(self.families)}"
            )
        return name

    def rows(self, table: pd.DataFrame) -> pd.DataFrame:
        """The rows of a loaded table this task learns from, with a fresh index."""
        return (self.select(table) if self.select else table).reset_index(drop=True)

    def items_to_rows(self, items: list[BaseModel]) -> pd.DataFrame:
        """API/CLI items as a canonical table; nested models (a kernel configuration) become columns."""
        nested = _nested_model_fields(self.item)
        records = []
        for item in items:
            record = item.model_dump(mode="json")
            for key in nested:
                record.update(record.pop(key) or {})
            records.append(record)
        return pd.DataFrame.from_records(records)

    def group_values(self, meta: pd.DataFrame, group: str) -> pd.Series:
        """The group label of each row for a named split."""
        if group not in self.groups:
            raise ValueError(f"task {self.name!r} has no split {group!r}; known: {', '.join(self.groups)}")
        parts = [
            meta[column].astype(str).fillna("") for column in self.groups[group]
        ]  # pandas 3 keeps NaN in str
        label = parts[0]
        for part in parts[1:]:
            label = label + "|" + part
        return label


def _nested_model_fields(model: type[BaseModel]) -> list[str]:
    def is_model(a: object) -> bool:
        return isinstance(a, type) and issubclass(a, BaseModel)

    return [
        name
        for name, f in model.model_fields.items()
        if is_model(f.annotation) or any(map(is_model, get_args(f.annotation)))
    ]


TASKS: dict[str, Task] = {}


def register(task: Task) -> Task:
    TASKS[task.name] = task
    return task


def get_task(name: str) -> Task:
    _load_builtin_tasks()
    if name not in TASKS:
        raise UnknownTask(name, sorted(TASKS))
    return TASKS[name]


def all_tasks() -> list[Task]:
    _load_builtin_tasks()
    return list(TASKS.values())


def _load_builtin_tasks() -> None:
    import preflight.models.tasks.gemm  # noqa: F401  (each registers itself)
    import preflight.models.tasks.nas  # noqa: F401
