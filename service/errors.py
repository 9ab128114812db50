"""The one place where preflight's error tree, and request validation, become HTTP."""

import json
from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from preflight.data.errors import (
    DataError,
    DeviceConflict,
    InvalidFields,
    ModelStateError,
    ModelUnavailable,
    NotReadyYet,
    NotTrained,
    OverBudget,
    PreflightError,
    UnknownDevice,
    UnknownTask,
    UsageError,
)
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException
from starlette.routing import Match

#: The most specific kind first: UnknownTask is a UsageError, NotTrained a ModelStateError.
STATUS = {
    UnknownTask: 404,
    UnknownDevice: 404,
    NotTrained: 503,
    NotReadyYet: 503,
    ModelUnavailable: 503,
    DataError: 422,
    UsageError: 400,
    DeviceConflict: 409,
    ModelStateError: 409,
}
#: The methods a 405's ``Allow`` may list.
METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
#: A 422 lists at most this many errors, and echoes at most this many characters of each input.
MAX_ERRORS, MAX_ECHO = 20, 200


class Problem(BaseModel):
    """An error answer: what is wrong and the kind of error."""

    detail: str
    error: str | None = None


class FieldError(BaseModel):
    """One invalid field of a request: where it is, what is wrong, and what was sent (or an excerpt)."""

    loc: list[str | int]
    msg: str
    type: str
    input: Any = None
    input_excerpt: str | None = None


class Invalid(BaseModel):
    """A 422: the request's invalid fields (``detail`` a list), or, for well-formed items the data
    cannot answer (e.g. a device without the spec a model needs), a sentence and ``error``."""

    detail: list[FieldError] | str
    error: str | None = None
    more_errors: int | None = Field(None, description="invalid fields beyond those listed")


#: What any route may answer, whatever it does: the app's limits on bodies and time. A body whose
#: Content-Length is over the limit is refused before it is read, in plain text; one that turns out
#: longer while it is read gets a Problem.
LIMITS: dict[int | str, dict] = {
    413: {
        "model": Problem,
        "content": {"text/plain": {"schema": {"type": "string"}}},
        "description": "a request body over PREFLIGHT_MAX_BODY_BYTES",
    },
    504: {"model": Problem, "description": "no answer within PREFLIGHT_REQUEST_TIMEOUT_S"},
}
#: What any /v1 route may answer besides its own result, for the OpenAPI document.
RESPONSES: dict[int | str, dict] = {
    400: {"model": Problem, "description": "options that cannot work together, or a body that is not JSON"},
    404: {"model": Problem, "description": "an unknown task or device (the answer lists known ones)"},
    409: {"model": Problem, "description": "a name that another device owns, or a model that cannot answer"},
    422: {"model": Invalid, "description": "invalid fields, or items the data at hand cannot answer"},
    503: {
        "model": Problem,
        "description": "the task has no model that answers (untrained, or damaged), or is still loading or "
        "training its first one at start-up (with Retry-After)",
    },
    **LIMITS,
}


def _status(exc: PreflightError) -> int:
    return next((code for kind, code in STATUS.items() if isinstance(exc, kind)), 400)


# Starlette types a handler as taking any Exception; each is registered for one class only.
async def preflight_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, PreflightError)
    body: dict[str, object] = {"detail": str(exc), "error": type(exc).__name__}
    if isinstance(exc, UnknownTask):
        body["known"] = exc.known
    if isinstance(exc, OverBudget):
        body["loc"] = exc.loc
    if isinstance(exc, UnknownDevice):
        body["close_matches"] = exc.close
        if exc.items:
            body["loc"] = ["body", "items", exc.items[0], "device"]
            body["items"] = exc.items
    headers = {"Retry-After": str(exc.retry_after_s)} if isinstance(exc, NotReadyYet) else None
    return JSONResponse(body, status_code=_status(exc), headers=headers)


def _trimmed(error: dict) -> dict:
    """The error with its input cut to an excerpt of :data:`MAX_ECHO` characters, and so are the
    field names and message (an unknown key of a megabyte is both)."""
    kept = {k: v for k, v in error.items() if k != "input"} | _echo(error)
    kept["loc"] = [_cut(part) if isinstance(part, str) else part for part in error.get("loc", ())]
    if isinstance(kept.get("msg"), str):
        kept["msg"] = _cut(kept["msg"])
    return kept


def _cut(text: str) -> str:
    return text if len(text) <= MAX_ECHO else text[:MAX_ECHO] + "..."


def _echo(error: dict) -> dict:
    if "input" not in error:
        return {}
    try:
        text = json.dumps(jsonable_encoder(error["input"]), allow_nan=False)
    except (ValueError, TypeError):  # 1e400 parses to infinity; a value JSON cannot carry
        return {}
    if len(text) <= MAX_ECHO:
        return {"input": error["input"]}
    return {"input_excerpt": _cut(text)}


async def validation_error(request: Request, exc: Exception) -> JSONResponse:
    """FastAPI's 422 (each error names its field), at most :data:`MAX_ERRORS` of them, each echoing
    at most an excerpt of its input; a request whose fields cannot be answered together
    (``InvalidFields``) gets the same, each field under ``body``."""
    if isinstance(exc, InvalidFields):
        exc = RequestValidationError([{**e, "loc": ("body", *e["loc"])} for e in exc.errors])
    assert isinstance(exc, RequestValidationError)
    found = exc.errors()
    body: dict[str, object] = {"detail": jsonable_encoder([_trimmed(e) for e in found[:MAX_ERRORS]])}
    if len(found) > MAX_ERRORS:
        body["more_errors"] = len(found) - MAX_ERRORS
    return JSONResponse(body, status_code=422)


async def http_error(request: Request, exc: Exception) -> Response:
    """FastAPI's answer, except that a 405's ``Allow`` lists every method of the path (Starlette
    names only those of the first route on it: ``GET`` where ``POST /v1/devices`` exists too), HEAD
    wherever GET is (``middleware.HeadAsGet``)."""
    assert isinstance(exc, HTTPException)
    if exc.status_code == 405:
        routes = request.app.router.routes
        allowed = [
            method
            for method in METHODS
            if any(
                route.matches({**request.scope, "method": "GET" if method == "HEAD" else method})[0]
                is Match.FULL
                for route in routes
            )
        ]
        if allowed:
            exc.headers = {**(exc.headers or {}), "Allow": ", ".join(allowed)}
    return await http_exception_handler(request, exc)


def install(app: FastAPI) -> None:
    app.add_exception_handler(PreflightError, preflight_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(InvalidFields, validation_error)
    app.add_exception_handler(HTTPException, http_error)
