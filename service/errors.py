"""The one place where preflight's error tree, and request validation, become HTTP."""

import json

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from preflight.data.errors import (
    DataError,
    DeviceConflict,
    ModelStateError,
    NotTrained,
    PreflightError,
    UnknownDevice,
    UnknownTask,
    UsageError,
)

#: The most specific kind first: UnknownTask is a UsageError, NotTrained a ModelStateError.
STATUS = {
    UnknownTask: 404,
    UnknownDevice: 404,
    NotTrained: 503,
    DataError: 422,
    UsageError: 400,
    DeviceConflict: 409,
    ModelStateError: 409,
}
#: A rejected input larger than this (a 10,001-item list) is not echoed back in the 422.
MAX_ECHOED_ITEMS = 20


def _status(exc: PreflightError) -> int:
    return next((code for kind, code in STATUS.items() if isinstance(exc, kind)), 400)


# Starlette types a handler as taking any Exception; each is registered for one class only.
async def preflight_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, PreflightError)
    body: dict[str, object] = {"detail": str(exc), "error": type(exc).__name__}
    if isinstance(exc, UnknownTask):
        body["known"] = exc.known
    if isinstance(exc, UnknownDevice):
        body["close_matches"] = exc.close
        if exc.items:
            body["loc"] = ["body", "items", exc.items[0], "device"]
            body["items"] = exc.items
    return JSONResponse(body, status_code=_status(exc))


def _trimmed(error: dict) -> dict:
    """The error without its input where that is huge or not valid JSON (1e400 parses to infinity)."""
    value = error.get("input")
    if isinstance(value, (list, dict)) and len(value) > MAX_ECHOED_ITEMS or not _json_safe(value):
        return {k: v for k, v in error.items() if k != "input"}
    return error


def _json_safe(value: object) -> bool:
    try:
        json.dumps(jsonable_encoder(value), allow_nan=False)
        return True
    except ValueError:
        return False


async def validation_error(request: Request, exc: Exception) -> JSONResponse:
    """FastAPI's 422 (each error names its field), without echoing huge inputs back."""
    assert isinstance(exc, RequestValidationError)
    return JSONResponse({"detail": jsonable_encoder([_trimmed(e) for e in exc.errors()])}, status_code=422)


def install(app: FastAPI) -> None:
    app.add_exception_handler(PreflightError, preflight_error)
    app.add_exception_handler(RequestValidationError, validation_error)
