"""``/v1/fpga/kernels/{kernel}/designs``: a kernel's synthesized designs, which adapt its estimates
(the exploration, ``POST /v1/fpga/explore``, is the fpga task's action)."""

from typing import Annotated

from fastapi import APIRouter, Body, Depends, Path
from fastapi.openapi.models import Example
from preflight.models.core.task import get_task
from preflight.models.registry.devices import InvalidRegistration, SubjectPublic
from preflight.service.deps import KEY_RESPONSES, DevicesDep, ModelsDep, require_api_key
from preflight.service.routing import UnicodeRoute
from preflight.service.schemas import (
    MAX_NAME,
    DesignsRegistration,
)

router = APIRouter(tags=["fpga"], route_class=UnicodeRoute)

#: The fpga task's first example design, whose kernel and graph the registration's example names.
_DESIGN = get_task("fpga").examples[0]

#: Example registration: two synthesized designs of the example kernel, one that fit and one that did not.
REGISTRATIONS: dict[str, Example] = {
    "designs": {
        "summary": "two synthesized designs of a kernel given by its graph",
        "value": {
            "designs": [
                {
                    "graph": _DESIGN["graph"],
                    "pragmas": {"__PARA__L0": 4},
                    "valid": 1,
                    "cycles": 90,
                    "lut": 0.02,
                    "ff": 0.01,
                    "dsp": 0.01,
                    "bram": 0.0,
                },
                {
                    "graph": _DESIGN["graph"],
                    "pragmas": {"__PARA__L0": 64, "__PIPE__L0": "flatten"},
                    "valid": 0,
                },
            ]
        },
    }
}


@router.post(
    "/v1/fpga/kernels/{kernel}/designs",
    response_model=SubjectPublic,
    status_code=201,
    responses=KEY_RESPONSES,
    dependencies=[Depends(require_api_key)],
)
def register_designs(
    kernel: Annotated[str, Path(max_length=MAX_NAME)],
    body: Annotated[DesignsRegistration, Body(openapi_examples=REGISTRATIONS)],
    models: ModelsDep,
) -> SubjectPublic:
    """Synthesized designs of a kernel (a known kernel's name, or any name with the kernel's graph in
    each design) adapt that kernel's estimates only, every other kernel's answers unchanged: a
    Gaussian process per target spreads the designs' measurements (of P(valid): their residual
    against the model) over pragma space, with intervals calibrated on kernels held out in training.
    Needs an API key."""
    try:
        registration = models.devices.subject_registration("fpga", kernel, body.designs)
    except InvalidRegistration as exc:
        raise exc.under("designs") from None
    models.register_device(registration)
    return models.devices.describe_subject(get_task("fpga"), kernel)


@router.delete(
    "/v1/fpga/kernels/{kernel}/designs",
    response_model=SubjectPublic,
    responses=KEY_RESPONSES,
    dependencies=[Depends(require_api_key)],
)
def remove_designs(kernel: Annotated[str, Path(max_length=MAX_NAME)], devices: DevicesDep) -> SubjectPublic:
    """Forget a kernel's synthesized designs: its estimates are the unadapted model's again, every
    other kernel's unchanged. Needs an API key."""
    return devices.remove_subject(get_task("fpga"), kernel)


@router.get("/v1/fpga/kernels/{kernel}/designs", response_model=SubjectPublic)
def kernel_designs(kernel: Annotated[str, Path(max_length=MAX_NAME)], devices: DevicesDep) -> SubjectPublic:
    """How many synthesized designs of a kernel adapt its estimates."""
    return devices.describe_subject(get_task("fpga"), kernel)
