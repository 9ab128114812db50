"""NAS: the accuracy of an architecture on a dataset, its latency and energy on a device setting, and
the final accuracy of a training run from its partial learning curve."""

from __future__ import annotations

import numpy as np
import pandas as pd
from preflight.data import arch
from preflight.data.nas import ArchItem, CurveItem, LatencyItem
from preflight.features import arch as arch_features
from preflight.features import curve as curve_features
from preflight.models.core.actions import Action
from preflight.models.core.targets import Target
from preflight.models.core.task import Task, register
from preflight.models.tools import early_stop, reference_archs

_SPLITS: dict[str, tuple[str, ...]] = {"arch": ("arch_group",), "dataset": ("dataset",), "space": ("space",)}
#: A NAS-Bench-201 cell in its arch_str notation.
_NB201_CELL = "|nor_conv_3x3~0|+|nor_conv_3x3~0|skip_connect~1|+|nor_conv_3x3~0|none~1|nor_conv_1x1~2|"


def final_accuracy(table: pd.DataFrame) -> pd.DataFrame:
    """One row per (architecture, dataset): the last epoch's accuracy, averaged over repeated runs."""
    rows = table[table["accuracy"].notna()]
    if "epoch" in rows and rows["epoch"].notna().any():
        last = rows.groupby(["space", "arch", "dataset"])["epoch"].transform("max")
        rows = rows[rows["epoch"] == last]
    keys = ["space", "arch", "arch_group", "dataset"]
    return rows.groupby(keys, as_index=False, sort=False)["accuracy"].mean()


def measured_latency(table: pd.DataFrame) -> pd.DataFrame:
    """Rows with a latency or an energy measured on a named device."""
    measured = table[["latency_ms", "energy_mj"]].notna().any(axis=1)
    named = table["device"].notna() & (table["device"].astype(str) != "")
    return table[measured & named]


def arch_cost(raw: dict) -> float:
    """An item's work (``models/core/budget.py``): its architecture's, from the lengths of its lists."""
    return arch.cost(raw.get("arch"))


register(
    Task(
        name="nas-accuracy",
        item=ArchItem,
        targets={
            "accuracy": Target(
                "fraction",
                "identity",
                upper=1.0,
                description="a score for regression benchmarks such as darcy",
            )
        },
        sources=("hw-nas-bench-360", "nas-bench-graph", "ec-nas"),
        featurize=arch_features.architecture_in_context,
        groups=_SPLITS,
        group_key="arch",
        families=("tree", "gnn", "linear"),
        default_family="tree",
        baseline="linear",
        examples=({"space": "nb201", "arch": _NB201_CELL, "dataset": "cifar100"},),
        metric="kendall",
        device_column=None,  # accuracy belongs to the architecture and dataset, not to a device
        seen_columns=("dataset",),
        select=final_accuracy,
        max_rows_per_source=10_000,  # a first start trains every task: keep NAS to minutes on 2 cores
        cost=arch_cost,
        cost_unit="four units an architecture, one more per eight nodes or edges of a graph",
    )
)

register(
    Task(
        name="nas-latency",
        item=LatencyItem,
        targets={"latency_ms": Target("ms"), "energy_mj": Target("mJ")},
        # NAS-Bench-Graph's latency comes from a machine its file does not name: not a device setting
        sources=("help-nb201", "help-fbnet", "hw-nas-bench-360"),
        featurize=arch_features.architecture_in_context,
        groups=_SPLITS | {"device": ("device_id",), "hardware": ("hardware",)},
        group_key="arch",
        families=("tree", "gnn", "linear"),
        default_family="tree",
        baseline="linear",
        examples=(
            {
                "space": "nb201",
                "arch": _NB201_CELL,
                "dataset": "cifar100",
                "device": "Raspberry Pi 5",
                "framework": "litert",
            },
        ),
        metric="mape",
        machine_column="hardware",  # calibration holds a machine out with all its batch sizes and runtimes
        seen_columns=("dataset",),
        measured_devices=True,  # HELP's FPGA and Eyeriss have no spec sheet: learned from their latencies
        adaptation="fingerprint",  # ten measured architectures describe a device (HELP)
        actions=(
            Action(
                "reference-archs",
                "/v1/nas-latency/reference-archs",
                reference_archs.ReferenceArchsRequest,
                reference_archs.ReferenceArchsResponse,
                reference_archs.reference_archs,
                examples={
                    "nb201": {"summary": "ten NAS-Bench-201 cells", "value": {"space": "nb201", "k": 10}}
                },
                safe=True,  # GET /v1/nas-latency/reference-archs?k=10
            ),
        ),
        select=measured_latency,
        max_rows_per_source=10_000,
        cost=arch_cost,
        cost_unit="four units an architecture, one more per eight nodes or edges of a graph",
    )
)


