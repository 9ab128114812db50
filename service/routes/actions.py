"""Every task's actions (``models/core/actions.py``), each a ``POST`` route at its own path, generated from
the registry: the body validated as the action's request, answered by the task's model as served. A
``safe`` action (a read-only question of flat fields) is also a ``GET`` with its fields as query
parameters."""

import inspect
from typing import Annotated, Any

from fastapi import APIRouter, Body, Request, Response
from fastapi.exceptions import RequestValidationError
from preflight.data.errors import InvalidFields
from preflight.models.core.actions import Action, Served
from preflight.models.core.task import Task, all_actions
from preflight.service.deps import ModelsDep, served
from preflight.service.routing import UnicodeRoute
from pydantic import BaseModel, ValidationError


def router() -> APIRouter:
    """One route per action of every registered task, tagged by its path's domain (``/v1/nas/...``)."""
    routes = APIRouter(route_class=UnicodeRoute)
    for task, action in all_actions().values():
        common: dict[str, Any] = {
            "response_model": action.response,
            "summary": action.summary,
            "description": action.description,
            "tags": [action.path.split("/")[2]],
        }
        routes.add_api_route(
            action.path, _endpoint(task, action), methods=["POST"], name=action.answer.__name__, **common
        )
        if action.safe:
            routes.add_api_route(
                action.path,
                _query_endpoint(task, action),
                methods=["GET"],
                name=f"{action.answer.__name__}_get",
                openapi_extra={"parameters": _query_parameters(action.request)},
                **common,
            )
    return routes


def _answered(task: Task, action: Action, models: ModelsDep, response: Response, body: BaseModel):
    result = action.answer(Served(task, served(models, task.name, response), models.devices), body)
    if result.model.adaptation:  # type: ignore[attr-defined]
        response.headers["X-Preflight-Adaptation"] = result.model.adaptation  # type: ignore[attr-defined]
    return result


def _endpoint(task: Task, action: Action):
    def answer(body, models: ModelsDep, response: Response):  # typed by the signature set below
        return _answered(task, action, models, response, body)

    request = Annotated[action.request, Body(openapi_examples=action.examples)]  # type: ignore[name-defined]
    parameters = [
        inspect.Parameter("body", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=request),
        inspect.Parameter("models", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=ModelsDep),
        inspect.Parameter("response", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Response),
    ]
    answer.__signature__ = inspect.Signature(parameters, return_annotation=action.response)  # type: ignore[attr-defined]
    return answer


def _query_endpoint(task: Task, action: Action):
    """``GET path?field=value``: the query read as the request's fields, parsed from text as a URL
    carries them (``k=10`` is the integer 10), every error located under ``query``."""

    def answer(request: Request, models: ModelsDep, response: Response):
        try:
            body = action.request.model_validate_strings(dict(request.query_params))
            return _answered(task, action, models, response, body)
        except (ValidationError, InvalidFields) as exc:
            found = exc.errors() if isinstance(exc, ValidationError) else exc.errors
            raise RequestValidationError([{**e, "loc": ("query", *e["loc"])} for e in found]) from None

    answer.__annotations__["return"] = action.response
    return answer


def _query_parameters(request: type[BaseModel]) -> list[dict[str, Any]]:
    """The OpenAPI query parameters of a flat request: one per field, with its schema."""
    schema = request.model_json_schema()
    required = set(schema.get("required", ()))
    return [
        {
            "name": name,
            "in": "query",
            "required": name in required,
            "description": field.get("description", ""),
            "schema": {k: v for k, v in field.items() if k not in ("description", "title")},
        }
        for name, field in schema["properties"].items()
    ]
