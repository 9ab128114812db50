"""The procurement what-if: one workload on every candidate device, ranked by time, energy and cost.

A workload is a task's items without a device; one *run* is every item once, so a run's time is the
sum over the items. Each candidate device is set on every item and the items go through the one
prediction path (``inference.predict_items``) with the task's champion. Sums keep the per-item
intervals comonotone (``[Σ low, Σ high]``): the errors of one model on one device move together, so
they do not average out over the items.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from preflight.data.catalogue import KINDS, Catalogue, DeviceSpec
from preflight.data.errors import DataError, UsageError
from preflight.models.core import budget
from preflight.models.core.inference import predict_items
from preflight.models.core.predictor import Predictor
from preflight.models.core.task import Task, all_tasks
from pydantic import BaseModel, ValidationError

#: The item field the what-if sets to each candidate device in turn.
DEVICE_FIELD = "device"
#: How a task's targets are read: time is its first target in this unit; energy its first target in one
#: of these units, reported in joules (factor to joules).
TIME_UNIT = "ms"
JOULES_PER_UNIT = {"J": 1.0, "mJ": 1e-3}
#: Validation errors quoted in a refused workload's message.
QUOTED_ERRORS = 5


@dataclass(frozen=True)
class Interval:
    value: float
    low: float | None
    high: float | None


@dataclass(frozen=True)
class Ranks:
    """1 is best (least); ``None`` where the device has no value for the criterion."""

    time: int
    energy: int | None
    cost: int | None


@dataclass(frozen=True)
class DeviceEstimate:
    """One device's estimates per run of the workload."""

    device: str
    name: str
    time_ms: Interval
    runs_per_s: float
    energy_j: Interval | None
    energy_estimated: bool
    price_usd_per_hour: float | None
    cost_per_million_runs_usd: Interval | None
    ood: bool
    warnings: list[str]
    rank: Ranks


@dataclass(frozen=True)
class Skipped:
    device: str
    reason: str


@dataclass(frozen=True)
class WhatIf:
    """Devices ranked by time per run (fastest first), and the candidates that could not be estimated."""

    task: str
    time_target: str
    energy_target: str | None
    items: int
    coverage: float
    devices: list[DeviceEstimate]
    skipped: list[Skipped]


@dataclass(frozen=True)
class _Run:
    """A device's sums over the workload, before ranking."""

    spec: DeviceSpec
    time_ms: Interval
    energy_j: Interval | None
    ood: bool
    warnings: list[str]


def time_target(task: Task) -> str:
    """The task's time per item: its first target in milliseconds."""
    found = [name for name, target in task.targets.items() if target.unit == TIME_UNIT]
    if not found:
        raise UsageError(
            f"task {task.name!r} predicts no time (a target in {TIME_UNIT}) to compare devices by"
        )
    return found[0]


def energy_target(task: Task) -> str | None:
    """The task's energy per item, if it predicts one (a target in J or mJ)."""
    return next((name for name, target in task.targets.items() if target.unit in JOULES_PER_UNIT), None)


def candidates(task: Task, catalogue: Catalogue, names: Sequence[str] | None) -> list[DeviceSpec]:
    """The devices to compare: the named ones (any name the catalogue resolves; ``UnknownDevice``
    otherwise), or every device of the catalogue whose kind is a what-if candidate (GPUs, accelerators)."""
    if DEVICE_FIELD not in task.item.model_fields:
        on_devices = [t.name for t in all_tasks() if DEVICE_FIELD in t.item.model_fields]
        raise UsageError(
            f"task {task.name!r} does not run on a device; "
            f"what-if compares devices for: {', '.join(on_devices)}"
        )
    if names is None:
        return [spec for spec in catalogue if KINDS[spec.kind].whatif_candidate]
    if not names:
        raise UsageError("name at least one device to compare, or all")
    return list({spec.id: spec for spec in map(catalogue.resolve, names)}.values())


def prices_by_device(
    catalogue: Catalogue, devices: Sequence[DeviceSpec], prices: Mapping[str, float]
) -> dict[str, float]:
    """Prices in USD per hour keyed by device id; each finite, not negative, and for a candidate."""
    ids = {spec.id for spec in devices}
    by_id = {}
    for name, price in prices.items():
        if not (math.isfinite(price) and price >= 0):
            raise UsageError(f"price for {name!r} must be a finite, non-negative USD per hour, got {price}")
        spec = catalogue.resolve(name)
        if spec.id not in ids:
            raise UsageError(f"price for {name!r}: device {spec.id!r} is not among the candidate devices")
        by_id[spec.id] = price
    return by_id


