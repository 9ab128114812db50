"""Early stopping of a training run from its partial learning curve: the one decision rule that the
endpoint answers with and the replay benchmark simulates.

The rule: with ``p`` the probability that the run's final accuracy ends above the incumbent's (from
the ``nas-curve`` predictor's calibrated residuals), **stop when p < risk**, continue otherwise. A
lower risk stops fewer runs (less regret, less compute saved). Two cases need no model: a run whose
curve has reached its budget is finished (stop; its final accuracy is its last value), and with no
incumbent yet there is nothing to beat (continue).

Accuracy measured on n validation examples moves in steps of 1/n, so a final accuracy *equal* to the
incumbent's is likely (on digits' 600 images, about one run in six near the top ties it). Given n,
P counts a tie as not beating: it is P(final > incumbent + 1/(2n)), the continuity correction of a
lattice; without n, ties count half or more.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from preflight.data.catalogue import Catalogue
from preflight.data.nas import CurveItem
from preflight.models.core.actions import Estimate, ModelInfoPublic, Served
from preflight.models.core.inference import predict_items
from preflight.models.core.predictor import Predictor
from preflight.models.core.task import Task
from pydantic import BaseModel, Field, StrictFloat, StrictInt

RULE = "stop when P(final accuracy > incumbent) < risk; continue otherwise"
DEFAULT_RISK = 0.05


def stop(p_beat: np.ndarray | float, risk: float) -> np.ndarray | bool:
    """The decision rule, for one run or many."""
    return np.asarray(p_beat) < risk


def beat_threshold(incumbent: np.ndarray | float, valid_size: int | None) -> np.ndarray | float:
    """The accuracy a final accuracy must exceed to beat the incumbent (half a step above it, given n)."""
    return incumbent if valid_size is None else np.asarray(incumbent) + 0.5 / valid_size


@dataclass
class Decision:
    final: dict[str, float | None]  # value, low, high
    p_beat: float | None
    decision: str  # "stop" or "continue"
    reason: str
    ood: bool
    warnings: list[str]


def decide(
    task: Task,
    predictor: Predictor,
    catalogue: Catalogue,
    item: CurveItem,
    incumbent: float | None,
    risk: float,
    coverage: float,
    valid_size: int | None = None,
) -> Decision:
    """Predict the run's final accuracy and apply the rule."""
    if item.finished:
        last = item.curve[-1]
        p_beat = None if incumbent is None else float(last > incumbent)
        return Decision(
            {"value": last, "low": last, "high": last},
            p_beat,
            "stop",
            "the run has reached its budget: its final accuracy is its last value",
            False,
            [],
        )
    prediction = predict_items(task, predictor, catalogue, [item], coverage)
    features, estimates = prediction.features, prediction.estimates
    record = estimates.records()[0]
    target = task.primary_target
    if incumbent is None:
        return Decision(
            record[target],
            None,
            "continue",
            "no incumbent yet: nothing to beat",
            record["ood"],
            record["warnings"],
        )
    threshold = beat_threshold(incumbent, valid_size)
    p_beat = float(
        predictor.probability_above(features, target, estimates.value[target].to_numpy(), threshold)[0]
    )
    stopping = bool(stop(p_beat, risk))
    reason = f"P(final > incumbent) = {p_beat:.3f} {'<' if stopping else '>='} risk {risk}"
    return Decision(
        record[target], p_beat, "stop" if stopping else "continue", reason, record["ood"], record["warnings"]
    )


class EarlyStopRequest(CurveItem):
    """A partial learning curve, the run's budget, and the accuracy to beat."""

    incumbent: StrictFloat | None = Field(
        None,
        ge=0,
        le=1,
        allow_inf_nan=False,
        description="the best final accuracy so far (a fraction); none yet: continue",
    )
    risk: StrictFloat = Field(
        DEFAULT_RISK,
        gt=0,
        lt=1,
        description="stop when P(final > incumbent) falls below this; "
        "P is a share of k neighbouring calibration residuals (k >= 30) and stays above 1/(k+1), "
        "about 0.03 on the shipped curves, so a risk below that stops only runs that cannot win",
    )
    valid_size: StrictInt | None = Field(
        None,
        ge=1,
        description="examples the accuracy is measured on: with it, a final "
        "accuracy equal to the incumbent's does not count as beating it",
    )
    coverage: StrictFloat = Field(0.9, gt=0, lt=1, description="coverage of the final accuracy's interval")


class EarlyStopResponse(BaseModel):
    model: ModelInfoPublic
    final_accuracy: Estimate
    p_beat_incumbent: float | None = Field(
        description="P(final accuracy > incumbent); null without an incumbent"
    )
    decision: Literal["stop", "continue"]
    reason: str
    rule: str = Field(RULE, description="the decision rule")
    ood: bool
    warnings: list[str]


def early_stop(served: Served, run: EarlyStopRequest) -> EarlyStopResponse:
    """Stop or continue a training run, from its partial learning curve.

    The run's predicted final accuracy with its interval, P(final > incumbent), and stop/continue
    under the rule ``stop when P < risk`` (see ``rule`` in the answer)."""
    decision = decide(
        served.task, served.predictor, served.catalogue, run, run.incumbent, run.risk, run.coverage,
        run.valid_size,
    )  # fmt: skip
    return EarlyStopResponse(
        model=served.model(),
        final_accuracy=Estimate(**decision.final),
        p_beat_incumbent=decision.p_beat,
        decision=decision.decision,  # type: ignore[arg-type]
        reason=decision.reason,
        ood=decision.ood,
        warnings=decision.warnings,
    )
