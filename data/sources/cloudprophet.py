"""cloudprophet: CloudSuite apps and Redis sharing five cloud VMs (CloudProphet, github
esl-epfl/CloudProphet-Dataset; CC BY-SA 4.0: not shipped).

``cloudprophet_app_runs.csv`` holds a row per app run: ``app`` on ``vm`` (``host``) during the
ten-hour experiment ``exp`` (``session``), its ``perf_value`` in ``perf_metric`` and, per kind, the
seconds of other runs that overlapped it (``corun_overlap_s_<kind>``). The ``mix`` counts the average
number of co-running instances of each kind, overlap / ``duration_s`` rounded to 2 decimals.

``norm_perf`` is a proxy: CloudProphet has almost no solo runs (1 of 3,117), so a run is compared
with its app's best sustained performance in the file, ``perf_value`` / 95th percentile for
higher-is-better metrics and 5th percentile / ``perf_value`` for times (``*_ms``). Its co-runner
signal is weak (the dataset's README says so): the apps' variation is mostly not explained by their
neighbours. No solo profile, load or replicas.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from preflight.data.interference import mix_label
from preflight.data.sources._interference import check_interference, interference_frame
from preflight.data.tables import Loaded, RowChecks, file_sha256, numeric, read_csv

SOURCE = "cloudprophet"
FILE = "interference/cloudprophet_app_runs.csv"
KINDS = ("web_serving", "media_streaming", "inmem_analytics", "data_serving", "redis")
OVERLAPS = [f"corun_overlap_s_{kind}" for kind in KINDS]
REQUIRED = ["exp", "vm", "app", "duration_s", "perf_metric", "perf_value", *OVERLAPS]
#: Each app's metric: True where higher is better.
HIGHER_IS_BETTER = {
    "ycsb_runtime_ms": False,  # data_serving
    "exec_time_ms": False,  # inmem_analytics
    "request_rate_req_per_s": True,  # media_streaming
    "mean_requests_per_s": True,  # redis
    "faban_ops_per_sec": True,  # web_serving
}
#: Percentile taken as an app's best sustained performance (its mirror for times).
BEST = 0.95


def load(path: Path) -> Loaded:
    path = Path(path)
    raw = read_csv(path, REQUIRED, SOURCE)
    duration, value = numeric(raw, "duration_s"), numeric(raw, "perf_value")
    higher = raw["perf_metric"].map(HIGHER_IS_BETTER)
    counts = pd.DataFrame({k: numeric(raw, o) / duration for k, o in zip(KINDS, OVERLAPS)}).round(2)
    rows = interference_frame(
        workload=raw["app"].astype(str),
        host=raw["vm"].astype(str),
        session=raw["exp"].astype(str),
        mix=counts.apply(lambda r: mix_label(r.to_dict()), axis=1),
        norm_perf=_norm_perf(raw, value, higher, (value > 0) & (duration > 0) & higher.notna()),
    )
    checks = RowChecks(len(rows))
    checks.reject(~(value > 0), "perf_value missing or not positive")
    checks.reject(~(duration > 0), "duration_s not positive")
    checks.reject(higher.isna(), "perf_metric of unknown direction")
    checks.reject(counts.isna().any(axis=1), "co-runner overlap missing")
    check_interference(rows, checks)
    return checks.finish(SOURCE, rows, file_sha256(path), path)


def _norm_perf(raw: pd.DataFrame, value: pd.Series, higher: pd.Series, valid: pd.Series) -> pd.Series:
    """Performance over the app's best sustained (valid rows' 95th, or for times 5th, percentile)."""
    keys = [raw["app"].astype(str), raw["perf_metric"].astype(str)]
    groups = value[valid].groupby([k[valid] for k in keys])
    index = pd.MultiIndex.from_arrays(keys)
    best, fast = (groups.quantile(q).reindex(index).set_axis(raw.index) for q in (BEST, 1 - BEST))
    return (value / best).where(higher.eq(True), fast / value)  # unknown direction: NaN (no group)
