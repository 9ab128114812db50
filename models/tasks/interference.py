"""Co-location interference: the slowdown of a workload next to given neighbours.

``interference`` answers before placement, from the workload's load and solo profile and the
neighbours' kinds and counts: a scheduler asking which host hurts a workload least.
``interference-trace`` answers from a window of the host's metric trace while the workload runs:
an operator asking how degraded a service is right now. Both are split by neighbour mix by default:
a mix never seen is what a scheduler meets first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from preflight.data.interference import InterferenceItem, TraceItem
from preflight.features import Features
from preflight.features import interference as interference_features
from preflight.models.core.actions import Action
from preflight.models.core.targets import Target
from preflight.models.core.task import Task, register
from preflight.models.tools import placement

if TYPE_CHECKING:
    from preflight.models.core.predictor import Estimates

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

#: Two 5-second samples of a MARLA host: IPC, L3 and L2 misses, C0 and C1 residency of 8 cores, then
#: the system's IPC, L3 and L2 misses, reads and writes.
_WINDOW = [
    [0.75, 0.28, 1.34, 3.28, 92.2, 0.83, 0.19, 0.79, 2.63, 87.0, 0.84, 0.19, 0.61, 2.49, 97.5, 2.82, 0.19,
     2.41, 31.8, 64.4, 2.8, 0.16, 2.07, 30.8, 64.7, 2.84, 0.17, 2.27, 30.8, 58.8, 0.86, 0.23, 2.01, 8.4,
     91.6, 0.55, 0.26, 3.5, 9.35, 86.9, 2.42, 1.68, 15.0, 2.91, 2.94],
    [0.72, 0.32, 1.53, 3.5, 90.8, 0.74, 0.21, 0.81, 2.69, 91.2, 0.78, 0.22, 0.64, 2.57, 97.4, 2.85, 0.2,
     2.45, 33.1, 62.7, 3.0, 0.15, 2.1, 33.9, 60.4, 2.53, 0.18, 2.05, 26.3, 67.6, 0.85, 0.24, 2.01, 8.12,
     91.9, 0.54, 0.27, 3.55, 9.28, 86.6, 2.41, 1.78, 15.2, 3.0, 2.97],
]  # fmt: skip


def with_window(table: pd.DataFrame) -> pd.DataFrame:
    """Runs whose metric trace was found (the black-box model learns from nothing else)."""
    return table[table["window"].notna()]


def alone_is_not_slowed(features: Features, estimates: Estimates) -> None:
    """A workload with no neighbours runs as it does alone: ``norm_perf`` is 1 by definition, its
    interval that one value, whatever a model learned from runs with neighbours would say."""
    alone = np.flatnonzero(features.X["n_total"].to_numpy() == 0)
    if not len(alone) or "norm_perf" not in estimates.value:
        return
    for frame in (estimates.value, estimates.low, estimates.high):
        frame.iloc[alone, frame.columns.get_loc("norm_perf")] = 1.0
    estimates.note(alone.tolist(), "exact:norm_perf")


register(
    Task(
        name="interference",
        item=InterferenceItem,
        targets={"norm_perf": NORM_PERF},
        # cloudprophet (``--source cloudprophet``) is left out by default: its time-weighted counts make
        # nearly every run a mix of its own and its norm_perf is relative to the app's best, not to alone
        sources=("marla", "local-interference"),
        featurize=interference_features.before_placement,
        derive=alone_is_not_slowed,
        groups=_SPLITS,
        group_key="mix",
        families=("tree", "linear"),
        default_family="tree",
        baseline="linear",
        examples=(
            {
                "workload": "nginx",
                "load_rps": 2000,
                "replicas": 1,
                "neighbours": {"cpu": 1, "l3": 2},
                "solo": {"ipc": 0.9, "p99_ms": 0.15},
            },
        ),
        metric="mae",
        device_column=None,  # a host is named, not looked up in the catalogue
        seen_columns=("workload",),  # a host enters through the solo profile measured on it
        actions=(
            Action(
                "place",
                "/v1/interference/place",
                placement.PlaceRequest,
                placement.PlaceResponse,
                placement.place_workload,
                examples={
                    "hosts": {
                        "summary": "a web server and three hosts",
                        "value": {
                            "workload": {
                                "workload": "nginx",
                                "load_rps": 2000,
                                "replicas": 1,
                                "solo": {"ipc": 0.9, "p99_ms": 0.15},
                            },
                            "hosts": [
                                {"name": "node-a", "residents": {"cpu": 2, "l3": 2}},
                                {"name": "node-b", "residents": {"membw": 1}},
                                {"name": "node-c"},
                            ],
                        },
                    }
                },
            ),
        ),
    )
)

register(
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
        examples=({"window": _WINDOW, "load_rps": 1000, "replicas": 2},),
        metric="mae",
        device_column=None,
        select=with_window,
    )
)
