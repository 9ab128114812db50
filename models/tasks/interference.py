"""Co-location interference: the slowdown of a workload next to given neighbours.

``interference`` answers before placement, from the workload's load and solo profile and the
neighbours' kinds and counts: a scheduler asking which host hurts a workload least.
``interference-trace`` answers from a window of the host's metric trace while the workload runs:
an operator asking how degraded a service is right now. Both are split by neighbour mix by default:
a mix never seen is what a scheduler meets first.
"""

from __future__ import annotations

import pandas as pd
from preflight.data.interference import InterferenceItem, TraceItem
from preflight.features import interference as interference_features
from preflight.models.targets import Target
from preflight.models.task import Task, register

NORM_PERF = Target(
    "ratio",
    "log",
    lower=0.0,
    description="performance next to the neighbours over performance alone (1: none)",
)
_SPLITS: dict[str, tuple[str, ...]] = {
    "mix": ("mix",),
    "host": ("host",),
    "workload": ("workload",),
    "session": ("session",),
}


def with_window(table: pd.DataFrame) -> pd.DataFrame:
    """Runs whose metric trace was found (the black-box model learns from nothing else)."""
    return table[table["window"].notna()]


INTERFERENCE = register(
    Task(
        name="interference",
        item=InterferenceItem,
        targets={"norm_perf": NORM_PERF},
        # cloudprophet (``--source cloudprophet``) is left out by default: its time-weighted counts make
        # nearly every run a mix of its own and its norm_perf is relative to the app's best, not to alone
        sources=("marla", "local-interference"),
        featurize=interference_features.preflight,
        groups=_SPLITS,
        group_key="mix",
        families=("tree", "linear"),
        default_family="tree",
        baseline="linear",
        metric="mae",
        device_column=None,  # a host is named, not looked up in the catalogue
        seen_columns=("workload",),  # a host enters through the solo profile measured on it
    )
)

INTERFERENCE_TRACE = register(
    Task(
        name="interference-trace",
        item=TraceItem,
        targets={"norm_perf": NORM_PERF},
        sources=("marla",),
        featurize=interference_features.trace,
        groups=_SPLITS,
        group_key="mix",
        families=("tree", "transformer", "linear"),
        default_family="tree",
        baseline="linear",
        metric="mae",
        device_column=None,
        select=with_window,
    )
)
