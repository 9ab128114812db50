"""``POST /v1/nas/early-stop``: stop or continue a training run, from its partial learning curve."""

from typing import Annotated

from fastapi import APIRouter, Body, Response
from fastapi.openapi.models import Example
from preflight.models.early_stop import decide
from preflight.models.task import get_task
from preflight.service.deps import StateDep, served
from preflight.service.routing import UnicodeRoute
from preflight.service.schemas import EarlyStopRequest, EarlyStopResponse, ModelInfoPublic

router = APIRouter(tags=["nas"], route_class=UnicodeRoute)

RUNS: dict[str, Example] = {
    "architecture": {
        "summary": "a NAS-Bench-201 cell after 3 of 200 epochs",
        # the nas-curve task's example run, with a learning rate and an incumbent
        "value": get_task("nas-curve").examples[0] | {"learning_rate": 0.1, "incumbent": 0.93},
    },
    "learner": {
        "summary": "a learner over training-set sizes (LCDB)",
        "value": {
            "learner": "SVC_rbf",
            "dataset": "openml-44",
            "curve": [0.6, 0.7],
            "epochs": [16, 32],
            "budget": 4096,
            "incumbent": 0.9,
        },
    },
}


@router.post("/v1/nas/early-stop", response_model=EarlyStopResponse)
def early_stop(
    body: Annotated[EarlyStopRequest, Body(openapi_examples=RUNS)], state: StateDep, response: Response
) -> EarlyStopResponse:
    """The run's predicted final accuracy with its interval, P(final > incumbent), and stop/continue
    under the rule ``stop when P < risk`` (see ``rule`` in the answer)."""
    task = get_task("nas-curve")
    champion = served(state, task.name, response)
    decision = decide(
        task,
        champion.predictor,
        state.catalogue,
        body,
        body.incumbent,
        body.risk,
        body.coverage,
        body.valid_size,
    )
    return EarlyStopResponse(
        model=ModelInfoPublic(**vars(champion.info)),
        final_accuracy=decision.final,
        p_beat_incumbent=decision.p_beat,
        decision=decision.decision,
        reason=decision.reason,
        ood=decision.ood,
        warnings=decision.warnings,
    )
