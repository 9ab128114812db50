"""``POST /v1/admin/reload``: load each task's ``champion`` now, rather than at the next poll."""

from fastapi import APIRouter, Depends
from preflight.service.deps import KEY_RESPONSES, ModelsDep, require_api_key
from preflight.service.errors import LIMITS
from preflight.service.routing import UnicodeRoute
from preflight.service.schemas import Reloaded

router = APIRouter(tags=["admin"], responses=LIMITS, route_class=UnicodeRoute)


@router.post(
    "/v1/admin/reload",
    response_model=Reloaded,
    responses=KEY_RESPONSES,
    dependencies=[Depends(require_api_key)],
)
def reload(models: ModelsDep) -> Reloaded:
    """Load now each task whose ``champion`` alias moved, and retry those not serving their champion
    (failed, fallback, untrained); each is swapped in without dropping a request. Needs an API key."""
    changed = models.reload(retry=True)
    return Reloaded(reloaded=changed, tasks=models.task_states())
