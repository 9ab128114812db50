"""The warning codes of predictions: ``GET /v1/ood-reasons`` lists every kind with what it means,
``POST /v1/ood-reasons/explain`` spells codes out in full against the model that answers a task."""

from typing import Annotated

from fastapi import APIRouter, Body
from fastapi.openapi.models import Example
from preflight.models.core.predictor import CODES
from preflight.models.core.task import get_task
from preflight.service.deps import ModelsDep
from preflight.service.routing import UnicodeRoute
from preflight.service.schemas import ExplainRequest, Explanation, ReasonCode

router = APIRouter(tags=["predict"], route_class=UnicodeRoute)

WARNING_CODES: dict[str, Example] = {
    "gemm": {
        "summary": "two warnings of a GEMM prediction",
        "value": {"task": "gemm", "warnings": ["unseen:device_id=nvidia-h100-sxm5-80gb", "range:m_log2"]},
    }
}


@router.get("/v1/ood-reasons")
def ood_reasons() -> list[ReasonCode]:
    """Every kind of warning code (``kind:subject``) a prediction carries, and what it means."""
    return [ReasonCode(kind=kind, meaning=meaning) for kind, meaning in CODES.items()]


@router.post("/v1/ood-reasons/explain")
def explain(
    body: Annotated[ExplainRequest, Body(openapi_examples=WARNING_CODES)], models: ModelsDep
) -> list[Explanation]:
    """The full text of each warning, with the training ranges of the model that answers the task;
    a warning that is not a code comes back as it is."""
    predictor = models.champion(get_task(body.task).name).predictor
    return [Explanation(warning=w, text=predictor.explain(w)) for w in body.warnings]
