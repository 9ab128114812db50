"""Evaluation plots logged as MLflow artifacts (predicted vs actual, or a reliability diagram for an
event's probability; error by group), and the what-if's time-per-run chart. Plain ``Figure`` objects:
no pyplot state to close and no backend to choose."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from preflight.models.targets import Target

if TYPE_CHECKING:
    from preflight.models.whatif import WhatIf


def predicted_vs_actual(y: pd.Series, pred: pd.Series, target: str, spec: Target) -> Figure:
    if spec.binary:
        return reliability(y, pred, target)
    fig = Figure(figsize=(5, 5), layout="constrained")
    ax = fig.subplots()
    absolute = not spec.relative
    ok = y.notna() & pred.notna() if absolute else (y > 0) & (pred > 0)
    (ax.plot if absolute else ax.loglog)(y[ok], pred[ok], ".", alpha=0.3, markersize=3)
    lo, hi = float(min(y[ok].min(), pred[ok].min())), float(max(y[ok].max(), pred[ok].max()))
    ax.plot([lo, hi], [lo, hi], "k--", linewidth=1)
    ax.set(
        xlabel=f"measured {target}", ylabel=f"predicted {target}", title=f"{target}: predicted vs measured"
    )
    return fig


def reliability(y: pd.Series, probability: pd.Series, target: str, bins: int = 10) -> Figure:
    """How often the event happened against its predicted probability, in bins of the probability."""
    fig = Figure(figsize=(5, 5), layout="constrained")
    ax = fig.subplots()
    which = np.minimum((probability.to_numpy(dtype=float) * bins).astype(int), bins - 1)
    table = pd.DataFrame({"bin": which, "p": probability.to_numpy(), "y": y.to_numpy()}).groupby("bin")
    ax.plot(table["p"].mean(), table["y"].mean(), "o-", label="observed rate")
    ax.plot([0, 1], [0, 1], "k--", linewidth=1, label="perfect calibration")
    ax.set(xlabel=f"predicted P({target})", ylabel=f"observed share {target}", title=f"{target}: reliability")
    ax.legend(loc="upper left")
    return fig


#: Group labels longer than this (an architecture's notation) are cut, so that the bars keep their room.
LABEL_CHARS = 40


def error_by_group(
    y: pd.Series,
    pred: pd.Series,
    groups: pd.Series,
    target: str,
    spec: Target,
    by: str = "group",
    top: int = 30,
) -> Figure:
    absolute = not spec.relative
    error = (pred - y).abs() if absolute else (pred - y).abs() / y * 100
    per_group = error.groupby(groups.to_numpy()).median().sort_values(ascending=False).head(top)
    fig = Figure(figsize=(7, max(3, 0.25 * len(per_group))), layout="constrained")
    ax = fig.subplots()
    labels = [
        label if len(label) <= LABEL_CHARS else label[: LABEL_CHARS - 1] + "…"
        for label in per_group.index.astype(str)
    ]
    ax.barh(labels, per_group.to_numpy())
    ax.invert_yaxis()
    ax.set(
        xlabel=f"median absolute error ({target})" if absolute else "median APE (%)",
        title=f"{target}: error by {by} (worst {len(per_group)})",
    )
    return fig


#: The what-if chart's bar colour, and the hatch that marks an out-of-distribution estimate.
WHATIF_COLOUR, OOD_HATCH = "tab:blue", "///"


def whatif_times(result: WhatIf) -> Figure:
    """Time per run of the workload on each device (fastest on top) with its interval, on a log axis;
    hatched bars are out of distribution. A plain ``Figure``: no pyplot state and no backend to choose."""
    devices = result.devices
    value = np.array([d.time_ms.value for d in devices])
    # an unbounded side (None) is drawn up to the estimate and said in the label
    low = np.array([d.time_ms.value if d.time_ms.low is None else d.time_ms.low for d in devices])
    high = np.array([d.time_ms.value if d.time_ms.high is None else d.time_ms.high for d in devices])
    fig = Figure(figsize=(8, 1.5 + 0.32 * len(devices)), layout="constrained")
    ax = fig.subplots()
    y = np.arange(len(devices))
    bars = ax.barh(y, value, log=True, color=WHATIF_COLOUR, alpha=0.75, edgecolor="black", linewidth=0.5)
    for bar, device in zip(bars, devices):
        bar.set_hatch(OOD_HATCH if device.ood else "")
    ax.errorbar(value, y, xerr=[value - low, high - value], fmt="none", ecolor="black", capsize=3)
    for row, (v, h) in enumerate(zip(value, high)):
        ax.annotate(f"{v:.3g}", (h, row), xytext=(6, 0), textcoords="offset points", va="center", fontsize=8)
    labels = [d.name + ("  (no upper bound)" if d.time_ms.high is None else "") for d in devices]
    ax.set_yticks(y, labels)
    ax.set_ylim(len(devices) - 0.5, -0.5)  # fastest on top
    ax.set_xlim(right=high.max() * 3)  # room for the labels
    ax.set_xlabel(f"time per run (ms, log scale): {result.items} {result.task} items")
    ax.set_title(f"What-if: {result.task} workload by device ({result.coverage:.0%} intervals)")
    ax.legend(
        handles=[
            Patch(facecolor=WHATIF_COLOUR, alpha=0.75, edgecolor="black", label="in distribution"),
            Patch(facecolor=WHATIF_COLOUR, alpha=0.75, edgecolor="black", hatch=OOD_HATCH,
                  label="out of distribution"),
            Line2D([], [], color="black", marker="|", linestyle="-", label=f"{result.coverage:.0%} interval"),
        ],
        loc="best",
    )  # fmt: skip
    ax.grid(axis="x", which="both", alpha=0.3)
    return fig
