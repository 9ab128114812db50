"""Dependencies shared by routes: the service state and the API-key checks.

Routes that change state (registration, deletion, reload) always need a key; predictions and
listings need one only with ``PREFLIGHT_PROTECT_READS``. The keys are ``PREFLIGHT_API_KEYS``, or
else one generated at first start in ``HOME/api-key``.
"""

import secrets
from typing import Annotated

from fastapi import Depends, HTTPException, Request, Response, Security
from fastapi.security import APIKeyHeader
from preflight.service.state import Champion, ServiceState

_api_key = APIKeyHeader(name="X-API-Key", auto_error=False)
#: What a route guarded by a key may answer, for the OpenAPI document.
KEY_RESPONSES: dict[int | str, dict] = {401: {"description": "missing or unknown X-API-Key"}}


async def get_state(request: Request) -> ServiceState:  # async: no thread hop per request
    return request.app.state.preflight


StateDep = Annotated[ServiceState, Depends(get_state)]


async def require_api_key(state: StateDep, key: Annotated[str | None, Security(_api_key)]) -> None:
    """One of the service's keys in X-API-Key: on routes that change state, and on predictions and
    listings with PREFLIGHT_PROTECT_READS (the app adds it to those only then)."""
    if not _known(key, state):
        raise HTTPException(status_code=401, detail=_missing(state))


def _known(key: str | None, state: ServiceState) -> bool:
    """Whether ``key`` is one of the service's (compared in constant time, as UTF-8 bytes: a header of
    any characters is a key like another, and compare_digest takes non-ASCII text only as bytes)."""
    if key is None:
        return False
    sent = key.encode()
    return any(secrets.compare_digest(sent, known.encode()) for known in state.api_keys)


def _missing(state: ServiceState) -> str:
    where = (
        "PREFLIGHT_API_KEYS"
        if state.settings.api_keys
        else "the file api-key in PREFLIGHT_HOME (the service's log names it at start)"
    )
    return f"missing or unknown X-API-Key: use a key from {where}"


def served(state: ServiceState, task: str, response: Response) -> Champion:
    """The task's model, with headers naming the version that answers and, when the champion could
    not load, why an older one does (``X-Preflight-Fallback``)."""
    champion = state.champion(task)
    response.headers["X-Preflight-Model-Version"] = champion.info.version
    if champion.info.adaptation:
        response.headers["X-Preflight-Adaptation"] = champion.info.adaptation
    if champion.fallback:
        response.headers["X-Preflight-Fallback"] = champion.fallback
    return champion
