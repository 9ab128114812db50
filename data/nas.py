"""NAS items: an architecture in its space's native notation (or as an explicit op graph), the
dataset it is trained or run on, and for latency the device setting it runs on.

The same models serve loaders, the CLI and the API; notation is checked when an item is made, so
a bad architecture is a 422 that says what was wrong with it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from preflight.data import arch

Space = Literal["nb201", "fbnet", "nb101", "nasbench-graph", "opgraph"]


class ArchItem(BaseModel):
    """An architecture and the dataset it is trained on (what accuracy depends on)."""

    model_config = ConfigDict(extra="forbid")

    space: Space = Field(description="search space; 'opgraph' for an explicit graph of operations")
    arch: str | list[str] | dict = Field(
        description="nb201: arch_str; fbnet: op_str_list ('k3_e1|skip|...', or a list of 22 layers); "
                    "nb101: {adjacency, ops}; nasbench-graph: {link, ops}; "
                    "opgraph: {nodes: [{op, kernel, expansion, groups}], edges: [[from, to]]}")
    dataset: str = Field(min_length=1, description="e.g. cifar10, cifar100, imagenet, ninapro, darcy, cora")

    @field_validator("arch")
    @classmethod
    def _parses(cls, value: str | list | dict, info: ValidationInfo) -> str:
        space = info.data.get("space")
        if space is None:  # the space itself was refused; that error is reported
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

    device: str = Field(min_length=1, description="any name the catalogue resolves, or a registered device")
    batch_size: int = Field(1, ge=1, le=1_000_000)
    framework: str | None = Field(None, description="runtime, e.g. litert, onnx, torchmobile (HW-NAS-Bench-360)")
