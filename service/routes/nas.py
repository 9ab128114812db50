"""``POST /v1/nas/early-stop``: stop or continue a training run, from its partial learning curve."""

from fastapi import APIRouter, Response
from preflight.models.early_stop import decide
from preflight.models.task import get_task
from preflight.service.deps import StateDep, served
from preflight.service.schemas import EarlyStopRequest, EarlyStopResponse, ModelInfoPublic

router = APIRouter(tags=["nas"])


@router.post("/v1/nas/early-stop", response_model=EarlyStopResponse)
def early_stop(body: EarlyStopRequest, state: StateDep, response: Response) -> EarlyStopResponse:
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
