"""A question a domain answers beyond per-item estimates (stop this training run? which host? which
pragma settings next?), declared beside its task (``Task.actions``).

An ``Action`` names its request and response models and the function that answers; the service
mounts each as ``POST path``, and the Python API and the CLI as ``preflight.ask(name, request)`` and
``preflight ask NAME --input FILE``, with no code of their own. The function reads the task's model
as served (``Served``) and returns the response, whose ``model`` says which version answered.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

if TYPE_CHECKING:
    from preflight.data.catalogue import Catalogue
    from preflight.data.settings import Settings
    from preflight.models.core.predictor import Predictor
    from preflight.models.core.task import Task
    from preflight.models.registry.devices import Champion, DeviceRegistry
    from preflight.models.registry.tracking import ModelInfo


#: The most items (estimates) one request may ask for, and measurements one registration may carry (a
#: few-shot adaptation needs a handful).
MAX_ITEMS, MAX_MEASUREMENTS = 10_000, 1_000


class ModelInfoPublic(BaseModel):
    """The model version that answered."""

    name: str
    version: str
    run_id: str
    family: str
    adaptation: str | None = Field(
        None, description="the measurements this answer's model is adapted to (a digest); null: none"
    )


class Estimate(BaseModel):
    """A point estimate and its interval at the request's coverage; null where there is none."""

    value: float | None
    low: float | None
    high: float | None


@dataclass(frozen=True)
class Served:
    """What an action reads: its task, the task's champion as served (``predictor``: adapted to the
    measurements the home holds; ``base``: before them; ``info``: the version's label), and the home's
    registry of devices and measurements (with its catalogue and settings)."""

    task: Task
    champion: Champion
    registry: DeviceRegistry

    @property
    def predictor(self) -> Predictor:
        return self.champion.predictor

    @property
    def base(self) -> Predictor:
        return self.champion.base

    @property
    def info(self) -> ModelInfo:
        return self.champion.info

    @property
    def catalogue(self) -> Catalogue:
        return self.registry.catalogue

    @property
    def settings(self) -> Settings:
        return self.registry.settings

    def model(self, predictor: Predictor | None = None) -> ModelInfoPublic:
        """The answer's model label; with ``predictor`` (adapted further for this answer only), naming
        that predictor's adaptation."""
        adaptation = self.info.adaptation if predictor is None else predictor.adaptation
        return ModelInfoPublic(**vars(self.info) | {"adaptation": adaptation})


@dataclass(frozen=True)
class Action:
    """One question of a task: ``answer(served, request) -> response`` (its docstring documents the
    route and the command), ``request`` and ``response`` its pydantic models, ``path`` its HTTP route
    (``POST``), ``name`` its command and the Python API's name for it, ``examples`` requests shown in
    the OpenAPI document (name -> summary and value), ``safe`` a read-only question whose request's
    fields are all scalars: mounted as ``GET path?field=value`` too."""

    name: str
    path: str
    request: type[BaseModel]
    response: type[BaseModel]
    answer: Callable[[Served, Any], BaseModel]
    examples: dict[str, dict[str, Any]] = field(default_factory=dict)
    safe: bool = False

    def __post_init__(self) -> None:
        if "model" not in self.response.model_fields:
            raise ValueError(f"action {self.name!r}: its response needs a `model` field (ModelInfoPublic)")

    @property
    def description(self) -> str:
        return inspect.getdoc(self.answer) or ""

    @property
    def summary(self) -> str:
        return self.description.split("\n\n", 1)[0].replace("\n", " ")
