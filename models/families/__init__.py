"""Model families behind one small estimator interface.

A family is constructed from hyperparameters only, learns in ``fit(features, Y, sample_weight)``
(state ends in ``_``), predicts point estimates per target with ``predict(features)``, and saves
itself to and loads itself from a directory. It takes from ``Features`` what it needs: the table
``X``, the ``reference`` scales, or the architecture in ``meta`` (a GNN). Each target is learned on
its own scale (``targets``). Adding a family means one module here plus one line below.
"""

from __future__ import annotations

from preflight.models.families.curve import ExtrapolationFamily, LastValueFamily
from preflight.models.families.gnn import GnnFamily
from preflight.models.families.linear import LinearFamily
from preflight.models.families.roofline import RooflineFamily
from preflight.models.families.tree import TreeFamily

FAMILIES = {
    "tree": TreeFamily,
    "roofline": RooflineFamily,
    "linear": LinearFamily,
    "gnn": GnnFamily,
    "extrapolation": ExtrapolationFamily,
    "last-value": LastValueFamily,
}


def make_family(name: str, seed: int = 0, **params):
    """A new, unfitted family; ``params`` override its default hyperparameters."""
    if name not in FAMILIES:
        raise ValueError(f"unknown family {name!r}; known families: {', '.join(FAMILIES)}")
    return FAMILIES[name](seed=seed, **params)
