"""``POST /v1/whatif``: one workload on candidate devices, ranked by time, energy and cost per run."""

from fastapi import APIRouter, Response
from preflight.models import whatif
from preflight.models.task import get_task
from preflight.service.deps import StateDep, served
from preflight.service.schemas import WhatIfRequest, WhatIfResponse

router = APIRouter(tags=["whatif"])


@router.post("/v1/whatif", response_model=WhatIfResponse)
def what_if(body: WhatIfRequest, state: StateDep, response: Response) -> WhatIfResponse:
    """Time (and energy, and cost where a price is given) per run of the workload on each device, with
    intervals; devices the model cannot answer for are listed under ``skipped``."""
    task = get_task(body.workload.task)
    names = None if body.devices == "all" else body.devices
    devices = whatif.candidates(task, state.catalogue, names)
    prices = whatif.prices_by_device(state.catalogue, devices, body.prices)
    champion = served(state, task.name, response)
    result = whatif.compare(
        task, champion.predictor, state.catalogue, body.workload.items, devices, prices, body.coverage
    )
    return WhatIfResponse.of(result, champion.info)
