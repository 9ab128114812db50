"""The one prediction path that the HTTP routes, the CLI and the early-stop decision share:
items → canonical rows → features → estimates."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from preflight.data.catalogue import Catalogue
from preflight.data.errors import UnknownDevice, UsageError
from preflight.features import Features
from preflight.models.core.predictor import Estimates, Predictor
from preflight.models.core.task import Task


@dataclass
class Prediction:
    features: Features
    estimates: Estimates

    def records(self) -> list[dict]:
        return self.estimates.records()


def predict_items(
    task: Task, predictor: Predictor, catalogue: Catalogue, items: list[Any], coverage: float = 0.9
) -> Prediction:
    """Estimates for validated items (the task's item model); an unknown device names the items that
    carry it."""
    if not items:
        raise UsageError("no items to estimate: give at least one")
    rows = task.items_to_rows(items)
    try:
        features = task.featurize(rows, catalogue)
    except UnknownDevice as exc:
        carrying = [i for i, item in enumerate(items) if getattr(item, "device", None) == exc.name]
        raise exc.at(carrying) from None
    return Prediction(features, predictor.predict(features, coverage))
