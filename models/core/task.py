"""The one abstraction: a Task is a declarative spec that train, evaluate, serve and the CLI all read.

Tasks are found, not listed: every module of the ``preflight.models.tasks`` package (any folder on
its ``__path__``) is imported on first use, once (again only when ``__path__`` changes), and registers
its tasks with ``register``.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Literal, get_args

import pandas as pd
from preflight.data.catalogue import Catalogue
from preflight.data.errors import UnknownTask, UsageError
from preflight.features import Features
from preflight.models.core.actions import Action
from preflight.models.core.targets import Target
from pydantic import BaseModel


@dataclass(frozen=True)
class Task:
    """What a task predicts, from what, and how to split its data honestly.

    ``targets`` declares each predicted quantity with its unit and scale. ``groups`` maps a split name
    (``shape``, ``device``...) to the ``Features.meta`` columns whose values form a group;
    ``group_key`` is the default split. ``metric`` on the first target decides promotions (lower is
    better, except for ``metrics.HIGHER_IS_BETTER``: rank correlations, r2...).

    Meta columns with a role: ``device_column`` names the device (setting) a row was measured on
    (``None`` for a task without devices: no unseen-device calibration, and no few-shot adaptation
    unless ``adapt_column`` names what measurements adapt);
    ``machine_column`` the machine, when one machine has several settings (a GPU at several batch
    sizes), so that calibration holds them out together; ``stratum_column`` the calibration stratum
    (rows that err differently get their own scores); ``seen_columns`` further columns whose values
    never seen in training are flagged out of distribution (an empty value, not given, is not).
    ``measured_devices``: a device the catalogue does not know can be learned from its measurements
    alone (its spec-sheet features are missing); otherwise an unknown device name is an error.
    ``examples``: items of a request (the route's OpenAPI example), each valid as ``item``; at least one.
    """

    name: str
    item: type[BaseModel]
    targets: dict[str, Target]
    sources: tuple[str, ...]
    featurize: Callable[[pd.DataFrame, Catalogue], Features]
    groups: dict[str, tuple[str, ...]]
    group_key: str
    families: tuple[str, ...]
    default_family: str
    #: the simple family every evaluation reports beside the model
    baseline: str
    examples: tuple[dict[str, Any], ...]
    metric: str = "mape"
    device_column: str | None = "device_id"
    machine_column: str | None = None
    stratum_column: str | None = "stratum"
    seen_columns: tuple[str, ...] = ()
    #: the meta column whose values measurements adapt (``device_column`` where not given: a device's
    #: shots; the FPGA task's kernel: its synthesized designs)
    adapt_column: str | None = None
    #: how measurements adapt: ``refit`` the family with them (or its own ``adapt``); ``residual``: a
    #: Gaussian process over the subject's residuals corrects its answers (``models/core/residual.py``);
    #: ``fingerprint``: a device's shots read as a mix of the training devices' estimates
    #: (``models/core/fingerprint.py``)
    adaptation: Literal["refit", "residual", "fingerprint"] = "refit"
    measured_devices: bool = False
    #: sources sampled down to this many rows when training the service's default model
    max_rows_per_source: int = 20_000
    #: the rows of a canonical table this task learns from (e.g. one row per architecture); all by default
    select: Callable[[pd.DataFrame], pd.DataFrame] | None = None
    #: targets computed from the learned ones by a physical law, never learned (GEMM power and energy
    #: from the runtime estimate); ``derive(features, estimates)`` fills them in, with warnings, and sets
    #: any learned target's answer that a law or definition fixes outright (an interference item with
    #: no neighbours is not slowed)
    derived: tuple[str, ...] = ()
    derive: Callable[[Features, Any], None] | None = None
    #: the work one raw item (a request's JSON, before validation) asks for, in O(1) from its fields, in
    #: units of about one GEMM estimate (``models/core/budget.py``); ``cost_unit`` says what it counts
    cost: Callable[[Any], float] | None = None
    cost_unit: str = "one unit an item"
    #: hyperparameters a family takes on this task, beyond its defaults (fewer GNN epochs where every
    #: design of a kernel is a row of its own); what a caller passes overrides them
    family_params: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: questions the task answers beyond per-item estimates, each an HTTP route, a CLI command and a
    #: Python API call (``models/core/actions.py``)
    actions: tuple[Action, ...] = ()

    def __post_init__(self) -> None:
        if not self.examples:
            raise ValueError(f"task {self.name!r} has no example items: give at least one")

    def item_cost(self, raw: Any) -> float:
        """What one raw item costs (at least 1; a malformed item costs 1 and fails validation later)."""
        if self.cost is None or not isinstance(raw, dict):
            return 1.0
        try:
            return max(1.0, float(self.cost(raw)))
        except (TypeError, ValueError, OverflowError):
            return 1.0

    @property
    def learned_targets(self) -> list[str]:
        return [t for t in self.targets if t not in self.derived]

    @property
    def primary_target(self) -> str:
        return next(iter(self.targets))

    @property
    def machine(self) -> str | None:
        """The meta column that holds out a machine with all its settings."""
        return self.machine_column or self.device_column

    @property
    def subject(self) -> str | None:
        """The meta column whose values measurements adapt (None: nothing to adapt)."""
        return self.adapt_column or self.device_column

    @property
    def envelope_columns(self) -> tuple[str, ...]:
        return ((self.device_column,) if self.device_column else ()) + self.seen_columns

    def family(self, name: str | None) -> str:
        """The named family (or the default), refused unless this task supports it."""
        name = name or self.default_family
        if name not in self.families:
            raise UsageError(
                f"task {self.name!r} has no family {name!r}; its families: {', '.join(self.families)}"
            )
        return name

    def split(self, name: str | None) -> str:
        """The named split (or the default), refused unless this task has it."""
        name = name or self.group_key
        if name not in self.groups:
            raise UsageError(
                f"task {self.name!r} has no split {name!r}; its splits: {', '.join(self.groups)}"
            )
        return name

    def rows(self, table: pd.DataFrame) -> pd.DataFrame:
        """The rows of a loaded table this task learns from, with a fresh index."""
        return (self.select(table) if self.select else table).reset_index(drop=True)

    def items_to_rows(self, items: list[Any]) -> pd.DataFrame:
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
        columns = self.groups[self.split(group)]
        parts = [meta[column].astype(str).fillna("") for column in columns]  # pandas 3 keeps NaN
        label = parts[0]
        for part in parts[1:]:
            label = label + "|" + part
        return label

    def target_frame(self, rows: pd.DataFrame) -> pd.DataFrame:
        """The measured targets of canonical rows (NaN where a row lacks one)."""
        return pd.DataFrame(
            {t: pd.to_numeric(rows[t], errors="coerce") if t in rows else float("nan") for t in self.targets},
            index=rows.index,
        ).reset_index(drop=True)


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
    """Add a task to the registry (a task module calls this when it is imported); an action whose name
    or path another task's action has is refused."""
    others = [a for t in TASKS.values() if t.name != task.name for a in t.actions]
    for action in task.actions:
        if any(action.name == a.name or action.path == a.path for a in others):
            raise ValueError(
                f"task {task.name!r}: another task's action has {action.name!r} or {action.path}"
            )
    TASKS[task.name] = task
    return task


def get_task(name: str) -> Task:
    _discover()
    if name not in TASKS:
        raise UnknownTask(name, sorted(TASKS))
    return TASKS[name]


def all_tasks() -> list[Task]:
    _discover()
    return list(TASKS.values())


def all_actions() -> dict[str, tuple[Task, Action]]:
    """Every task's actions by name, each with its task."""
    return {action.name: (task, action) for task in all_tasks() for action in task.actions}


def get_action(name: str) -> tuple[Task, Action]:
    """An action by name, with its task; a usage error lists the known ones."""
    actions = all_actions()
    if name not in actions:
        raise UsageError(f"unknown action {name!r}; known actions: {', '.join(sorted(actions))}")
    return actions[name]


def _discover() -> None:
    """Import the tasks package's modules (each registers its tasks), once per folder list."""
    import preflight.models.tasks as package

    _import_modules(package.__name__, tuple(package.__path__))


@cache
def _import_modules(package: str, folders: tuple[str, ...]) -> None:
    """Import every module of ``package`` found in ``folders`` (a folder added later is scanned then)."""
    for module in pkgutil.iter_modules(list(folders), f"{package}."):
        importlib.import_module(module.name)
