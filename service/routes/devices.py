"""``/v1/devices``: the catalogue, registering a device from its spec sheet and/or measurements, and
taking either back."""

import hashlib
import json
from typing import Annotated

from fastapi import APIRouter, Body, Depends, Header, Path, Query
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.models import Example
from preflight.data.names import MAX_NAME
from preflight.models.core.task import get_task
from preflight.models.registry.devices import (
    MAX_IDEMPOTENCY_KEYS,
    DevicePublic,
    Idempotency,
    IdempotencyKeyReused,
)
from preflight.service.deps import KEY_RESPONSES, DevicesDep, ModelsDep, require_api_key
from preflight.service.routing import UnicodeRoute
from preflight.service.schemas import DeviceRegistration

router = APIRouter(tags=["devices"], route_class=UnicodeRoute)

#: Example bodies of a registration: a spec sheet, and measurements of a device the catalogue knows.
REGISTRATIONS: dict[str, Example] = {
    "spec": {
        "summary": "a new GPU from its spec sheet",
        "value": {
            "spec": {
                "id": "lab-gpu",
                "name": "Lab GPU 24GB",
                "vendor": "nvidia",
                "kind": "gpu",
                "architecture": "ada",
                "compute_units": 128,
                "boost_clock_mhz": 2520,
                "memory_gb": 24,
                "memory_bandwidth_gbs": 1008,
                "tdp_w": 450,
                "peak_tflops": {"fp32": 82.6, "fp16": 165.2},
            }
        },
    },
    "measurements": {
        "summary": "GEMM runtimes measured on a catalogue device",
        "value": {
            "device": "Tesla T4",
            "task": "gemm",
            "measurements": [
                {"m": 1024, "n": 1024, "k": 1024, "runtime_ms": 0.45},
                {"m": 4096, "n": 4096, "k": 4096, "dtype": "fp16", "runtime_ms": 5.1},
            ],
        },
    },
}
#: Example names: one the catalogue resolves, one of its aliases, and a device the example registers.
KNOWN: dict[str, Example] = {
    "name": {"summary": "a catalogue name", "value": "Tesla V100-SXM2-16GB"},
    "alias": {"summary": "an alias", "value": "H100 PCIe"},
}
REGISTERED: dict[str, Example] = {"registered": {"summary": "a registered device", "value": "lab-gpu"}}
#: A client's Idempotency-Key: visible ASCII, as a header carries it.
IdempotencyKey = Annotated[
    str | None,
    Header(
        min_length=1,
        max_length=MAX_NAME,
        pattern=r"^[!-~]+$",
        description="a key of the client's choosing (a UUID): the request repeated with the same key and "
        "body changes nothing again and gets the first answer (the service remembers the last "
        f"{MAX_IDEMPOTENCY_KEYS:,} keys)",
    ),
]


@router.get("/v1/devices", response_model=list[DevicePublic])
def list_devices(devices: DevicesDep) -> list[DevicePublic]:
    return [devices.describe(spec) for spec in devices.catalogue]


@router.get("/v1/devices/{name}", response_model=DevicePublic)
def get_device(
    name: Annotated[str, Path(max_length=MAX_NAME, openapi_examples=KNOWN)], devices: DevicesDep
) -> DevicePublic:
    """Any name the catalogue resolves (``H100 PCIe``, ``Tesla V100-SXM2-16GB``, an lscpu model name); 404
    for an unknown name, with close matches, and for one several devices fit (``h100``), listing them."""
    return devices.describe(devices.catalogue.lookup(name))


@router.post(
    "/v1/devices",
    response_model=DevicePublic,
    status_code=201,
    responses=KEY_RESPONSES,
    dependencies=[Depends(require_api_key)],
)
def register_device(
    body: Annotated[DeviceRegistration, Body(openapi_examples=REGISTRATIONS)],
    models: ModelsDep,
    idempotency_key: IdempotencyKey = None,
) -> DevicePublic:
    """Register a spec sheet, and/or give K measurements that adapt the champion to the device, as one
    change: each measurement is checked first against the device's physical limits (never faster than
    its roofline, never drawing more than 1.2x its TDP) and the model (a 422 names the row and why). A
    name that looks like another device's (any case, width or script) is a 409. With an
    ``Idempotency-Key``, a retry changes nothing twice. Needs an API key."""
    once = None if idempotency_key is None else Idempotency(idempotency_key, _digest(body))
    try:  # registered after the measurements were validated: a refused request registers nothing (422)
        registration = models.devices.registration(body.spec, body.device, body.task, body.measurements)
        return models.register_device(registration, once)
    except IdempotencyKeyReused as exc:
        raise RequestValidationError(
            [{"type": "value_error", "loc": ("header", "idempotency-key"), "msg": str(exc), "input": exc.key}]
        ) from None


def _digest(body: DeviceRegistration) -> str:
    """What a registration asks, as a digest (a retry with the same key must ask the same)."""
    canonical = json.dumps(body.model_dump(mode="json"), sort_keys=True, ensure_ascii=True)
    return hashlib.sha256(canonical.encode()).hexdigest()


@router.delete(
    "/v1/devices/{name}",
    response_model=DevicePublic,
    responses=KEY_RESPONSES,
    dependencies=[Depends(require_api_key)],
)
def delete_device(
    name: Annotated[str, Path(max_length=MAX_NAME, openapi_examples=REGISTERED)], models: ModelsDep
) -> DevicePublic:
    """Remove a device you registered, with its measurements (the models forget them). A catalogue
    device, or one a served model was trained on, cannot be removed (409 says why); its measurements
    can (``DELETE /v1/devices/{name}/measurements``). Needs an API key."""
    return models.devices.describe(models.remove_device(name), {})


@router.delete(
    "/v1/devices/{name}/measurements",
    response_model=DevicePublic,
    responses=KEY_RESPONSES,
    dependencies=[Depends(require_api_key)],
)
def delete_measurements(
    name: Annotated[str, Path(max_length=MAX_NAME, openapi_examples=KNOWN)],
    devices: DevicesDep,
    task: Annotated[
        str | None, Query(max_length=MAX_NAME, description="only this task's measurements (default: all)")
    ] = None,
) -> DevicePublic:
    """Forget the measurements given for a device (a catalogue device too), of one task or of all: its
    answers are those of the model as trained again. The device as it remains, with the measurements
    still held. Needs an API key."""
    return devices.remove_measurements(name, None if task is None else get_task(task))
