"""Placement: one workload on candidate hosts, each with its current residents, ranked by predicted
slowdown (the least slowed first), through the one prediction path."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from preflight.data.catalogue import Catalogue
from preflight.data.interference import InterferenceItem
from preflight.models.inference import predict_items
from preflight.models.predictor import Predictor
from preflight.models.task import Task


@dataclass
class Placed:
    """A host's estimate: ``norm_perf`` as ``{value, low, high}``, its rank (1 = least slowed)."""

    host: str
    residents: dict[str, float]
    norm_perf: dict[str, float | None]
    rank: int | None
    ood: bool
    warnings: list[str]


def place(
    task: Task,
    predictor: Predictor,
    catalogue: Catalogue,
    workload: InterferenceItem,
    hosts: Sequence[tuple[str, Mapping[str, float]]],
    coverage: float = 0.9,
) -> list[Placed]:
    """Every host's estimate for the workload next to its residents, least slowed first."""
    items = [
        workload.model_copy(update={"host": name, "neighbours": dict(residents)}) for name, residents in hosts
    ]
    records = predict_items(task, predictor, catalogue, items, coverage).records()
    order = sorted(range(len(records)), key=lambda i: -(records[i]["norm_perf"]["value"] or float("-inf")))
    rank = {
        i: position + 1 for position, i in enumerate(order) if records[i]["norm_perf"]["value"] is not None
    }
    return [
        Placed(
            host=hosts[i][0],
            residents=dict(hosts[i][1]),
            norm_perf=records[i]["norm_perf"],
            rank=rank.get(i),
            ood=records[i]["ood"],
            warnings=records[i]["warnings"],
        )
        for i in order
    ]
