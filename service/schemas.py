"""Request and response schemas, by role; item models come from each Task."""

from dataclasses import asdict
from typing import Annotated, Any, Literal, Self

from preflight.data.catalogue import DeviceSpec
from preflight.data.names import MAX_NAME, DeviceName
from preflight.models.core.actions import MAX_ITEMS, MAX_MEASUREMENTS, Estimate, ModelInfoPublic
from preflight.models.core.targets import Target
from preflight.models.core.task import Task
from preflight.models.registry.tracking import ModelInfo
from preflight.models.tools.whatif import WhatIf
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    StrictFloat,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

WARNINGS = (
    "codes `kind:subject` (GET /v1/ood-reasons lists the kinds, POST /v1/ood-reasons/explain gives their "
    "full text), then notes that qualify an estimate"
)


class PredictResponse(BaseModel):
    """The answer of ``/v1/{task}/predict``; each task's route documents its own, typed predictions."""

    task: str
    model: ModelInfoPublic
    predictions: list[dict[str, Any]] = Field(
        description="per item: {target: {value, low, high}}, ood, warnings: " + WARNINGS
    )


class ReasonCode(BaseModel):
    kind: str = Field(description="the part of a code before its first colon")
    meaning: str = Field(description="the code's form and what it says")


class ExplainRequest(BaseModel):
    """Warnings of a task's predictions, to be spelled out against the model that answers."""

    model_config = ConfigDict(extra="forbid")

    task: str = Field(max_length=MAX_NAME, examples=["gemm"])
    warnings: list[str] = Field(
        min_length=1,
        max_length=MAX_ITEMS,
        examples=[["unseen:device_id=nvidia-h100-sxm5-80gb", "range:m_log2"]],
    )


class Explanation(BaseModel):
    warning: str
    text: str = Field(description="the full text, with the training range a range code refers to")


class PredictRequest(BaseModel):
    """``{"items": [...], "coverage": 0.9}``; each task's route takes it with its own item model."""

    model_config = ConfigDict(extra="forbid")

    items: list[Any] = Field(min_length=1, max_length=MAX_ITEMS)
    coverage: StrictFloat = Field(0.9, gt=0, lt=1, description="interval coverage")

    @field_validator("items", mode="before")
    @classmethod
    def _not_too_many(cls, items: Any) -> Any:
        """Refuse an over-long list before validating its items one by one (a 100,000-item body)."""
        if isinstance(items, list) and len(items) > MAX_ITEMS:
            raise ValueError(f"at most {MAX_ITEMS} items per request, got {len(items)}: split the batch")
        return items


def _title(task: Task) -> str:
    """The task's name as a schema name: ``nas-curve`` -> ``NasCurve``."""
    return task.name.title().replace("-", "")


def predict_request(task: Task) -> type[PredictRequest]:
    """The request of one task's route: its items validated as the task's item model."""
    return create_model(
        f"{_title(task)}PredictRequest",
        __base__=PredictRequest,
        items=(list[task.item], Field(min_length=1, max_length=MAX_ITEMS)),  # type: ignore[name-defined]
    )


def prediction_model(task: Task) -> type[BaseModel]:
    """One item's answer as ``Estimates.records`` gives it: an estimate per target (the first and the
    derived ones always; another only where the model learned it), ``ood`` and ``warnings``."""
    always = {task.primary_target, *task.derived}
    estimates: dict[str, Any] = {
        name: (Estimate, Field(... if name in always else None, description=_meaning(target)))
        for name, target in task.targets.items()
    }
    return create_model(
        f"{_title(task)}Prediction",
        __config__=ConfigDict(extra="forbid", protected_namespaces=()),
        **estimates,
        ood=(bool, Field(description="a warning code says the item lies outside the training data")),
        warnings=(list[str], Field(description=WARNINGS)),
    )


def _meaning(target: Target) -> str:
    return f"{target.description} ({target.unit})" if target.description else f"in {target.unit}"


def predict_response(task: Task) -> type[PredictResponse]:
    """The answer of one task's route, its predictions typed from the task's targets."""
    return create_model(
        f"{_title(task)}PredictResponse",
        __base__=PredictResponse,
        predictions=(list[prediction_model(task)], Field(description="one per item, in order")),  # type: ignore[arg-type,misc]
    )


class TargetPublic(BaseModel):
    unit: str
    scale: str
    lower: float | None
    upper: float | None
    zero_ok: bool
    description: str


class TaskPublic(BaseModel):
    name: str
    targets: dict[str, TargetPublic]
    sources: list[str]
    families: list[str]
    group_key: str
    input_schema: dict[str, Any]
    champion: dict[str, Any] | None
    actions: dict[str, str] = Field(
        default_factory=dict, description="the task's questions beyond predict: name -> its POST route"
    )


class DeviceRegistration(BaseModel):
    """A new device from its spec sheet, and/or measurements of a device (new or known)."""

    model_config = ConfigDict(extra="forbid")

    spec: DeviceSpec | None = None
    device: str | None = Field(
        None, max_length=MAX_NAME, description="an existing device to add measurements to (when no spec)"
    )
    task: str = Field("gemm", max_length=MAX_NAME, description="the task the measurements belong to")
    measurements: list[dict[str, Any]] = Field(
        default_factory=list,
        max_length=MAX_MEASUREMENTS,
        description="item fields (device may be omitted) plus measured targets, e.g. runtime_ms",
    )


