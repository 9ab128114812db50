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

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd
from preflight.data.catalogue import Catalogue
from preflight.data.errors import InvalidFields
from preflight.data.fpga import BOARD, FpgaItem, Tool, design_pragmas
from preflight.data.settings import Settings
from preflight.models.core import actions
from preflight.models.core.actions import MAX_ITEMS, MAX_MEASUREMENTS, ModelInfoPublic, Served
from preflight.models.core.inference import predict_items
from preflight.models.core.predictor import Estimates, Predictor
from preflight.models.core.task import Task
from preflight.models.registry.devices import InvalidRegistration
from preflight.models.tools.whatif import ranks
from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, ValidationError
from scipy import stats

RESOURCES = ("lut", "ff", "dsp", "bram")
#: The share of a space's settings, most likely valid first, that may count as fitting.
LIKELY_SHARE = 0.5
#: The share of a batch picked to learn where designs stop fitting (P(valid) nearest 1/2) rather than
#: by expected improvement: in a replayed search it cut the cycles error on the rest of the space by a
#: quarter and found the best design as often (docs/BENCHMARKS.md, issue 27).
LEARN_SHARE = 0.3
#: How far (in within-kernel spreads of the features) a pick damps its neighbours' claim to the batch.
DIVERSITY_LENGTH = 2.0
#: An interval read as a normal spreads at most this much on its log scale (an unbounded one included).
MAX_LOG_SPREAD = 10.0
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


@dataclass
class Exploration:
    """Every setting's estimates, the feasible ones first (``designs``), and the settings to synthesize
    next (``next``: indices into the given settings, in the order chosen)."""

    designs: list[Explored]
    next: list[int]


