"""``POST /v1/{task}/predict``, one route per registered task, generated from the registry."""

from functools import cache
from typing import Annotated, Any

from fastapi import APIRouter, Body, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.models import Example
from preflight.data.errors import UnknownTask
from preflight.data.settings import Settings
from preflight.models import budget
from preflight.models.inference import predict_items
from preflight.models.task import Task, all_tasks, get_task
from preflight.service.batching import Batcher
from preflight.service.deps import StateDep, served
from preflight.service.routing import UnicodeRoute
from preflight.service.schemas import (
    ModelInfoPublic,
    PredictRequest,
    PredictResponse,
    predict_request,
    predict_response,
)
from preflight.service.state import Champion, ServiceState
from pydantic import TypeAdapter, ValidationError

#: An answer as JSON, its predictions as ``Estimates.records`` made them: validating 10,000 of them
#: against the typed model of the route's document would cost more than predicting them.
_ANSWER = TypeAdapter(PredictResponse)

#: A NAS-Bench-201 cell in its arch_str notation.
NB201_CELL = "|nor_conv_3x3~0|+|nor_conv_3x3~0|skip_connect~1|+|nor_conv_3x3~0|none~1|nor_conv_1x1~2|"
#: Two 5-second samples of a MARLA host: IPC, L3 and L2 misses, C0 and C1 residency of 8 cores, then
#: the system's IPC, L3 and L2 misses, reads and writes.
_WINDOW = [
    [0.75, 0.28, 1.34, 3.28, 92.2, 0.83, 0.19, 0.79, 2.63, 87.0, 0.84, 0.19, 0.61, 2.49, 97.5, 2.82, 0.19,
     2.41, 31.8, 64.4, 2.8, 0.16, 2.07, 30.8, 64.7, 2.84, 0.17, 2.27, 30.8, 58.8, 0.86, 0.23, 2.01, 8.4,
     91.6, 0.55, 0.26, 3.5, 9.35, 86.9, 2.42, 1.68, 15.0, 2.91, 2.94],
    [0.72, 0.32, 1.53, 3.5, 90.8, 0.74, 0.21, 0.81, 2.69, 91.2, 0.78, 0.22, 0.64, 2.57, 97.4, 2.85, 0.2,
     2.45, 33.1, 62.7, 3.0, 0.15, 2.1, 33.9, 60.4, 2.53, 0.18, 2.05, 26.3, 67.6, 0.85, 0.24, 2.01, 8.12,
     91.9, 0.54, 0.27, 3.55, 9.28, 86.6, 2.41, 1.78, 15.2, 3.0, 2.97],
]  # fmt: skip
#: A loop of 64 iterations (y[i] = a * x[i]) as a program graph: its bound, its compare, the PARALLEL
#: and PIPELINE pragmas on it, and the body, in ProGraML's JSON form.
VSCALE = {
    "nodes": [
        {"text": "i32", "type": 2, "full_text": "i32 64"},
        {"text": "icmp", "type": 0, "full_text": "icmp slt i32 %i, 64"},
        {"text": "PARALLEL", "type": 3, "full_text": "#pragma ACCEL PARALLEL auto{__PARA__L0}"},
        {"text": "PIPELINE", "type": 3, "full_text": "#pragma ACCEL PIPELINE auto{__PIPE__L0}"},
        {"text": "load", "type": 0},
        {"text": "fmul", "type": 0},
        {"text": "store", "type": 0},
    ],
    "edges": [
        {"source": 0, "target": 1, "flow": 1},
        {"source": 2, "target": 1, "flow": 3},
        {"source": 3, "target": 1, "flow": 3},
        {"source": 1, "target": 4, "flow": 0},
        {"source": 4, "target": 5, "flow": 0},
        {"source": 5, "target": 6, "flow": 0},
    ],
}
#: Example items of each task's route, for its OpenAPI document.
EXAMPLE_ITEMS: dict[str, list[dict[str, Any]]] = {
    "gemm": [
        {"m": 4096, "n": 4096, "k": 4096, "dtype": "fp16", "device": "NVIDIA H100 80GB HBM3"},
        {"m": 1024, "n": 512, "k": 2048, "trans_a": True, "device": "Tesla V100-SXM2-16GB"},
    ],
    "fpga": [
        {"kernel": "vscale", "graph": VSCALE, "pragmas": {"__PARA__L0": 8, "__PIPE__L0": "flatten"}},
        {"kernel": "vscale", "graph": VSCALE, "pragmas": {"__PARA__L0": 1}, "tool": "v18"},
    ],
    "interference": [
        {
            "workload": "nginx",
            "load_rps": 2000,
            "replicas": 1,
            "neighbours": {"cpu": 1, "l3": 2},
            "solo": {"ipc": 0.9, "p99_ms": 0.15},
        }
    ],
    "interference-trace": [{"window": _WINDOW, "load_rps": 1000, "replicas": 2}],
    "model-latency": [
        {"model": "gpt2_large", "batch": 4, "seq": 1024, "mode": "inf", "device": "Tesla T4"},
        {
            "ops": [
                {
                    "op": "linear",
                    "input_shapes": [[8, 512, 1024], [4096, 1024]],
                    "output_shape": [8, 512, 4096],
                }
            ],
            "dtype": "fp16",
            "device": "NVIDIA A100 80GB PCIe",
        },
    ],
    "nas-accuracy": [{"space": "nb201", "arch": NB201_CELL, "dataset": "cifar100"}],
    "nas-latency": [
        {
            "space": "nb201",
            "arch": NB201_CELL,
            "dataset": "cifar100",
            "device": "Raspberry Pi 5",
            "framework": "litert",
        }
    ],
    "nas-curve": [
        {
            "space": "nb201",
            "arch": NB201_CELL,
            "dataset": "cifar10",
            "curve": [0.31, 0.47, 0.55],
            "budget": 200,
        }
    ],
}


