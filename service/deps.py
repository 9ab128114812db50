"""Dependencies shared by routes: the served models, the device registry, and the API-key checks.

Routes that change state (registration, deletion, reload) always need a key; predictions and
listings need one only with ``PREFLIGHT_PROTECT_READS``. The keys are ``PREFLIGHT_API_KEYS``, or
else one generated at first start in ``HOME/api-key``.
"""

import logging
import os
import secrets
import time
from typing import Annotated

from fastapi import Depends, HTTPException, Request, Response, Security
from fastapi.security import APIKeyHeader
from preflight.data.errors import DataError
from preflight.data.settings import Settings
from preflight.models.registry.devices import Champion, DeviceRegistry
from preflight.service.served import ServedModels

log = logging.getLogger("preflight.service")

_api_key = APIKeyHeader(name="X-API-Key", auto_error=False)
#: What a route guarded by a key may answer, for the OpenAPI document.
KEY_RESPONSES: dict[int | str, dict] = {401: {"description": "missing or unknown X-API-Key"}}


async def get_models(request: Request) -> ServedModels:  # async: no thread hop per request
    return request.app.state.models


async def get_devices(request: Request) -> DeviceRegistry:
    return request.app.state.devices


ModelsDep = Annotated[ServedModels, Depends(get_models)]
DevicesDep = Annotated[DeviceRegistry, Depends(get_devices)]


async def require_api_key(request: Request, key: Annotated[str | None, Security(_api_key)]) -> None:
    """One of the service's keys in X-API-Key: on routes that change state, and on predictions and
    listings with PREFLIGHT_PROTECT_READS (the app adds it to those only then)."""
    if not _known(key, request.app.state.api_keys):
        raise HTTPException(status_code=401, detail=_missing(request.app.state.models.settings))


def _known(key: str | None, keys: tuple[str, ...]) -> bool:
    """Whether ``key`` is one of ``keys`` (compared in constant time, as UTF-8 bytes: a header of any
    characters is a key like another, and compare_digest takes non-ASCII text only as bytes)."""
    if key is None:
        return False
    sent = key.encode()
    return any(secrets.compare_digest(sent, known.encode()) for known in keys)


def _missing(settings: Settings) -> str:
    where = (
        "PREFLIGHT_API_KEYS"
        if settings.api_keys
        else "the file api-key in PREFLIGHT_HOME (the service's log names it at start)"
    )
    return f"missing or unknown X-API-Key: use a key from {where}"


def api_keys(settings: Settings) -> tuple[str, ...]:
    """``PREFLIGHT_API_KEYS``, or the home's own key, generated on first start (owner-only file)."""
    if settings.api_keys:
        return tuple(settings.api_keys)
    path = settings.api_key_file.resolve()  # the log names it wherever the service was started from
    settings.home.mkdir(parents=True, exist_ok=True)
    try:  # exclusive: of several workers starting at once, one writes the key and all read it
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        log.info("routes that change state take the API key in %s", path)
    else:
        with os.fdopen(fd, "w") as fh:
            fh.write(secrets.token_urlsafe(32) + "\n")
        log.warning("generated an API key for routes that change state: see %s", path)
    for _ in range(100):  # another worker may be writing it right now
        key = path.read_text().strip()
        if key:
            return (key,)
        time.sleep(0.01)
    raise DataError(f"{path} is empty: delete it to have a key generated, or set PREFLIGHT_API_KEYS")


def served(models: ServedModels, task: str, response: Response) -> Champion:
    """The task's model, with headers naming the version that answers and, when the champion could
    not load, why an older one does (``X-Preflight-Fallback``)."""
    champion = models.champion(task)
    response.headers["X-Preflight-Model-Version"] = champion.info.version
    if champion.info.adaptation:
        response.headers["X-Preflight-Adaptation"] = champion.info.adaptation
    if champion.fallback:
        response.headers["X-Preflight-Fallback"] = champion.fallback
    return champion
