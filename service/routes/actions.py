"""Every task's actions (``models/core/actions.py``), each a ``POST`` route at its own path, generated from
the registry: the body validated as the action's request, answered by the task's model as served."""

import inspect
from typing import Annotated

from fastapi import APIRouter, Body, Response
from preflight.models.core.actions import Action, Served
from preflight.models.core.task import Task, all_actions
from preflight.service.deps import ModelsDep, served
from preflight.service.routing import UnicodeRoute


def router() -> APIRouter:
    """One route per action of every registered task, tagged by its path's domain (``/v1/nas/...``)."""
    routes = APIRouter(route_class=UnicodeRoute)
    for task, action in all_actions().values():
        routes.add_api_route(
            action.path,
            _endpoint(task, action),
            methods=["POST"],
            response_model=action.response,
            name=action.answer.__name__,
            summary=action.summary,
            description=action.description,
            tags=[action.path.split("/")[2]],
        )
    return routes


def _endpoint(task: Task, action: Action):
    def answer(body, models: ModelsDep, response: Response):  # typed by the signature set below
        result = action.answer(Served(task, served(models, task.name, response), models.devices), body)
        if result.model.adaptation:  # type: ignore[attr-defined]
            response.headers["X-Preflight-Adaptation"] = result.model.adaptation  # type: ignore[attr-defined]
        return result

    request = Annotated[action.request, Body(openapi_examples=action.examples)]  # type: ignore[name-defined]
    parameters = [
        inspect.Parameter("body", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=request),
        inspect.Parameter("models", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=ModelsDep),
        inspect.Parameter("response", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Response),
    ]
    answer.__signature__ = inspect.Signature(parameters, return_annotation=action.response)  # type: ignore[attr-defined]
    return answer
