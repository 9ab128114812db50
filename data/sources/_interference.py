"""The canonical interference table every interference source builds (``data/interference.py``)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
from preflight.data.interference import SOLO_METRICS, check_neighbours, parse_mix
from preflight.data.tables import RowChecks


def interference_frame(
    *,
    workload: pd.Series,
    host: pd.Series,
    session: pd.Series,
    mix: pd.Series,
    norm_perf: pd.Series,
    load_rps: pd.Series | float = np.nan,
    replicas: pd.Series | float = np.nan,
    solo: Mapping[str, pd.Series] | None = None,
    window: pd.Series | None = None,
) -> pd.DataFrame:
    """Canonical rows: ``mix`` holds the neighbours' mix label (``cpu=2,l3=1``); ``solo_*`` the
    workload's solo profile (NaN where a source lacks a metric); ``window`` the metric trace, if any."""
    frame = pd.DataFrame(
        {
            "workload": workload.to_numpy(),
            "host": host.to_numpy(),
            "session": session.to_numpy(),
            "mix": mix.to_numpy(),
            "load_rps": np.asarray(load_rps, dtype=float) * np.ones(len(workload)),
            "replicas": np.asarray(replicas, dtype=float) * np.ones(len(workload)),
            "norm_perf": np.asarray(norm_perf, dtype=float),
        }
    )
    for metric in SOLO_METRICS:
        values = (solo or {}).get(metric)
        frame[f"solo_{metric}"] = np.nan if values is None else np.asarray(values, dtype=float)
    frame["window"] = None if window is None else window.to_numpy()
    return frame


def check_interference(rows: pd.DataFrame, checks: RowChecks) -> None:
    """Reject rows without a positive ``norm_perf`` or whose mix names an unknown kind."""
    norm_perf = rows["norm_perf"].to_numpy(dtype=float)
    checks.reject(~(np.isfinite(norm_perf) & (norm_perf > 0)), "norm_perf missing, infinite or not positive")
    checks.reject(~rows["mix"].map(_valid_mix), "mix names an unknown kind or a bad count")


def _valid_mix(label: object) -> bool:
    try:
        check_neighbours(parse_mix(str(label)))
    except ValueError:
        return False
    return True