#: Runs one source contributes at most, drawn with a fixed seed (LCDB holds 124,000).
MAX_RUNS = 5_000


def partial_curves(table: pd.DataFrame) -> pd.DataFrame:
    """Every proper prefix of every run's validation curve, each with the run's final accuracy as target.

    A run is the rows of one ``run`` id, one per epoch (epochs 1 and up; an untrained epoch 0 says
    nothing of the run); its final accuracy is the one at its ``budget``.
    """
    rows = table[(table["epoch"] >= 1) & table["valid_accuracy"].notna()]
    runs = rows["run"].unique()
    if len(runs) > MAX_RUNS:
        rows = rows[rows["run"].isin(np.random.default_rng(0).choice(runs, MAX_RUNS, replace=False))]
    rows = rows.sort_values(["run", "epoch"])
    out = []
    for run, curve in rows.groupby("run", sort=False):
        budget = int(curve["budget"].iloc[0])
        if curve["epoch"].iloc[-1] != budget:
            continue  # the final accuracy is unknown
        first = curve.iloc[0]
        context = {
            c: first[c]
            for c in ("space", "arch", "arch_group", "learner", "dataset", "learning_rate", "batch_size")
            if c in curve
        }
        values, epochs = curve["valid_accuracy"].tolist(), curve["epoch"].astype(int).tolist()
        out += [
            context
            | {
                "run": run,
                "curve": values[:k],
                "epochs": epochs[:k],
                "budget": budget,
                "accuracy": values[-1],
            }
            for k in range(1, len(values))
        ]
    return pd.DataFrame(out)


_RUN = {
    "space": "nb201",
    "arch": _NB201_CELL,
    "dataset": "cifar10",
    "curve": [0.31, 0.47, 0.55],
    "budget": 200,
}

register(
    Task(
        name="nas-curve",
        item=CurveItem,
        targets={
            "accuracy": Target(
                "fraction", "identity", upper=1.0, description="final validation accuracy of the run"
            )
        },
        sources=("local-curves", "ec-nas", "lcdb"),
        featurize=curve_features.partial_curve,
        groups={"arch": ("arch_group",), "run": ("run",), "dataset": ("dataset",)},
        group_key="arch",
        families=("tree", "extrapolation", "last-value"),
        default_family="tree",
        baseline="extrapolation",
        examples=(_RUN,),
        metric="mae",
        device_column=None,
        seen_columns=("dataset",),
        select=partial_curves,
        cost=arch_cost,
        cost_unit="four units an architecture, one more per eight nodes or edges of a graph",
        actions=(
            Action(
                "early-stop",
                "/v1/nas/early-stop",
                early_stop.EarlyStopRequest,
                early_stop.EarlyStopResponse,
                early_stop.early_stop,
                examples={
                    "architecture": {
                        "summary": "a NAS-Bench-201 cell after 3 of 200 epochs",
                        "value": _RUN | {"learning_rate": 0.1, "incumbent": 0.93},
                    },
                    "learner": {
                        "summary": "a learner over training-set sizes (LCDB)",
                        "value": {
                            "learner": "SVC_rbf",
                            "dataset": "openml-44",
                            "curve": [0.6, 0.7],
                            "epochs": [16, 32],
                            "budget": 4096,
                            "incumbent": 0.9,
                        },
                    },
                },
            ),
        ),
    )
)
