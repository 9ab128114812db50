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
from preflight.models.core.targets import Target

if TYPE_CHECKING:
    from preflight.models.tools.whatif import WhatIf


def predicted_vs_actual(y: pd.Series, pred: pd.Series, target: str, spec: Target) -> Figure:
    """Estimates against measurements (log axes for a positive quantity), with the line of equality."""
    if spec.kind.event:
        return reliability(y, pred, target)
    fig = Figure(figsize=(5, 5), layout="constrained")
    ax = fig.subplots()
    absolute = not spec.kind.relative
    ok = y.notna() & pred.notna() if absolute else (y > 0) & (pred > 0)
    (ax.plot if absolute else ax.loglog)(y[ok], pred[ok], ".", alpha=0.3, markersize=3)
    lo, hi = float(min(y[ok].min(), pred[ok].min())), float(max(y[ok].max(), pred[ok].max()))
    ax.plot([lo, hi], [lo, hi], "k--", linewidth=1, label="predicted = measured")
    unit = f" ({spec.unit})" if spec.unit else ""
    scale = ", log scale" if not absolute else ""
    ax.set(
        xlabel=f"measured {target}{unit}{scale}",
        ylabel=f"predicted {target}{unit}{scale}",
        title=f"{target}: predicted vs measured ({int(ok.sum()):,} rows)",
    )
    ax.legend(loc="upper left")
    ax.grid(which="major", alpha=0.3)
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
#: Bar charts show at most this many groups (the worst ones).
TOP_GROUPS = 30


def readable_labels(labels: pd.Series) -> pd.Series:
    """Group labels of several columns (``4096|4096|fp16``, empty parts included) joined by `` · ``,
    with the empty parts left out."""
    parts = labels.astype(str).str.split("|")
    return parts.map(lambda p: " · ".join(part for part in p if part and part != "nan") or "(none)")


def _cut(label: str) -> str:
    return label if len(label) <= LABEL_CHARS else label[: LABEL_CHARS - 1] + "…"


def counted_labels(labels: pd.Index, rows: pd.Series) -> list[str]:
    """Group labels (cut to ``LABEL_CHARS``) with each group's rows: ``apple-a8 (n=5)``."""
    return [f"{_cut(str(label))} (n={int(rows[label]):,})" for label in labels]


def percent(share: float) -> str:
    """A share (0.004) as a percentage, a nonzero one never shown as 0%: ``0.4%``, ``<0.1%``, ``20%``."""
    if 0 < share < 0.001:
        return "<0.1%"
    return f"{share:.1%}" if 0 < share < 0.1 else f"{share:.0%}"


def group_bars(
    values: pd.Series, rows: pd.Series, xlabel: str, title: str, reference: float | None = None
) -> Figure:
    """One horizontal bar per group (index: labels), in the given order, the first ``TOP_GROUPS``, each
    labelled with its ``rows`` (indexed by the same labels); ``reference`` draws a vertical line at a
    percentage (a nominal coverage, 90 for 90%)."""
    shown = values.head(TOP_GROUPS)
    fig = Figure(figsize=(7, 1.2 + 0.26 * len(shown)), layout="constrained")
    ax = fig.subplots()
    ax.barh(counted_labels(shown.index, rows), shown.to_numpy(), color="tab:blue", alpha=0.8)
    ax.invert_yaxis()
    if reference is not None:
        label = f"nominal {percent(reference / 100)}"
        ax.axvline(reference, color="black", linestyle="--", linewidth=1, label=label)
        ax.legend(loc="lower right")
    more = f" (worst {len(shown)} of {len(values)})" if len(values) > len(shown) else ""
    ax.set(xlabel=xlabel, title=title + more)
    ax.grid(axis="x", alpha=0.3)
    return fig


def error_by_group(
    y: pd.Series,
    pred: pd.Series,
    groups: pd.Series,
    target: str,
    spec: Target,
    by: str = "group",
) -> Figure:
    """Median error per group (``Target.error``), worst first."""
    labels = readable_labels(pd.Series(groups.to_numpy(), index=y.index))
    errors = spec.error(y, pred).groupby(labels)
    per_group = errors.median().sort_values(ascending=False)
    return group_bars(per_group, errors.size(), f"median {spec.error_label}", f"{target}: error by {by}")


def coverage_by_group(coverage: pd.Series, rows: pd.Series, nominal: float, by: str) -> Figure:
    """The share of each group's measurements inside their interval (of ``nominal`` coverage, 0.9 for
    90%), lowest first."""
    xlabel, title = "measurements inside the interval (%)", f"interval coverage by {by}"
    fig = group_bars(coverage.sort_values() * 100, rows, xlabel, title, reference=nominal * 100)
    fig.axes[0].set_xlim(0, 100)
    fig.axes[0].legend(loc="upper right")  # the lowest coverages are on top: short bars
    return fig


def ood_by_group(share: pd.Series, rows: pd.Series, by: str) -> Figure:
    """The share of each group's rows flagged out of distribution, highest first; the title gives the
    share of all their rows."""
    overall = float((share * rows[share.index]).sum() / rows[share.index].sum())
    fig = group_bars(share.sort_values(ascending=False) * 100, rows, "rows flagged out of distribution (%)",
                     f"out of distribution by {by}: {percent(overall)} of all rows")  # fmt: skip
    fig.axes[0].set_xlim(0, 100)
    return fig


def calibration_curve(levels: pd.DataFrame, target: str) -> Figure:
    """Observed against nominal interval coverage; on the diagonal, the intervals mean what they say."""
    fig = Figure(figsize=(5, 5), layout="constrained")
    ax = fig.subplots()
    ax.plot(levels["nominal"] * 100, levels["observed"] * 100, "o-", label="observed")
    ax.plot([0, 100], [0, 100], "k--", linewidth=1, label="perfect calibration")
    ax.set(
        xlim=(0, 100),
        ylim=(0, 100),
        xlabel="nominal coverage of the interval (%)",
        ylabel="measurements inside the interval (%)",
        title=f"{target}: interval calibration",
    )
    ax.legend(loc="upper left")
    ax.grid(alpha=0.3)
    return fig


def side_by_side(errors: pd.DataFrame, rows: pd.Series, xlabel: str, title: str) -> Figure:
    """Two or more models' values per group (columns: models; index: groups, whose ``rows`` label them),
    as paired bars."""
    shown = errors.head(TOP_GROUPS)
    fig = Figure(figsize=(7, 1.5 + 0.4 * len(shown)), layout="constrained")
    ax = fig.subplots()
    y = np.arange(len(shown))
    height = 0.8 / len(shown.columns)
    for i, column in enumerate(shown.columns):
        ax.barh(y + i * height, shown[column].to_numpy(), height=height, label=str(column))
    ax.set_yticks(y + height * (len(shown.columns) - 1) / 2, counted_labels(shown.index, rows))
    ax.invert_yaxis()
    ax.set(xlabel=xlabel, title=title)
    ax.legend(loc="lower right")
    ax.grid(axis="x", alpha=0.3)
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
