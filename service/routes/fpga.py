"""``POST /v1/fpga/explore``: pragma settings of one kernel ranked by predicted cycles among those
predicted to fit the board, and the next to synthesize; ``/v1/fpga/kernels/{kernel}/designs``: a
kernel's synthesized designs, which adapt its estimates."""

import json
from dataclasses import asdict
from typing import Annotated

import numpy as np
import pandas as pd
from fastapi import APIRouter, Body, Depends, Path, Response
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.models import Example
from preflight.data.fpga import FpgaItem
from preflight.data.settings import Settings
from preflight.models.devices import InvalidRegistration, SubjectPublic
from preflight.models.explore import explore
from preflight.models.task import Task, get_task
from preflight.service.deps import KEY_RESPONSES, StateDep, require_api_key, served
from preflight.service.routing import UnicodeRoute
from preflight.service.schemas import (
    MAX_NAME,
    DesignsRegistration,
    ExploreRequest,
    ExploreResponse,
    ModelInfoPublic,
)
from preflight.service.state import ServiceState

router = APIRouter(tags=["fpga"], route_class=UnicodeRoute)

#: The fpga task's first example design, whose kernel and graph the exploration's example explores.
_DESIGN = get_task("fpga").examples[0]
EXPLORATIONS: dict[str, Example] = {
    "graph": {
        "summary": "unrolling and pipelining of a loop, from its program graph",
        "value": {
            "kernel": _DESIGN["kernel"],
            "graph": _DESIGN["graph"],
            "designs": [
                {"__PARA__L0": 1},
                {"__PARA__L0": 4, "__PIPE__L0": "flatten"},
                {"__PARA__L0": 16, "__PIPE__L0": "cg"},
            ],
            "limits": {"lut": 0.6},
        },
    }
}


#: Example registration: two synthesized designs of the example kernel, one that fit and one that did not.
REGISTRATIONS: dict[str, Example] = {
    "designs": {
        "summary": "two synthesized designs of a kernel given by its graph",
        "value": {
            "designs": [
                {
                    "graph": _DESIGN["graph"],
                    "pragmas": {"__PARA__L0": 4},
                    "valid": 1,
                    "cycles": 90,
                    "lut": 0.02,
                    "ff": 0.01,
                    "dsp": 0.01,
                    "bram": 0.0,
                },
                {
                    "graph": _DESIGN["graph"],
                    "pragmas": {"__PARA__L0": 64, "__PIPE__L0": "flatten"},
                    "valid": 0,
                },
            ]
        },
    }
}


@router.post("/v1/fpga/explore", response_model=ExploreResponse)
def explore_designs(
    body: Annotated[ExploreRequest, Body(openapi_examples=EXPLORATIONS)], state: StateDep, response: Response
) -> ExploreResponse:
    """Each setting's cycles, resources and P(valid) with intervals; the feasible ones (among the most
    likely valid, every resource within its limit) first, fewest cycles first; ``best`` is the first.
    With ``batch``, ``next`` names the settings to synthesize next; the kernel's registered designs and
    those ``synthesized`` sent here adapt the estimates (``measured`` counts them)."""
    designs = _designs(body, state.settings)
    task = get_task("fpga")
    champion = served(state, task.name, response)
    kernel = designs[0].kernel
    rows = _kernel_rows(state, task, kernel, body.synthesized)
    predictor = champion.predictor
    if body.synthesized:
        predictor = champion.base.adapted(task.featurize(rows, state.catalogue), task.target_frame(rows))
        response.headers["X-Preflight-Adaptation"] = str(predictor.adaptation)
    exploration = explore(
        task, predictor, state.catalogue, designs, body.limits.model_dump(), body.min_valid_probability,
        body.likely_valid_share, body.coverage, body.batch, _synthesized(rows),
    )  # fmt: skip
    return ExploreResponse(
        model=ModelInfoPublic(**vars(champion.info) | {"adaptation": predictor.adaptation}),
        best=next((e.index for e in exploration.designs if e.rank is not None), None),
        coverage=body.coverage,
        designs=[asdict(e) for e in exploration.designs],
        next=exploration.next,
        measured=len(rows),
    )


@router.post(
    "/v1/fpga/kernels/{kernel}/designs",
    response_model=SubjectPublic,
    status_code=201,
    responses=KEY_RESPONSES,
    dependencies=[Depends(require_api_key)],
)
def register_designs(
    kernel: Annotated[str, Path(max_length=MAX_NAME)],
    body: Annotated[DesignsRegistration, Body(openapi_examples=REGISTRATIONS)],
    state: StateDep,
) -> SubjectPublic:
    """Synthesized designs of a kernel (a known kernel's name, or any name with the kernel's graph in
    each design) adapt that kernel's estimates only, every other kernel's answers unchanged: each
    design's residual against the model, spread over pragma space by a Gaussian process, with
    intervals calibrated on kernels held out in training. Needs an API key."""
    try:
        registration = state.registry.subject_registration("fpga", kernel, body.designs)
        state.register_device(registration)
    except InvalidRegistration as exc:
        raise RequestValidationError(
            [{**e, "loc": ("body", "designs", *e["loc"][1:])} for e in exc.errors]
        ) from None
    return state.registry.describe_subject(get_task("fpga"), kernel)


@router.get("/v1/fpga/kernels/{kernel}/designs", response_model=SubjectPublic)
def kernel_designs(kernel: Annotated[str, Path(max_length=MAX_NAME)], state: StateDep) -> SubjectPublic:
    """How many synthesized designs of a kernel adapt its estimates."""
    return state.registry.describe_subject(get_task("fpga"), kernel)


def _kernel_rows(state: ServiceState, task: Task, kernel: str, sent: list[dict]) -> pd.DataFrame:
    """The kernel's registered designs plus those sent with the request (checked as a registration's:
    a 422 names the row and field at fault), as rows of the task."""
    registered = [
        row for row in state.registry.measurements.get(task.name, []) if row.get("kernel") == kernel
    ]
    rows = list(registered)
    if sent:
        try:
            rows += state.registry.subject_registration(task.name, kernel, sent).rows
        except InvalidRegistration as exc:
            raise RequestValidationError(
                [{**e, "loc": ("body", "synthesized", *e["loc"][1:])} for e in exc.errors]
            ) from None
    return pd.DataFrame.from_records(rows)


def _synthesized(rows: pd.DataFrame) -> list[tuple[dict, float | None]]:
    """Each synthesized design's pragmas and cycles (None where it did not fit)."""
    if rows.empty:
        return []
    cycles = rows["cycles"] if "cycles" in rows else pd.Series(np.nan, index=rows.index)
    fits = rows["valid"].fillna(0).astype(float) > 0 if "valid" in rows else cycles.notna()
    return [
        (_pragmas(p), float(c) if ok and np.isfinite(c) else None)
        for p, c, ok in zip(rows["pragmas"], cycles.astype(float), fits)
    ]


def _pragmas(value: object) -> dict:
    return json.loads(value) if isinstance(value, str) else dict(value)  # type: ignore[call-overload]


def _designs(body: ExploreRequest, settings: Settings) -> list[FpgaItem]:
    """The request's settings as items of the service's own settings; a 422 when the graph cannot take
    one (or there is no graph), as the request's validation would give."""
    try:
        return body.designs_as_items(settings)
    except ValueError as exc:
        error = {"type": "value_error", "loc": ("body",), "msg": f"Value error, {exc}"}
        raise RequestValidationError([error | {"input": body.model_dump(mode="json")}]) from None