def compare(
    task: Task,
    predictor: Predictor,
    catalogue: Catalogue,
    items: Sequence[Mapping[str, Any]],
    devices: Sequence[DeviceSpec],
    prices: Mapping[str, float],
    coverage: float = 0.9,
) -> WhatIf:
    """The workload (the task's items without a device) estimated on each device and ranked by time;
    ``prices`` by device id (``prices_by_device``). Devices the featurizer cannot answer for (a
    spec sheet without the needed peak) are skipped with the reason."""
    time = time_target(task)
    _check_workload(items)
    budget.check(task, items, per_item=len(devices), where="workload.items")
    runs, skipped = [], []
    for spec in devices:
        budget.check_cancelled()  # a what-if past its deadline stops between devices
        on_device = _on_device(task, items, spec.id)
        try:
            runs.append(_run(task, predictor, catalogue, on_device, spec, coverage))
        except DataError as exc:
            skipped.append(Skipped(spec.id, str(exc)))
    if not runs:
        raise DataError(f"no candidate device could be estimated: {'; '.join(s.reason for s in skipped)}")
    return WhatIf(task.name, time, energy_target(task), len(items), coverage, _ranked(runs, prices), skipped)


def _check_workload(items: Sequence[Mapping[str, Any]]) -> None:
    if not items:
        raise UsageError("the workload has no items (one run is every item once)")
    carrying = [i for i, item in enumerate(items) if DEVICE_FIELD in item]
    if carrying:
        raise DataError(
            f"workload items[{carrying[0]}].{DEVICE_FIELD}: leave it out of the workload's items "
            "(the what-if sets each candidate device in turn)"
        )


def _on_device(task: Task, items: Sequence[Mapping[str, Any]], device: str) -> list[BaseModel]:
    """The items validated as the task's item model on one device; the first invalid one is named."""
    validated = []
    for i, item in enumerate(items):
        try:
            validated.append(task.item.model_validate({**item, DEVICE_FIELD: device}))
        except ValidationError as exc:
            fields = "; ".join(
                f"items[{i}].{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:QUOTED_ERRORS]
            )
            raise DataError(f"workload: {fields}") from None
    return validated


def _run(
    task: Task,
    predictor: Predictor,
    catalogue: Catalogue,
    items: list[BaseModel],
    spec: DeviceSpec,
    coverage: float,
) -> _Run:
    """One run of the workload's items (on ``spec``) summed; OOD if any item is; each warning once."""
    records = predict_items(task, predictor, catalogue, items, coverage).records()
    time, energy = time_target(task), energy_target(task)
    time_ms = _total(records, time)
    if time_ms is None:
        raise DataError(f"no {time} estimate for some items: the spec sheet lacks what it is predicted from")
    energy_j = _total(records, energy, JOULES_PER_UNIT[task.targets[energy].unit]) if energy else None
    warnings = list(dict.fromkeys(w for record in records for w in record["warnings"]))
    if energy_j is None:
        warnings.append(
            f"energy not estimated: no {energy} estimate for every item on this device"
            if energy
            else f"energy not estimated: task {task.name!r} predicts no energy"
        )
    return _Run(spec, time_ms, energy_j, any(record["ood"] for record in records), warnings)


def _total(records: list[dict], target: str, scale: float = 1.0) -> Interval | None:
    """The sum over items of a target's estimate and bounds, times ``scale``; a bound is None when any
    item's is, and the whole None when any item has no estimate."""
    estimates = [record.get(target) or {} for record in records]
    value, low, high = (_sum([e.get(key) for e in estimates], scale) for key in ("value", "low", "high"))
    return None if value is None else Interval(value, low, high)


def _sum(values: list[float | None], scale: float) -> float | None:
    known = [v for v in values if v is not None]
    return scale * math.fsum(known) if len(known) == len(values) else None


def ranks(values: list[float | None]) -> list[int | None]:
    """1-based rank of each value, least first (ties in the given order); None stays unranked."""
    order = sorted((v, i) for i, v in enumerate(values) if v is not None)  # also ranks placements
    ranked: list[int | None] = [None] * len(values)
    for rank, (_, i) in enumerate(order, start=1):
        ranked[i] = rank
    return ranked


def _ranked(runs: list[_Run], prices: Mapping[str, float]) -> list[DeviceEstimate]:
    runs = sorted(runs, key=lambda run: run.time_ms.value)
    costs = [_cost(prices.get(run.spec.id), run.time_ms) for run in runs]
    energy_ranks = ranks([run.energy_j.value if run.energy_j else None for run in runs])
    cost_ranks = ranks([cost.value if cost else None for cost in costs])
    return [
        DeviceEstimate(
            device=run.spec.id,
            name=run.spec.name,
            time_ms=run.time_ms,
            runs_per_s=1e3 / run.time_ms.value,
            energy_j=run.energy_j,
            energy_estimated=run.energy_j is not None,
            price_usd_per_hour=prices.get(run.spec.id),
            cost_per_million_runs_usd=cost,
            ood=run.ood,
            warnings=run.warnings,
            rank=Ranks(i + 1, energy_ranks[i], cost_ranks[i]),
        )
        for i, (run, cost) in enumerate(zip(runs, costs))
    ]


def _cost(price_usd_per_hour: float | None, time_ms: Interval) -> Interval | None:
    """USD per million runs at a price per hour of the device: linear in the time, so its interval is
    the time's, scaled."""
    if price_usd_per_hour is None:
        return None
    per_ms = price_usd_per_hour / 1e3 / 3600 * 1e6

    def scaled(ms: float | None) -> float | None:
        return None if ms is None else per_ms * ms

    return Interval(per_ms * time_ms.value, scaled(time_ms.low), scaled(time_ms.high))
