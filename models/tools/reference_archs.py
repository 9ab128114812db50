"""Which architectures to measure on a new device: the set whose latencies pin its fingerprint down
best (``models/core/fingerprint.py:most_informative``), chosen among the training architectures of the
search space by the served model's estimates on every training device."""

from __future__ import annotations

import numpy as np
from preflight.data.errors import InvalidFields
from preflight.models.core.actions import ModelInfoPublic, Served
from preflight.models.core.fingerprint import most_informative
from pydantic import BaseModel, Field, StrictInt

#: Training architectures of a space the choice considers at most (a seeded sample beyond).
MAX_CANDIDATES = 2_000


class ReferenceArchsRequest(BaseModel):
    space: str = Field("nb201", description="the search space, as items name it (nb201, fbnet...)")
    k: StrictInt = Field(10, ge=1, le=100, description="how many architectures will be measured")


class ReferenceArchsResponse(BaseModel):
    model: ModelInfoPublic
    space: str
    archs: list[str] = Field(description="the architectures to measure, most informative first")
    how: str


def reference_archs(served: Served, request: ReferenceArchsRequest) -> ReferenceArchsResponse:
    """The architectures to measure on a new device (K of them, default 10): register their measured
    latencies (`POST /v1/devices` with measurements) and the device's answers read its fingerprint.
    Chosen among the space's training architectures so that their latencies on the training devices
    spread as widely as possible (a greedy D-optimal design); random ones work too, a little less well."""
    predictor = served.base
    features, _ = predictor.train_
    spaces = features.meta["space"].astype(str)
    if request.space not in set(spaces):
        known = ", ".join(sorted(set(spaces)))
        message = f"no training architectures in space {request.space!r}; known: {known}"
        raise InvalidFields(
            [{"type": "value_error", "loc": ("space",), "msg": message, "input": request.space}]
        )
    rows = np.flatnonzero(spaces.to_numpy() == request.space)
    _, first = np.unique(features.meta["arch"].to_numpy()[rows], return_index=True)
    rows = rows[np.sort(first)]
    if len(rows) > MAX_CANDIDATES:
        rows = np.sort(np.random.default_rng(predictor.seed).choice(rows, MAX_CANDIDATES, replace=False))
    candidates = features.take(rows)
    basis = predictor.fingerprint_bases(candidates)[predictor.task.primary_target]
    chosen = most_informative(basis, request.k)
    return ReferenceArchsResponse(
        model=served.model(),
        space=request.space,
        archs=[str(candidates.meta["arch"].iloc[i]) for i in chosen],
        how=f"greedy D-optimal among {len(rows)} training architectures, by their estimates on "
        f"{basis.shape[1] - 1} training device settings",
    )
