"""The one place where preflight's error tree becomes HTTP."""

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from preflight.data.errors import DataError, NotTrained, PreflightError, UnknownDevice, UnknownTask

STATUS = {DataError: 422, UnknownTask: 404, UnknownDevice: 404, NotTrained: 503}


def _status(exc: PreflightError) -> int:
    return next((code for kind, code in STATUS.items() if isinstance(exc, kind)), 400)


async def preflight_error(request: Request, exc: PreflightError) -> JSONResponse:
    body = {"detail": str(exc), "error": type(exc).__name__}
    if isinstance(exc, UnknownTask):
        body["known"] = exc.known
    if isinstance(exc, UnknownDevice):
        body["close_matches"] = exc.close
    return JSONResponse(body, status_code=_status(exc))


def install(app: FastAPI) -> None:
    app.add_exception_handler(PreflightError, preflight_error)
