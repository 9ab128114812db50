"""NAS items: an architecture in its space's native notation (or as an explicit op graph), the
dataset it is trained or run on, for latency the device setting it runs on, and for early stopping
a partial learning curve.

The same models serve loaders, the CLI and the API; notation is checked when an item is made, so
a bad architecture is a 422 that says what was wrong with it.
"""

from __future__ import annotations

from typing import Annotated, Literal

from preflight.data import arch
from preflight.data.names import DeviceName
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictFloat,
    StrictInt,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

Space = Literal["nb201", "fbnet", "nb101", "nasbench-graph", "opgraph"]


class ArchItem(BaseModel):
    """An architecture and the dataset it is trained on (what accuracy depends on)."""

    model_config = ConfigDict(extra="forbid")

    space: Space = Field(description="search space; 'opgraph' for an explicit graph of operations")
    arch: str | list[str] | dict = Field(
        description="nb201: arch_str; fbnet: op_str_list ('k3_e1|skip|...', or a list of 22 layers); "
        "nb101: {adjacency, ops}; nasbench-graph: {link, ops}; "
        "opgraph: {nodes: [{op, kernel, expansion, groups}], edges: [[from, to]]}"
    )
    dataset: str = Field(min_length=1, description="e.g. cifar10, cifar100, imagenet, ninapro, darcy, cora")

    @field_validator("arch")
    @classmethod
    def _parses(cls, value: str | list | dict, info: ValidationInfo) -> str:
        return checked_notation(info.data.get("space"), value)


def checked_notation(space: str | None, value: str | list | dict) -> str:
    """An architecture's canonical notation, or a ValueError saying what is wrong with it."""
    if space is None:  # the space itself was refused (or not given); that error is reported
        return arch.notation("opgraph", value)
    text = arch.notation(space, value)
    try:
        arch.parse(space, text)
    except ValueError:
        raise
    except arch.NOTATION_ERRORS as exc:
        raise ValueError(f"not a {space} architecture: {type(exc).__name__}: {exc}") from exc
    return text


class LatencyItem(ArchItem):
    """An architecture run on a device setting: the device, the batch size and the runtime."""

    device: DeviceName = Field(description="any name the catalogue resolves, or a registered device")
    batch_size: StrictInt = Field(1, ge=1, le=1_000_000)
    framework: str | None = Field(
        None, description="runtime, e.g. litert, onnx, torchmobile (HW-NAS-Bench-360)"
    )


Fraction = Annotated[StrictFloat, Field(ge=0, le=1, allow_inf_nan=False)]


class CurveItem(BaseModel):
    """A partial learning curve of a training run: validation accuracy after each epoch so far (or at
    each training-set size, for learning curves over data), and what was trained: an architecture
    (``space`` and ``arch``, as for ``nas-accuracy``) and/or a learner's name (LCDB's ``SVC_rbf``).

    A curve as long as its budget is a finished run: its final accuracy is its last value.
    """

    model_config = ConfigDict(extra="forbid")

    space: Space | None = Field(None, description="search space of arch; 'opgraph' for an explicit graph")
    arch: str | list[str] | dict | None = Field(
        None,
        description="the architecture in its space's notation "
        "(as for nas-accuracy); none for a learner without one",
    )
    learner: str | None = Field(
        None,
        min_length=1,
        description="what was trained when it is no architecture, e.g. "
        "LCDB's 'SVC_rbf' or 'sklearn.ensemble.RandomForestClassifier'",
    )
    dataset: str = Field(min_length=1, description="e.g. digits, cifar10, openml-44")
    curve: list[Fraction] = Field(
        min_length=1,
        max_length=10_000,
        description="validation accuracy (a fraction) after each epoch measured so far",
    )
    epochs: list[Annotated[StrictInt, Field(ge=1)]] | None = Field(
        None,
        min_length=1,
        description="the epoch (or training-set size) of each curve point, increasing (default 1, 2, ...)",
    )
    budget: StrictInt = Field(
        ge=1, le=10_000_000, description="epochs (or training-set size) of the run in full"
    )
    learning_rate: StrictFloat | None = Field(
        None, gt=0, allow_inf_nan=False, description="initial learning rate"
    )
    batch_size: StrictInt | None = Field(None, ge=1, le=1_000_000)

    @field_validator("arch")
    @classmethod
    def _parses(cls, value: str | list | dict | None, info: ValidationInfo) -> str | None:
        return None if value is None else checked_notation(info.data.get("space"), value)

    @model_validator(mode="after")
    def _consistent(self) -> CurveItem:
        if (self.space is None) != (self.arch is None):
            raise PydanticCustomError("space_and_arch", "space and arch go together: give both or neither")
        epochs = self.measured_epochs
        if len(epochs) != len(self.curve):
            raise PydanticCustomError(
                "epochs_length",
                "epochs has {e} entries for {c} curve points",
                {"e": len(epochs), "c": len(self.curve)},
            )
        if any(b <= a for a, b in zip(epochs, epochs[1:])):
            raise PydanticCustomError("epochs_order", "epochs must increase strictly")
        if epochs[-1] > self.budget:
            raise PydanticCustomError(
                "curve_too_long",
                "the curve reaches epoch {e}, past the budget of {b} epochs",
                {"e": epochs[-1], "b": self.budget},
            )
        return self

    @property
    def measured_epochs(self) -> list[int]:
        """The epoch of each curve point: as given, or 1, 2, ..."""
        return list(range(1, len(self.curve) + 1)) if self.epochs is None else self.epochs

    @property
    def finished(self) -> bool:
        return self.measured_epochs[-1] == self.budget
