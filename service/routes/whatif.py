"""``POST /v1/whatif``: one workload on candidate devices, ranked by time, energy and cost per run."""

from typing import Annotated

from fastapi import APIRouter, Body, Response
from fastapi.openapi.models import Example
from preflight.models.core.task import get_task
from preflight.models.tools import whatif
from preflight.service.deps import ModelsDep, served
from preflight.service.routing import UnicodeRoute
from preflight.service.schemas import WhatIfRequest, WhatIfResponse

router = APIRouter(tags=["whatif"], route_class=UnicodeRoute)

_GEMMS = [
    {"m": 4096, "n": 4096, "k": 4096, "dtype": "fp16"},
    {"m": 1024, "n": 512, "k": 2048, "trans_a": True},
    {"m": 64, "n": 64, "k": 64},
]
COMPARISONS: dict[str, Example] = {
    "priced": {
        "summary": "three GEMMs per run on three GPUs, two of them priced",
        "value": {
            "workload": {"task": "gemm", "items": _GEMMS},
            "devices": ["nvidia-h100-sxm5-80gb", "Tesla V100-SXM2-16GB", "p100"],
            "prices": {"nvidia-h100-sxm5-80gb": 3.5, "p100": 0.5},
        },
    },
    "all": {
        "summary": "one GEMM on every GPU of the catalogue",
        "value": {"workload": {"task": "gemm", "items": _GEMMS[:1]}, "devices": "all"},
    },
    "workload-file": {
        "summary": "the file `preflight whatif --workload` reads, as it is: every GPU, no prices",
        "value": {"task": "gemm", "items": _GEMMS},
    },
}


@router.post("/v1/whatif", response_model=WhatIfResponse)
def what_if(
    body: Annotated[WhatIfRequest, Body(openapi_examples=COMPARISONS)], models: ModelsDep, response: Response
) -> WhatIfResponse:
    """Time (and energy, and cost where a price is given) per run of the workload on each device, with
    intervals; devices the model cannot answer for are listed under ``skipped``.

    The body is ``{"workload": {"task", "items"}, "devices", "prices", "coverage"}``, or the workload
    itself with the options beside it: ``{"task", "items", ...}``, so the file ``preflight whatif
    --workload`` reads can be posted as it is."""
    task = get_task(body.work.task)
    names = None if body.devices == "all" else body.devices
    devices = whatif.candidates(task, models.catalogue, names)
    prices = whatif.prices_by_device(models.catalogue, devices, body.prices)
    champion = served(models, task.name, response)
    result = whatif.compare(
        task, champion.predictor, models.catalogue, body.work.items, devices, prices, body.coverage
    )
    return WhatIfResponse.of(result, champion.info)
