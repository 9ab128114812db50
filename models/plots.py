"""Evaluation plots logged as MLflow artifacts: predicted vs actual, and error by group."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from preflight.models.targets import Target  # noqa: E402


def predicted_vs_actual(y: pd.Series, pred: pd.Series, target: str, spec: Target) -> plt.Figure:
    fig, ax = plt.subplots(figsize=(5, 5))
    absolute = not spec.relative
    ok = y.notna() & pred.notna() if absolute else (y > 0) & (pred > 0)
    (ax.plot if absolute else ax.loglog)(y[ok], pred[ok], ".", alpha=0.3, markersize=3)
    lo, hi = float(min(y[ok].min(), pred[ok].min())), float(max(y[ok].max(), pred[ok].max()))
    ax.plot([lo, hi], [lo, hi], "k--", linewidth=1)
    ax.set(
        xlabel=f"measured {target}", ylabel=f"predicted {target}", title=f"{target}: predicted vs measured"
    )
    fig.tight_layout()
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
) -> plt.Figure:
    absolute = not spec.relative
    error = (pred - y).abs() if absolute else (pred - y).abs() / y * 100
    per_group = error.groupby(groups.to_numpy()).median().sort_values(ascending=False).head(top)
    fig, ax = plt.subplots(figsize=(7, max(3, 0.25 * len(per_group))))
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
    fig.tight_layout()
    return fig


def close(fig: plt.Figure) -> None:
    plt.close(fig)
