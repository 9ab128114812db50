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
from preflight.models.whatif import ranks


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
    values = [record["norm_perf"]["value"] for record in records]
    rank = ranks([None if v is None else -v for v in values])  # the highest norm_perf first
    order = sorted(range(len(records)), key=lambda i: (rank[i] is None, rank[i] or 0))
    return [
        Placed(
            host=hosts[i][0],
            residents=dict(hosts[i][1]),
            norm_perf=records[i]["norm_perf"],
            rank=rank[i],
            ood=records[i]["ood"],
            warnings=records[i]["warnings"],
        )
        for i in order
    ]
