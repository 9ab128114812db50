"""Metrics in the units of the ``evaluate --json`` contract (percentages in percent): ``regression`` for
quantities, ``classification`` for an event's probability (a ``binary`` target)."""

from __future__ import annotations

import numpy as np
from scipy import stats

#: Metrics where a larger value is better (the rest are errors).
HIGHER_IS_BETTER = frozenset({"r2", "spearman", "kendall", "auc", "accuracy"})


def higher_is_better(metric: str) -> bool:
    return metric in HIGHER_IS_BETTER


def regression(
    y: np.ndarray,
    pred: np.ndarray,
    low: np.ndarray | None = None,
    high: np.ndarray | None = None,
    relative: bool = True,
) -> dict:
    """Errors (percentages over the rows whose measurement is not 0), rank correlations and interval
    coverage; ``interval_width`` is the median width,
    relative to the estimate for positive targets (``relative``) and in the target's units otherwise."""
    y, pred = np.asarray(y, float), np.asarray(pred, float)
    nonzero = y != 0  # a count of 0 has no percentage error
    ape = np.abs(pred[nonzero] - y[nonzero]) / np.abs(y[nonzero]) * 100
    out = {
        "n": int(len(y)),
        "mape": float(ape.mean()) if len(ape) else float("nan"),
        "median_ape": float(np.median(ape)) if len(ape) else float("nan"),
        "mae": float(np.abs(pred - y).mean()),
    }
    if relative and (y > 0).all() and (pred > 0).all():
        out["rmse_log10"] = float(np.sqrt(np.mean((np.log10(pred) - np.log10(y)) ** 2)))
    if len(y) > 1 and np.ptp(y) > 0:
        out["r2"] = float(1 - ((y - pred) ** 2).sum() / ((y - y.mean()) ** 2).sum())
    if len(y) > 2 and np.ptp(y) > 0 and np.ptp(pred) > 0:
        out["spearman"] = float(stats.spearmanr(y, pred).statistic)
        out["kendall"] = float(stats.kendalltau(y, pred).statistic)
    if low is not None and high is not None:
        low, high = np.asarray(low, float), np.asarray(high, float)
        out["coverage"] = float(((y >= low) & (y <= high)).mean())
        out["interval_width"] = float(np.median((high - low) / pred if relative else high - low))
    return out


def classification(y: np.ndarray, probability: np.ndarray, threshold: float = 0.5) -> dict:
    """Ranking (ROC AUC, where both outcomes occur), accuracy at ``threshold``, the Brier score, and
    the observed and predicted rates of the event."""
    y, p = np.asarray(y, float), np.asarray(probability, float)
    out = {
        "n": int(len(y)),
        "accuracy": float(((p >= threshold) == (y == 1)).mean()),
        "brier": float(((p - y) ** 2).mean()),
        "rate": float(y.mean()),
        "predicted_rate": float(p.mean()),
    }
    if 0 < y.sum() < len(y):
        from sklearn.metrics import roc_auc_score

        out["auc"] = float(roc_auc_score(y, p))
    return out