def explore(
    task: Task,
    predictor: Predictor,
    catalogue: Catalogue,
    designs: Sequence[FpgaItem],
    limits: Mapping[str, float],
    min_valid: float | None = None,
    likely_share: float = LIKELY_SHARE,
    coverage: float = 0.9,
    batch: int = 0,
    synthesized: Sequence[tuple[Mapping[str, object], float | None]] = (),
    learn_share: float = LEARN_SHARE,
) -> Exploration:
    """Every design's estimates, the feasible ones first by predicted cycles, and ``batch`` designs to
    synthesize next among those not ``synthesized`` yet (their pragmas and measured cycles, None for a
    design that did not fit; the fewest valid cycles is the incumbent; ``learn_share`` as
    ``next_batch`` reads it)."""
    prediction = predict_items(task, predictor, catalogue, list(designs), coverage)
    estimates = prediction.estimates
    fits = feasible(estimates.value, limits, min_valid, likely_share).tolist()
    records = estimates.records()
    rank = ranks([r["cycles"]["value"] if ok else None for r, ok in zip(records, fits)])
    order = sorted(range(len(records)), key=lambda i: (rank[i] is None, rank[i] or 0, i))
    explored = [
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
    done = [dict(pragmas) for pragmas, _ in synthesized]
    open_ = np.array([i for i, d in enumerate(designs) if dict(d.pragmas) not in done], dtype=int)
    if not batch or not len(open_):
        return Exploration(explored, [])
    measured = [c for _, c in synthesized if c is not None]
    x = predictor.design_space(prediction.features.take(open_))
    chosen = next_batch(
        estimates.take(open_), x, batch, min(measured, default=None), limits, coverage, learn_share
    )
    return Exploration(explored, open_[chosen].tolist())


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


def next_batch(
    estimates: Estimates,
    x: np.ndarray,
    size: int,
    incumbent: float | None = None,
    limits: Mapping[str, float] | None = None,
    coverage: float = 0.9,
    learn_share: float = LEARN_SHARE,
) -> list[int]:
    """The candidates to synthesize next, in the order chosen. Most of a batch goes by expected
    improvement in cycles over ``incumbent`` (the fewest cycles of a valid design synthesized so far;
    none: over the slowest candidate, so that the first batch looks for fast designs likely to fit)
    times the probability of fitting (P(valid) times, per limited resource, the probability of
    staying within its limit); a ``learn_share`` of it goes to the designs whose validity is least
    certain, which teach the model where the kernel's designs stop fitting. Each pick damps the
    candidates near it (``x``: their scaled features) so that a batch spreads over the space rather
    than testing one neighbourhood ten times."""
    z = stats.norm.ppf(0.5 + coverage / 2)
    log_cycles, spread = _log_normal(estimates, "cycles", z)
    best = np.nanmax(log_cycles) if incumbent is None else np.log(incumbent)
    gain = best - log_cycles
    expected = gain * stats.norm.cdf(gain / spread) + spread * stats.norm.pdf(gain / spread)
    improvement = np.nan_to_num(expected * fit_probability(estimates, limits or {}, z), nan=0.0)
    p_valid = estimates.value["valid"].to_numpy(dtype=float)
    learning = np.nan_to_num(p_valid * (1 - p_valid), nan=0.0)
    learners = int(round(learn_share * size))
    return _spread_picks([(improvement, size - learners), (learning, learners)], x)


def _spread_picks(phases: Sequence[tuple[np.ndarray, int]], x: np.ndarray) -> list[int]:
    """Up to ``count`` candidates per phase ``(score, count)``, in turn, each the best by its phase's
    score once every earlier pick (of any phase) has damped its neighbours."""
    chosen: list[int] = []
    damping = np.ones(len(x))
    for score, count in phases:
        score = score * damping
        for _ in range(min(count, len(score) - len(chosen))):
            pick = int(np.argmax(np.where(np.isin(np.arange(len(score)), chosen), -np.inf, score)))
            chosen.append(pick)
            near = _damping(x, pick)
            score, damping = score * near, damping * near
    return chosen


def _damping(x: np.ndarray, pick: int) -> np.ndarray:
    """How much a pick leaves of each candidate's claim: nothing of its own, all of a far one's."""
    return 1 - np.exp(-np.sum((x - x[pick]) ** 2, axis=1) / (2 * DIVERSITY_LENGTH**2))


def fit_probability(estimates: Estimates, limits: Mapping[str, float], z: float) -> np.ndarray:
    """P(valid) times, per limited resource, the probability that it stays within its limit (normal on
    the target's log1p scale, its spread read from the interval)."""
    probability = estimates.value["valid"].to_numpy(dtype=float)
    for resource, limit in limits.items():
        if resource in estimates.value:
            center, spread = _log_normal(estimates, resource, z, log=np.log1p)
            probability = probability * np.nan_to_num(
                stats.norm.cdf((np.log1p(limit) - center) / spread), nan=1.0
            )
    return probability


def _log_normal(estimates: Estimates, target: str, z: float, log=np.log) -> tuple[np.ndarray, np.ndarray]:
    """An estimate and its interval as a normal on a log scale: center and spread."""
    value, low, high = (
        log(frame[target].to_numpy(dtype=float)) for frame in (estimates.value, estimates.low, estimates.high)
    )
    return value, np.clip((high - low) / (2 * z), 1e-3, MAX_LOG_SPREAD)


class ResourceLimits(BaseModel):
    """The share of the board each resource may take (HLSyn counts a design over 0.8 as not fitting)."""

    model_config = ConfigDict(extra="forbid")

    lut: StrictFloat = Field(0.8, gt=0, le=1)
    ff: StrictFloat = Field(0.8, gt=0, le=1)
    dsp: StrictFloat = Field(0.8, gt=0, le=1)
    bram: StrictFloat = Field(0.8, gt=0, le=1)


class ExploreRequest(BaseModel):
    """One kernel (by name or program graph) and the pragma settings to rank for it."""

    model_config = ConfigDict(extra="forbid")

    kernel: str = Field(default="", description=FpgaItem.model_fields["kernel"].description)
    graph: str | dict = Field(default="", description=FpgaItem.model_fields["graph"].description)
    code: str = Field(default="", description=FpgaItem.model_fields["code"].description)
    tool: Tool = "v20"
    device: str = BOARD
    designs: list[dict[str, StrictInt | str]] = Field(
        min_length=1,
        max_length=MAX_ITEMS,
        description="pragma settings, each as in an fpga item's pragmas",
        examples=[[{"__PARA__L0": 1}, {"__PARA__L0": 4, "__PIPE__L0": "flatten"}]],
    )
    limits: ResourceLimits = Field(default_factory=ResourceLimits)
    likely_valid_share: StrictFloat = Field(
        LIKELY_SHARE,
        gt=0,
        le=1,
        description="count as fitting only this share of the settings, those most likely valid (for a "
        "kernel never seen, probabilities shift as a whole but keep much of their order)",
    )
    min_valid_probability: StrictFloat | None = Field(
        None, ge=0, le=1, description="also require at least this P(valid); none: the share alone"
    )
    coverage: StrictFloat = Field(0.9, gt=0, lt=1, description="interval coverage")
    synthesized: list[dict[str, Any]] = Field(
        default_factory=list,
        max_length=MAX_MEASUREMENTS,
        description="designs of this kernel synthesized so far, as registered ones are (pragmas plus "
        "valid, cycles, lut, ff, dsp, bram): they adapt this answer only (register them to keep them)",
    )
    batch: StrictInt = Field(
        0,
        ge=0,
        le=MAX_ITEMS,
        description="how many designs to synthesize next (``next``): most chosen for expected improvement "
        "over the best valid design synthesized times the probability of fitting, some for the least "
        "certain validity (``learn_share``), all spread over the space",
    )
    learn_share: StrictFloat = Field(
        LEARN_SHARE,
        ge=0,
        le=1,
        description="the share of ``next`` picked where P(valid) is nearest 1/2, to learn where the "
        "kernel's designs stop fitting, rather than for expected improvement (0: improvement alone)",
    )

    def designs_as_items(self, settings: Settings) -> list[FpgaItem]:
        """One item per setting, the kernel found in ``settings``' datasets; a ValueError says what is
        wrong, naming the setting the graph cannot take and its knob."""
        fields = {
            "kernel": self.kernel,
            "graph": self.graph,
            "code": self.code,
            "tool": self.tool,
            "device": self.device,
        }
        try:
            base = FpgaItem.model_validate(fields, context=settings.validation_context())
        except ValidationError as exc:
            raise ValueError(
                "; ".join(error["msg"].removeprefix("Value error, ") for error in exc.errors())
            ) from None
        placeholders = list(base.pragmas)
        items = []
        for i, design in enumerate(self.designs):
            try:
                items.append(base.model_copy(update={"pragmas": design_pragmas(design, placeholders)}))
            except ValueError as exc:
                raise ValueError(f"designs[{i}]: {exc}") from None
        return items


class ExploredDesign(BaseModel):
    index: int = Field(description="the setting's position in the request's designs")
    pragmas: dict[str, int | str] = Field(description="every knob's value, defaults filled in")
    cycles: actions.Estimate
    resources: dict[str, actions.Estimate] = Field(description="lut, ff, dsp, bram as fractions of the board")
    valid: actions.Estimate = Field(description="probability that synthesis succeeds and the design fits")
    feasible: bool = Field(description="predicted to fit: likely valid and every resource within the limits")
    rank: int | None = Field(description="1: fewest cycles among the feasible; null when not feasible")
    ood: bool
    warnings: list[str]


class ExploreResponse(BaseModel):
    model: ModelInfoPublic
    best: int | None = Field(description="index of the feasible setting with the fewest predicted cycles")
    coverage: float
    designs: list[ExploredDesign] = Field(description="feasible settings first, fewest cycles first")
    next: list[int] = Field(
        default_factory=list, description="indices of the designs to synthesize next, in the order chosen"
    )
    measured: int = Field(
        0, description="designs of this kernel the answer is adapted to (registered or sent)"
    )


def explore_designs(served: Served, body: ExploreRequest) -> ExploreResponse:
    """Pragma settings of one kernel ranked by predicted cycles among those predicted to fit the board,
    and the next to synthesize.

    Each setting's cycles, resources and P(valid) with intervals; the feasible ones (among the most
    likely valid, every resource within its limit) first, fewest cycles first; ``best`` is the first.
    With ``batch``, ``next`` names the settings to synthesize next; the kernel's registered designs and
    those ``synthesized`` sent here adapt the estimates (``measured`` counts them)."""
    designs = _designs(body, served.settings)
    rows = _kernel_rows(served, designs[0].kernel, body.synthesized)
    predictor = served.predictor
    if body.synthesized:
        task = served.task
        predictor = served.base.adapted(task.featurize(rows, served.catalogue), task.target_frame(rows))
    exploration = explore(
        served.task, predictor, served.catalogue, designs, body.limits.model_dump(),
        body.min_valid_probability, body.likely_valid_share, body.coverage, body.batch, _synthesized(rows),
        body.learn_share,
    )  # fmt: skip
    return ExploreResponse(
        model=served.model(predictor if body.synthesized else None),
        best=next((e.index for e in exploration.designs if e.rank is not None), None),
        coverage=body.coverage,
        designs=[ExploredDesign.model_validate(asdict(e)) for e in exploration.designs],
        next=exploration.next,
        measured=len(rows),
    )


def _designs(body: ExploreRequest, settings: Settings) -> list[FpgaItem]:
    """The request's settings as items of the service's own settings; InvalidFields when the graph
    cannot take one (or there is no graph), as the request's validation would say."""
    try:
        return body.designs_as_items(settings)
    except ValueError as exc:
        error = {"type": "value_error", "loc": (), "msg": f"Value error, {exc}"}
        raise InvalidFields([error | {"input": body.model_dump(mode="json")}]) from None


def _kernel_rows(served: Served, kernel: str, sent: list[dict]) -> pd.DataFrame:
    """The kernel's registered designs plus those sent with the request (checked as a registration's:
    InvalidFields names the row and field at fault), as rows of the task."""
    task = served.task.name
    rows = [row for row in served.registry.measurements.get(task, []) if row.get("kernel") == kernel]
    if sent:
        try:
            rows += served.registry.subject_registration(task, kernel, sent).rows
        except InvalidRegistration as exc:
            raise exc.under("synthesized") from None
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
