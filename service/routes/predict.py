"""``POST /v1/{task}/predict``, one route per registered task, generated from the registry."""

from functools import cache
from typing import Annotated, Any

from fastapi import APIRouter, Body, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.models import Example
from preflight.data.errors import UnknownTask
from preflight.data.settings import Settings
from preflight.models.core import budget
from preflight.models.core.actions import ModelInfoPublic
from preflight.models.core.inference import predict_items
from preflight.models.core.task import Task, all_tasks, get_task
from preflight.models.registry.devices import Champion
from preflight.service.batching import Batcher
from preflight.service.deps import ModelsDep, served
from preflight.service.routing import UnicodeRoute
from preflight.service.schemas import (
    PredictRequest,
    PredictResponse,
    predict_request,
    predict_response,
)
from preflight.service.served import ServedModels
from pydantic import TypeAdapter, ValidationError

#: An answer as JSON, its predictions as ``Estimates.records`` made them: validating 10,000 of them
#: against the typed model of the route's document would cost more than predicting them.
_ANSWER = TypeAdapter(PredictResponse)


def _examples(task: Task) -> dict[str, Example]:
    """The task's example request: its example items."""
    return {"items": {"summary": f"{task.name} items", "value": {"items": list(task.examples)}}}


def _endpoint(task: Task):
    async def predict(body: PredictRequest, models: ModelsDep, response: Response) -> Response:
        champion = served(models, task.name, response)  # 503 before a single item is read
        costs, items = await run_in_threadpool(admitted, task, body.items, models.settings)  # loop stays free
        records = await _batcher(models, task).predict(champion, items, body.coverage, costs)
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
    them (``models/core/budget.py``), then the items validated as the task's item model with the service's
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


def _batcher(models: ServedModels, task: Task) -> Batcher:
    """The task's merger of concurrent requests (``service.batching``), made on first use."""
    if task.name not in models.batchers:

        def records(champion: Champion, items: list, coverage: float) -> list[dict]:
            return predict_items(task, champion.predictor, models.catalogue, items, coverage).records()

        models.batchers[task.name] = Batcher(records)
    return models.batchers[task.name]


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
