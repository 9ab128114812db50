"""``/v1/devices``: the catalogue, and registering a device from its spec sheet and/or measurements."""

import math
from collections import Counter
from typing import Annotated

from fastapi import APIRouter, Body, Depends, Path
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.models import Example
from preflight.data.catalogue import DeviceSpec
from preflight.models.datasets import device_spec
from preflight.models.task import Task, get_task
from preflight.service.deps import KEY_RESPONSES, StateDep, require_api_key
from preflight.service.schemas import MAX_NAME, DevicePublic, DeviceRegistration
from preflight.service.state import ImplausibleMeasurements
from pydantic import ValidationError

router = APIRouter(tags=["devices"])

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
    "alias": {"summary": "an alias", "value": "p100"},
}
REGISTERED: dict[str, Example] = {"registered": {"summary": "a registered device", "value": "lab-gpu"}}


def _counts(state) -> dict[str, Counter]:
    return {task: Counter(row["device_id"] for row in rows) for task, rows in state.measurements.items()}


def _public(spec: DeviceSpec, counts: dict[str, Counter]) -> DevicePublic:
    return DevicePublic(spec=spec, measurements={t: c[spec.id] for t, c in counts.items() if c[spec.id]})


@router.get("/v1/devices", response_model=list[DevicePublic])
def list_devices(state: StateDep) -> list[DevicePublic]:
    counts = _counts(state)
    return [_public(spec, counts) for spec in state.catalogue]


@router.get("/v1/devices/{name}", response_model=DevicePublic)
def get_device(
    name: Annotated[str, Path(max_length=MAX_NAME, openapi_examples=KNOWN)], state: StateDep
) -> DevicePublic:
    """Any name the catalogue resolves (``p100``, ``Tesla V100-SXM2-16GB``, an lscpu model name)."""
    return _public(state.catalogue.resolve(name), _counts(state))


def _measurement_rows(task: Task, device_id: str, measurements: list[dict]) -> list[dict]:
    """Validate each measurement as the task's item plus positive targets; 422 names the field."""
    rows, errors = [], []
    for i, raw in enumerate(measurements):
        item_fields = {k: v for k, v in raw.items() if k not in task.targets} | {"device": device_id}
        targets = {k: raw[k] for k in task.targets if raw.get(k) is not None}
        try:
            item = task.item.model_validate(item_fields)
        except ValidationError as exc:
            errors += [
                {**e, "loc": ("body", "measurements", i, *e["loc"])} for e in exc.errors(include_url=False)
            ]
            continue
        bad = [t for t, v in targets.items() if not _positive_number(v)]
        if not targets or bad:
            errors.append(
                {
                    "type": "value_error",
                    "loc": ("body", "measurements", i, *(bad[:1] or ["targets"])),
                    "msg": f"needs positive, finite measured values for at least one of {list(task.targets)}",
                }
            )
            continue
        rows.append(task.items_to_rows([item]).iloc[0].to_dict() | targets | {"device_id": device_id})
    if errors:
        raise RequestValidationError(errors)
    return rows


def _positive_number(value: object) -> bool:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value) and value > 0
    except OverflowError:  # an integer of 400 digits
        return False


@router.post(
    "/v1/devices",
    response_model=DevicePublic,
    status_code=201,
    responses=KEY_RESPONSES,
    dependencies=[Depends(require_api_key)],
)
def register_device(
    body: Annotated[DeviceRegistration, Body(openapi_examples=REGISTRATIONS)], state: StateDep
) -> DevicePublic:
    """Register a spec sheet, and/or give K measurements that adapt the champion to the device
    (each checked against the device's roofline and the model first). Needs an API key."""
    if body.spec is None and body.device is None:
        raise RequestValidationError(
            [{"type": "missing", "loc": ("body", "spec"), "msg": "give a spec or a device", "input": None}]
        )
    task = get_task(body.task) if body.measurements else None
    if task is not None and task.device_column is None:
        raise RequestValidationError(
            [
                {
                    "type": "value_error",
                    "loc": ("body", "task"),
                    "input": body.task,
                    "msg": f"task {task.name!r} does not depend on a device; measurements adapt "
                    "a device's model (e.g. gemm, nas-latency)",
                }
            ]
        )
    spec, new = (body.spec, True) if body.spec else device_spec(task, body.device or "", state.catalogue)
    rows = _measurement_rows(task, spec.id, body.measurements) if task is not None else []
    try:  # registered after the measurements were validated: a refused request registers nothing
        state.register_device(spec if new else None, task, rows)
    except ImplausibleMeasurements as exc:
        raise RequestValidationError(
            [
                {"type": "value_error", "loc": ("body", "measurements", i, target), "msg": why}
                for i, target, why in exc.problems
            ]
        ) from None
    return _public(state.catalogue.resolve(spec.id), _counts(state))


@router.delete(
    "/v1/devices/{name}",
    response_model=DevicePublic,
    responses=KEY_RESPONSES,
    dependencies=[Depends(require_api_key)],
)
def delete_device(
    name: Annotated[str, Path(max_length=MAX_NAME, openapi_examples=REGISTERED)], state: StateDep
) -> DevicePublic:
    """Remove a device you registered, with its measurements (the models forget them). A catalogue
    device cannot be removed (409). Needs an API key."""
    return _public(state.remove_device(name), {})