class DesignsRegistration(BaseModel):
    """Synthesized designs of one kernel (named by the path) with what synthesis gave."""

    model_config = ConfigDict(extra="forbid")

    designs: list[dict[str, Any]] = Field(
        min_length=1,
        max_length=MAX_MEASUREMENTS,
        description="each an fpga item's fields but the kernel (pragmas, tool, graph for a kernel given by "
        "its graph) plus what synthesis gave: valid (0 or 1) and, for a design that fits, cycles and "
        "lut, ff, dsp, bram as fractions of the board",
    )


class Workload(BaseModel):
    """One workload: a task's items without a device; one run is every item once."""

    model_config = ConfigDict(extra="forbid")

    task: str = Field(description="a task whose items run on a device, e.g. gemm")
    items: list[dict[str, Any]] = Field(
        min_length=1, max_length=MAX_ITEMS, description="the task's items, without `device`"
    )


USDPerHour = Annotated[StrictFloat, Field(ge=0, allow_inf_nan=False)]


class WhatIfRequest(BaseModel):
    """A workload, the devices to compare it on, and what each costs per hour. The workload comes
    wrapped as ``workload``, or as the body's own ``task`` and ``items``: then the file that
    ``preflight whatif --workload`` reads is a whole request (every GPU and accelerator, no prices)."""

    model_config = ConfigDict(extra="forbid")

    workload: Workload | None = Field(None, description="the workload; or its `task` and `items` beside")
    task: str | None = Field(None, description="the workload's task, when it is not wrapped as `workload`")
    items: list[dict[str, Any]] | None = Field(
        None,
        min_length=1,
        max_length=MAX_ITEMS,
        description="the workload's items (without `device`), when it is not wrapped as `workload`",
    )
    devices: Literal["all"] | Annotated[list[DeviceName], Field(min_length=1)] = Field(
        "all", description="`all`: every GPU and accelerator in the catalogue; or device names"
    )
    prices: dict[DeviceName, USDPerHour] = Field(
        default_factory=dict, description="USD per hour by device name; gives the cost per million runs"
    )
    coverage: StrictFloat = Field(0.9, gt=0, lt=1, description="interval coverage")

    _workload: Workload = PrivateAttr()

    @model_validator(mode="after")
    def _one_workload(self) -> Self:
        """The workload given once: wrapped, or as ``task`` and ``items``; the error names the field."""
        bare = {"task": self.task, "items": self.items}
        if self.workload is not None:
            beside = [field for field, value in bare.items() if value is not None]
            if beside:
                raise _field_error(
                    beside[0], "workload_twice", "given twice: here and in `workload`; send one"
                )
            self._workload = self.workload
            return self
        missing = [field for field, value in bare.items() if value is None]
        if missing:
            why = "a workload needs `task` and `items`, here or wrapped as `workload`"
            raise _field_error(missing[0], "missing", why)
        self._workload = Workload.model_validate(bare)
        return self

    @property
    def work(self) -> Workload:
        """The workload, however the request gave it."""
        return self._workload


def _field_error(field: str, kind: str, message: str) -> ValidationError:
    """A validation error located at ``field`` of the model being validated."""
    error = InitErrorDetails(type=PydanticCustomError(kind, message), loc=(field,), input=None)
    return ValidationError.from_exception_data("WhatIfRequest", [error])


class WhatIfRanks(BaseModel):
    time: int
    energy: int | None
    cost: int | None


class WhatIfDevice(BaseModel):
    device: str
    name: str
    time_ms: Estimate = Field(description="time per run")
    runs_per_s: float
    energy_j: Estimate | None = Field(description="energy per run; null when not estimated")
    energy_estimated: bool
    price_usd_per_hour: float | None
    cost_per_million_runs_usd: Estimate | None = Field(description="with its interval; null without a price")
    ood: bool
    warnings: list[str]
    rank: WhatIfRanks = Field(description="1 is best (least) by each criterion; null without a value")


class SkippedDevice(BaseModel):
    device: str
    reason: str


class WhatIfResponse(BaseModel):
    task: str
    model: ModelInfoPublic
    time_target: str
    energy_target: str | None
    items: int = Field(description="items per run")
    coverage: float
    devices: list[WhatIfDevice] = Field(description="ranked by time per run, fastest first")
    skipped: list[SkippedDevice] = Field(description="candidates the model cannot answer for, and why")

    @classmethod
    def of(cls, result: WhatIf, info: ModelInfo) -> Self:
        return cls(model=ModelInfoPublic(**vars(info)), **asdict(result))


class TaskReadiness(BaseModel):
    state: Literal["loading", "training", "ready", "fallback", "failed", "untrained"]
    detail: str = Field(
        description="why a task is not ready, which version serves instead of the champion, or which "
        "stored measurements were set aside (malformed, or of a device that no longer exists)"
    )
    version: str | None = Field(description="the version answering, when one does")


class Readiness(BaseModel):
    ready: bool
    status: str
    loaded: list[str] = Field(description="tasks that answer predictions")
    training: list[str] = Field(
        description="tasks still training their first version at start-up: each answers 503 with "
        "Retry-After until its own model loads"
    )
    tasks: dict[str, TaskReadiness]


class Reloaded(BaseModel):
    reloaded: list[str] = Field(description="tasks whose served version changed")
    tasks: dict[str, TaskReadiness]
