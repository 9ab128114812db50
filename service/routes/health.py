from fastapi import APIRouter, Response

from preflight.service.deps import StateDep

router = APIRouter(tags=["health"])


@router.get("/healthz")
def healthz() -> dict:
    """The process is up."""
    return {"status": "ok"}


@router.get("/readyz")
def readyz(state: StateDep, response: Response) -> dict:
    """503 until every task's champion is loaded."""
    missing = sorted(set(t for t in _task_names()) - set(state.champions))
    if not state.ready:
        response.status_code = 503
    return {"ready": state.ready, "loaded": sorted(state.champions), "missing": missing}


def _task_names() -> list[str]:
    from preflight.models.task import all_tasks

    return [t.name for t in all_tasks()]
