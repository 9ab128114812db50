"""The one prediction path that the HTTP routes, the CLI and the early-stop decision share:
items → canonical rows → features → estimates."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from preflight.data.catalogue import Catalogue
from preflight.data.errors import UnknownDevice, UsageError
from preflight.features import Features, rows_of_each
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
    return predict_rows(task, predictor, catalogue, task.items_to_rows(items), coverage)


def predict_rows(
    task: Task, predictor: Predictor, catalogue: Catalogue, rows: pd.DataFrame, coverage: float = 0.9
) -> Prediction:
    """Estimates for canonical rows of validated items (``Task.items_to_rows``, ``pyfunc.rows``); an
    unknown device names the rows that carry it."""
    if len(rows) == 0:
        raise UsageError("no items to estimate: give at least one")
    try:
        features = task.featurize(rows, catalogue)
    except UnknownDevice as exc:
        carrying = np.flatnonzero(rows["device"].to_numpy() == exc.name) if "device" in rows else ()
        raise exc.at([int(i) for i in carrying]) from None
    estimates = predictor.predict(features, coverage)
    if "device" in rows:
        _note_ambiguous_devices(rows["device"], catalogue, estimates)
    return Prediction(features, estimates)


def _note_ambiguous_devices(names: pd.Series, catalogue: Catalogue, estimates: Estimates) -> None:
    """Notes ``ambiguous:NAME=ID`` where a device name fits several devices: ``H100`` is answered for
    the SXM5, as the data sets that write it mean, and a user choosing between it and the PCIe card
    must see which (each distinct name looked up once)."""
    for name, rows in rows_of_each(names).items():
        if isinstance(name, str) and name and catalogue.fits_several(name):
            estimates.note(rows.tolist(), f"ambiguous:{name}={catalogue.resolve(name).id}")
