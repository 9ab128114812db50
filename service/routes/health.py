"""``/healthz`` (the process is up) and ``/readyz`` (which tasks answer, and why the others don't)."""

from fastapi import APIRouter, Response
from preflight.service.deps import StateDep
from preflight.service.errors import LIMITS
from preflight.service.routing import UnicodeRoute
from preflight.service.schemas import Readiness
from preflight.service.state import SERVING

router = APIRouter(tags=["health"], responses=LIMITS, route_class=UnicodeRoute)


@router.get("/healthz")
def healthz() -> dict:
    """The process is up."""
    return {"status": "ok"}


@router.get("/readyz", response_model=Readiness, responses={503: {"model": Readiness}})
def readyz(state: StateDep, response: Response) -> Readiness:
    """200 once start-up has finished and at least one task answers; 503 before. ``tasks`` gives
    each task's state (ready, fallback: an older version serves because the champion cannot load,
    failed, untrained, training, loading), its served version, and why (no paths: those are logged),
    including stored measurements set aside (malformed, or of a device that is gone) and where to."""
    if not state.ready:
        response.status_code = 503
    tasks = state.task_states()
    return Readiness(
        ready=state.ready,
        status="ready" if state.ready else ("starting" if not state.started else "no task can answer"),
        loaded=[name for name, status in tasks.items() if status["state"] in SERVING],
        tasks=tasks,
    )
