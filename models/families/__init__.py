"""Model families behind one small estimator interface.

A family is constructed from the task's targets and hyperparameters only, learns in
``fit(features, Y, sample_weight)`` (state ends in ``_``), predicts point estimates per target with
``predict(features)``, and saves itself to and loads itself from a directory. It takes from
``Features`` what it needs: the table ``X``, the ``reference`` scales, the ``graphs`` (a GNN) or the
``sequences``. Each target is learned on its declared scale (``models/core/targets.py``). A family is one
module here plus one line below.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol, Self

import numpy as np
import pandas as pd
from preflight.data.errors import UsageError
from preflight.features import Features
from preflight.models.core.targets import Target
from preflight.models.families.curve import ExtrapolationFamily, LastValueFamily
from preflight.models.families.gnn import GnnFamily
from preflight.models.families.kernel_sum import KernelSumFamily
from preflight.models.families.linear import LinearFamily
from preflight.models.families.physics import PhysicsFamily
from preflight.models.families.roofline import RooflineFamily
from preflight.models.families.transformer import TransformerFamily
from preflight.models.families.tree import TreeFamily


class Family(Protocol):
    name: str
    #: Whether fits may run side by side on threads of one process (``parallel.fan_out``): no global
    #: state, one CPU each, and much of the time in code that releases the GIL (LightGBM, NumPy).
    concurrent: bool

    def __init__(self, *, targets: dict[str, Target], seed: int = 0, **params: Any) -> None: ...

    def fit(self, features: Features, Y: pd.DataFrame, sample_weight: np.ndarray | None = None) -> Self: ...

    def predict(self, features: Features) -> pd.DataFrame: ...

    def save(self, directory: Path) -> None: ...

    @classmethod
    def load(cls, directory: Path) -> Self: ...


FAMILIES: dict[str, type[Family]] = {
    "tree": TreeFamily,
    "roofline": RooflineFamily,
    "linear": LinearFamily,
    "gnn": GnnFamily,
    "extrapolation": ExtrapolationFamily,
    "last-value": LastValueFamily,
    "kernel-sum": KernelSumFamily,
    "transformer": TransformerFamily,
    "physics": PhysicsFamily,
}


def family_class(name: str) -> type[Family]:
    """The family a name means."""
    if name not in FAMILIES:
        raise UsageError(f"unknown family {name!r}; known families: {', '.join(FAMILIES)}")
    return FAMILIES[name]


def make_family(name: str, targets: dict[str, Target], seed: int = 0, **params) -> Family:
    """A new, unfitted family for a task's targets; ``params`` override its default hyperparameters."""
    return family_class(name)(targets=targets, seed=seed, **params)
