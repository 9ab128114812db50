"""Placement: one workload on candidate hosts, each with its current residents, ranked by predicted
slowdown (the least slowed first), through the one prediction path."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Self

from preflight.data.catalogue import Catalogue
from preflight.data.interference import KINDS, InterferenceItem, Neighbours
from preflight.models.core.actions import MAX_ITEMS, Estimate, ModelInfoPublic, Served
from preflight.models.core.inference import predict_items
from preflight.models.core.predictor import Predictor
from preflight.models.core.task import Task
from preflight.models.tools.whatif import ranks
from pydantic import BaseModel, ConfigDict, Field, StrictFloat, model_validator


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


class CandidateHost(BaseModel):
    """A host the workload could go to, with what already runs there."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=100)
    residents: Neighbours = Field(
        default_factory=dict,
        description="kind -> how many run there now; kinds: " + ", ".join(KINDS),
        examples=[{"cpu": 2}],
    )


class PlaceRequest(BaseModel):
    """A workload (no neighbours of its own) and the hosts to rank for it."""

    model_config = ConfigDict(extra="forbid")

    workload: InterferenceItem
    hosts: list[CandidateHost] = Field(min_length=1, max_length=MAX_ITEMS)
    coverage: StrictFloat = Field(0.9, gt=0, lt=1, description="interval coverage")

    @model_validator(mode="after")
    def _one_host_each(self) -> Self:
        if any(count > 0 for count in self.workload.neighbours.values()):
            raise ValueError("workload.neighbours must be empty: a host's residents are its neighbours")
        if self.workload.host is not None:
            raise ValueError("workload.host must be empty: each candidate host is named in hosts")
        names = [host.name for host in self.hosts]
        if len(set(names)) != len(names):
            raise ValueError("host names must be distinct")
        return self


class PlacedHost(BaseModel):
    host: str
    residents: dict[str, float]
    norm_perf: Estimate = Field(description="performance there over performance alone, with its interval")
    rank: int | None = Field(description="1 is the least slowed; null without an estimate")
    ood: bool
    warnings: list[str]


class PlaceResponse(BaseModel):
    model: ModelInfoPublic
    best: str | None = Field(description="the host where the workload is predicted least slowed")
    coverage: float
    hosts: list[PlacedHost] = Field(description="least slowed first")


def place_workload(served: Served, body: PlaceRequest) -> PlaceResponse:
    """Candidate hosts ranked by the slowdown a workload would suffer there.

    Each host's predicted ``norm_perf`` for the workload next to its residents, with intervals, least
    slowed first; ``best`` is the first host with an estimate."""
    hosts = [(host.name, host.residents) for host in body.hosts]
    placed = place(served.task, served.predictor, served.catalogue, body.workload, hosts, body.coverage)
    return PlaceResponse(
        model=served.model(),
        best=next((p.host for p in placed if p.rank is not None), None),
        coverage=body.coverage,
        hosts=[PlacedHost.model_validate(asdict(p)) for p in placed],
    )
