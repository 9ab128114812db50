"""``/healthz`` (the process is up) and ``/readyz`` (which tasks answer, which are still training,
and why the others don't)."""

from fastapi import APIRouter, Response
from preflight.service.deps import ModelsDep
from preflight.service.errors import LIMITS
from preflight.service.routing import UnicodeRoute
from preflight.service.schemas import Readiness
from preflight.service.served import SERVING, ServedModels

router = APIRouter(tags=["health"], responses=LIMITS, route_class=UnicodeRoute)


@router.get("/healthz")
def healthz() -> dict:
    """The process is up."""
    return {"status": "ok"}


@router.get("/readyz", response_model=Readiness, responses={503: {"model": Readiness}})
def readyz(models: ModelsDep, response: Response) -> Readiness:
    """200 once at least one task answers and none is still loading from the registry, while others
    may still train: ``status`` is ``training`` until start-up has finished, then ``ready``. 503 before
    (``starting``), or when start-up finished and no task can answer. ``loaded`` lists the tasks that
    answer, ``training`` those still training; ``tasks`` gives each task's state (ready, fallback: an
    older version serves because the champion cannot load, failed, untrained, training, loading), its
    served version, and why (no paths: those are logged), including stored measurements set aside
    (malformed, or of a device that is gone) and where to."""
    if not models.ready:
        response.status_code = 503
    tasks = models.task_states()
    return Readiness(
        ready=models.ready,
        status=_status(models),
        loaded=[name for name, status in tasks.items() if status["state"] in SERVING],
        training=models.training(),
        tasks=tasks,
    )


def _status(models: ServedModels) -> str:
    """``ready`` or ``training`` (200), ``starting`` or ``no task can answer`` (503)."""
    if models.ready:
        return "ready" if models.started else "training"
    return "no task can answer" if models.started else "starting"
