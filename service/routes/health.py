from fastapi import APIRouter, Response

from preflight.models.task import all_tasks
from preflight.service.deps import StateDep

router = APIRouter(tags=["health"])


@router.get("/healthz")
def healthz() -> dict:
    """The process is up."""
    return {"status": "ok"}


@router.get("/readyz")
def readyz(state: StateDep, response: Response) -> dict:
    """503 until every task's champion is loaded."""
    if not state.ready:
        response.status_code = 503
    missing = sorted({t.name for t in all_tasks()} - set(state.champions))
    return {"ready": state.ready, "status": state.status, "loaded": sorted(state.champions), "missing": missing}
