"""``POST /v1/interference/place``: candidate hosts ranked by the slowdown a workload would suffer there."""

from dataclasses import asdict

from fastapi import APIRouter, Response
from preflight.models.placement import place
from preflight.models.task import get_task
from preflight.service.deps import StateDep, served
from preflight.service.schemas import ModelInfoPublic, PlaceRequest, PlaceResponse

router = APIRouter(tags=["interference"])


@router.post("/v1/interference/place", response_model=PlaceResponse)
def place_workload(body: PlaceRequest, state: StateDep, response: Response) -> PlaceResponse:
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