def _examples(task: Task) -> dict[str, Example] | None:
    """The task's example request, if :data:`EXAMPLE_ITEMS` has its items."""
    if task.name not in EXAMPLE_ITEMS:
        return None
    return {"items": {"summary": f"{task.name} items", "value": {"items": EXAMPLE_ITEMS[task.name]}}}


def _endpoint(task: Task):
    async def predict(body: PredictRequest, state: StateDep, response: Response) -> Response:
        champion = served(state, task.name, response)  # 503 before a single item is read
        costs, items = await run_in_threadpool(admitted, task, body.items, state.settings)  # loop stays free
        records = await _batcher(state, task).predict(champion, items, body.coverage, costs)
        answer = PredictResponse(
            task=task.name, model=ModelInfoPublic(**vars(champion.info)), predictions=records
        )
        return Response(_ANSWER.dump_json(answer), media_type="application/json", headers=response.headers)

    # the route reads items as JSON and validates them off the event loop; its document names the
    # task's item model (``item_schemas`` adds it) with the task's examples
    predict.__annotations__["body"] = Annotated[PredictRequest, Body(openapi_examples=_examples(task))]
    predict.__doc__ = (
        f"Estimates of {', '.join(task.targets)} with intervals and an out-of-distribution flag."
    )
    return predict


def admitted(task: Task, raw: list[Any], settings: Settings) -> tuple[list[float], list[Any]]:
    """Each item's cost, checked against the request budget from the raw items before any work on
    them (``models/budget.py``), then the items validated as the task's item model with the service's
    settings; a 422 names each invalid field."""
    costs = budget.check(task, raw)
    try:
        return costs, _items_of(task.name).validate_python(raw, context=settings.validation_context())
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        raise RequestValidationError([{**e, "loc": ("body", "items", *e["loc"])} for e in errors]) from None


@cache
def _items_of(task: str) -> TypeAdapter:
    return TypeAdapter(list[get_task(task).item])  # type: ignore[misc, arg-type]


def item_schemas(document: dict[str, Any]) -> dict[str, Any]:
    """The OpenAPI document with each predict route's body named as its task's request model
    (``<Task>PredictRequest``, items of the task's item model), its schemas among the components."""
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    for task in all_tasks():
        model = predict_request(task)
        schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        for name, definition in schema.pop("$defs", {}).items():
            schemas.setdefault(name, definition)
        schemas[model.__name__] = schema
        body = document["paths"][f"/v1/{task.name}/predict"]["post"]["requestBody"]
        body["content"]["application/json"]["schema"] = {"$ref": f"#/components/schemas/{model.__name__}"}
    return document


def _batcher(state: ServiceState, task: Task) -> Batcher:
    """The task's merger of concurrent requests (``service.batching``), made on first use."""
    if task.name not in state.batchers:

        def records(champion: Champion, items: list, coverage: float) -> list[dict]:
            return predict_items(task, champion.predictor, state.catalogue, items, coverage).records()

        state.batchers[task.name] = Batcher(records)
    return state.batchers[task.name]


def router() -> APIRouter:
    api = APIRouter(tags=["predict"], route_class=UnicodeRoute)
    for task in all_tasks():
        api.add_api_route(
            f"/v1/{task.name}/predict",
            _endpoint(task),
            methods=["POST"],
            response_model=predict_response(task),
            operation_id=f"predict_{task.name.replace('-', '_')}",
        )

    @api.post("/v1/{task}/predict", include_in_schema=False)
    def unknown_task(task: str) -> None:
        raise UnknownTask(task, sorted(t.name for t in all_tasks()))

    return api
