"""``POST /v1/interference/place``: candidate hosts ranked by the slowdown a workload would suffer there."""

from dataclasses import asdict
from typing import Annotated

from fastapi import APIRouter, Body, Response
from fastapi.openapi.models import Example
from preflight.models.placement import place
from preflight.models.task import get_task
from preflight.service.deps import StateDep, served
from preflight.service.routing import UnicodeRoute
from preflight.service.schemas import ModelInfoPublic, PlaceRequest, PlaceResponse

router = APIRouter(tags=["interference"], route_class=UnicodeRoute)

PLACEMENTS: dict[str, Example] = {
    "hosts": {
        "summary": "a web server and three hosts",
        "value": {
            "workload": {
                "workload": "nginx",
                "load_rps": 2000,
                "replicas": 1,
                "solo": {"ipc": 0.9, "p99_ms": 0.15},
            },
            "hosts": [
                {"name": "node-a", "residents": {"cpu": 2, "l3": 2}},
                {"name": "node-b", "residents": {"membw": 1}},
                {"name": "node-c"},
            ],
        },
    }
}


@router.post("/v1/interference/place", response_model=PlaceResponse)
def place_workload(
    body: Annotated[PlaceRequest, Body(openapi_examples=PLACEMENTS)], state: StateDep, response: Response
) -> PlaceResponse:
    """Each host's predicted ``norm_perf`` for the workload next to its residents, with intervals,
    least slowed first; ``best`` is the first host with an estimate."""
    task = get_task("interference")
    champion = served(state, task.name, response)
    hosts = [(host.name, host.residents) for host in body.hosts]
    placed = place(task, champion.predictor, state.catalogue, body.workload, hosts, body.coverage)
    return PlaceResponse(
        model=ModelInfoPublic(**vars(champion.info)),
        best=next((p.host for p in placed if p.rank is not None), None),
        coverage=body.coverage,
        hosts=[asdict(p) for p in placed],
    )
