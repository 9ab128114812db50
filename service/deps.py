"""Dependencies shared by routes: the service state and the API-key check."""

from typing import Annotated

from fastapi import Depends, HTTPException, Request, Security
from fastapi.security import APIKeyHeader
from preflight.service.state import ServiceState

_api_key = APIKeyHeader(name="X-API-Key", auto_error=False)


def get_state(request: Request) -> ServiceState:
    return request.app.state.preflight


StateDep = Annotated[ServiceState, Depends(get_state)]


def require_api_key(state: StateDep, key: Annotated[str | None, Security(_api_key)]) -> None:
    """With PREFLIGHT_API_KEYS set, every /v1 route needs one of them in X-API-Key."""
    if state.settings.api_keys and key not in state.settings.api_keys:
        raise HTTPException(status_code=401, detail="missing or unknown X-API-Key")
