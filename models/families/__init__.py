"""Model families behind one small estimator interface.

A family is constructed from hyperparameters only, learns in ``fit(X, Y, reference)`` (state ends
in ``_``), predicts point estimates per target with ``predict(X, reference)``, and saves itself to
and loads itself from a directory. Adding a family means one module here plus one line below.
"""

from __future__ import annotations

from preflight.models.families.roofline import RooflineFamily
from preflight.models.families.tree import TreeFamily

FAMILIES = {"tree": TreeFamily, "roofline": RooflineFamily}


def make_family(name: str, seed: int = 0, **params):
    """A new, unfitted family; ``params`` override its default hyperparameters."""
    if name not in FAMILIES:
        raise ValueError(f"unknown family {name!r}; known families: {', '.join(FAMILIES)}")
    return FAMILIES[name](seed=seed, **params)
