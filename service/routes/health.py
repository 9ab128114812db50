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
    """503 until the champion of every task there is data for is loaded; ``untrained`` lists tasks
    with neither a champion nor data (their predictions answer 503 with how to train them)."""
    if not state.ready:
        response.status_code = 503
    servable = state.servable()
    return {
        "ready": state.ready,
        "status": state.status,
        "loaded": sorted(state.champions),
        "missing": sorted(set(servable) - set(state.champions)),
        "untrained": sorted({t.name for t in all_tasks()} - set(servable)),
    }
