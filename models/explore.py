"""Design-space exploration: pragma settings of one kernel ranked by predicted latency among those
predicted to fit, through the one prediction path.

A setting is feasible when it is among the ``likely_share`` of the settings most likely to
synthesize and fit (by P(``valid``); for a kernel never seen the probabilities shift as a whole but
keep much of their order, so a relative cut holds up where a fixed threshold does not: see
docs/BENCHMARKS.md), when P(``valid``) reaches ``min_valid`` if one is asked for, and when every
resource's estimate lies within its limit (a fraction of the board). Feasible settings are ranked
by their ``cycles`` estimate, fewest first, and the rest follow unranked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from preflight.data.catalogue import Catalogue
from preflight.data.fpga import FpgaItem
from preflight.models.inference import predict_items
from preflight.models.predictor import Predictor
from preflight.models.task import Task
from preflight.models.whatif import ranks

RESOURCES = ("lut", "ff", "dsp", "bram")
#: The share of a space's settings, most likely valid first, that may count as fitting.
LIKELY_SHARE = 0.5
Estimate = dict[str, float | None]


@dataclass
class Explored:
    """One setting's estimates (``{value, low, high}`` per target), whether it is predicted to fit,
    and its rank among those that do (1: fewest cycles)."""

    index: int
    pragmas: dict[str, int | str]
    cycles: Estimate
    resources: dict[str, Estimate]
    valid: Estimate
    feasible: bool
    rank: int | None
    ood: bool
    warnings: list[str]


def explore(
    task: Task,
    predictor: Predictor,
    catalogue: Catalogue,
    designs: Sequence[FpgaItem],
    limits: Mapping[str, float],
    min_valid: float | None = None,
    likely_share: float = LIKELY_SHARE,
    coverage: float = 0.9,
) -> list[Explored]:
    """Every design's estimates, the feasible ones first by predicted cycles."""
    estimates = predict_items(task, predictor, catalogue, list(designs), coverage).estimates
    fits = feasible(estimates.value, limits, min_valid, likely_share).tolist()
    records = estimates.records()
    rank = ranks([r["cycles"]["value"] if ok else None for r, ok in zip(records, fits)])
    order = sorted(range(len(records)), key=lambda i: (rank[i] is None, rank[i] or 0, i))
    return [
        Explored(
            index=i,
            pragmas=dict(designs[i].pragmas),
            cycles=records[i]["cycles"],
            resources={r: records[i][r] for r in RESOURCES if r in records[i]},
            valid=records[i]["valid"],
            feasible=fits[i],
            rank=rank[i],
            ood=records[i]["ood"],
            warnings=records[i]["warnings"],
        )
        for i in order
    ]


def feasible(
    values: pd.DataFrame,
    limits: Mapping[str, float],
    min_valid: float | None = None,
    likely_share: float = LIKELY_SHARE,
    spaces: pd.Series | None = None,
) -> np.ndarray:
    """Designs predicted to fit: a cycles estimate, among the ``likely_share`` most likely valid of their
    design space (``spaces``: one label per row; all rows one space by default), P(valid) of at least
    ``min_valid`` where given, and every limited resource's estimate within its limit."""
    p_valid = values["valid"]
    fits = values["cycles"].notna().to_numpy().copy()
    if min_valid is not None:
        fits &= (p_valid >= min_valid).to_numpy()
    if likely_share < 1:
        grouped = p_valid.groupby(spaces.to_numpy() if spaces is not None else np.zeros(len(p_valid)))
        fits &= (grouped.rank(pct=True, method="max") > 1 - likely_share).to_numpy()
    for resource, limit in limits.items():
        if resource in values:
            fits &= (values[resource] <= limit).to_numpy()  # no estimate: not known to fit
    return fits
