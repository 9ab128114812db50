"""``POST /v1/fpga/explore``: pragma settings of one kernel ranked by predicted cycles among those
predicted to fit the board."""

from dataclasses import asdict
from typing import Annotated

from fastapi import APIRouter, Body, Response
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.models import Example
from preflight.data.fpga import FpgaItem
from preflight.data.settings import Settings
from preflight.models.explore import explore
from preflight.models.task import get_task
from preflight.service.deps import StateDep, served
from preflight.service.routing import UnicodeRoute
from preflight.service.schemas import ExploreRequest, ExploreResponse, ModelInfoPublic

router = APIRouter(tags=["fpga"], route_class=UnicodeRoute)

#: The fpga task's first example design, whose kernel and graph the exploration's example explores.
_DESIGN = get_task("fpga").examples[0]
EXPLORATIONS: dict[str, Example] = {
    "graph": {
        "summary": "unrolling and pipelining of a loop, from its program graph",
        "value": {
            "kernel": _DESIGN["kernel"],
            "graph": _DESIGN["graph"],
            "designs": [
                {"__PARA__L0": 1},
                {"__PARA__L0": 4, "__PIPE__L0": "flatten"},
                {"__PARA__L0": 16, "__PIPE__L0": "cg"},
            ],
            "limits": {"lut": 0.6},
        },
    }
}


@router.post("/v1/fpga/explore", response_model=ExploreResponse)
def explore_designs(
    body: Annotated[ExploreRequest, Body(openapi_examples=EXPLORATIONS)], state: StateDep, response: Response
) -> ExploreResponse:
    """Each setting's cycles, resources and P(valid) with intervals; the feasible ones (among the most
    likely valid, every resource within its limit) first, fewest cycles first; ``best`` is the first."""
    designs = _designs(body, state.settings)
    task = get_task("fpga")
    champion = served(state, task.name, response)
    limits = body.limits.model_dump()
    explored = explore(
        task,
        champion.predictor,
        state.catalogue,
        designs,
        limits,
        body.min_valid_probability,
        body.likely_valid_share,
        body.coverage,
    )
    return ExploreResponse(
        model=ModelInfoPublic(**vars(champion.info)),
        best=next((e.index for e in explored if e.rank is not None), None),
        coverage=body.coverage,
        designs=[asdict(e) for e in explored],
    )


def _designs(body: ExploreRequest, settings: Settings) -> list[FpgaItem]:
    """The request's settings as items of the service's own settings; a 422 when the graph cannot take
    one (or there is no graph), as the request's validation would give."""
    try:
        return body.designs_as_items(settings)
    except ValueError as exc:
        error = {"type": "value_error", "loc": ("body",), "msg": f"Value error, {exc}"}
        raise RequestValidationError([error | {"input": body.model_dump(mode="json")}]) from None
