"""marla: nginx on Kubernetes next to interfering pods, with Intel PCM traces (MARLA, Georgakopoulos,
github georgakopoulosgeo/Interference_Thesis_NTUA; no licence: never shipped).

``marla_nginx_pcm_features.csv`` holds a row per run: nginx at ``Given_RPS`` requests/s with
``Replicas`` replicas on a node (``host``: the session folder's name without its version,
``TheGame_V03`` ran on ``TheGame``) next to the pods ``Interference_Name`` encodes (``2_iBench_CPU_pods``,
``1_CPU_2_L3``, ``Baseline0``...), and ``norm_perf`` = baseline p99 / measured p99. The solo profile of
a run is its session's baseline runs (``Baseline*`` of the same ``FolderID``, replicas and load;
else of its node's sessions, else of every session): p99 latency, and IPC, L2/L3 misses and C0
residency averaged over the cores. Each run's raw 5-second PCM series lie beside the file in
``marla_pcm_traces/<FolderID>/pcm_{core,system}_<Test_ID>.csv`` (every 5 s; the ``TheGame``
sessions every 2 s, put on the 5-second grid); a run whose traces are missing or hold fewer than two
samples has no ``window``.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
from preflight.data.interference import (
    CORE_METRICS,
    CORES,
    COUNT_METRICS,
    SAMPLE_SECONDS,
    SYSTEM_METRICS,
    WINDOW_STEPS,
    mix_label,
)
from preflight.data.sources._interference import check_interference, interference_frame
from preflight.data.tables import Loaded, RowChecks, file_sha256, numeric, read_csv

SOURCE = "marla"
FILE = "interference/marla_nginx_pcm_features.csv"
TRACES = "marla_pcm_traces"
REQUIRED = ["Test_ID", "Replicas", "Interference_Name", "Given_RPS", "FolderID", "P99_Latency", "norm_perf"]
#: Pod names in ``Interference_Name``: ``2_iBench_CPU_pods``, and short forms in mixes (``1_CPU_2_L3``).
_KIND_OF = {"ibench_cpu": "cpu", "cpu": "cpu", "stress-ng_l3": "l3", "l3": "l3", "ibench_membw": "membw",
            "membw": "membw"}  # fmt: skip
_TERM = re.compile(r"(\d+)_((?:iBench_|stress-ng_)?[A-Za-z0-9]+?)(?:_pods?)?(?=_\d|$)")
_CORE_COLUMNS = [f"Core{c} (Socket 0) - {m}" for c in range(CORES) for m in CORE_METRICS]
_SYSTEM_COLUMNS = [f"System - {m}" for m in SYSTEM_METRICS]
_CLOCK = ["System - Date", "System - Time"]
#: What follows the node's name in a session folder (``TheGame_MIX_V01``, ``Memento_V02_3_MixedScenarios``).
_SESSION_SUFFIX = r"_(?:MIX_)?V\d+.*$"


def parse_interference_name(name: str) -> dict[str, float] | None:
    """The neighbours a MARLA ``Interference_Name`` stands for (``{}`` for a baseline); None if unknown."""
    if re.fullmatch(r"Baseline\d*", name):
        return {}
    counts: dict[str, float] = {}
    position = 0
    for match in _TERM.finditer(name):
        kind = _KIND_OF.get(match.group(2).lower())
        if kind is None or match.start() != position:
            return None
        counts[kind] = counts.get(kind, 0.0) + float(match.group(1))
        position = match.end() + 1
    return counts if counts and position == len(name) + 1 else None


def load(path: Path) -> Loaded:
    path = Path(path)
    raw = read_csv(path, REQUIRED, SOURCE)
    parsed = raw["Interference_Name"].astype(str).map(parse_interference_name)
    host = raw["FolderID"].astype(str).str.replace(_SESSION_SUFFIX, "", regex=True)
    rows = interference_frame(
        workload=pd.Series("nginx", index=raw.index),
        host=host,
        session=raw["FolderID"].astype(str),
        mix=parsed.map(lambda n: mix_label(n) if n is not None else "unknown"),
        norm_perf=numeric(raw, "norm_perf"),
        load_rps=numeric(raw, "Given_RPS"),
        replicas=numeric(raw, "Replicas"),
        solo=_solo_profiles(raw, host, parsed.map(lambda n: n == {})),
        window=_windows(raw, path.parent / TRACES),
    )
    checks = RowChecks(len(rows))
    checks.reject(parsed.isna(), "Interference_Name names no known pods")
    check_interference(rows, checks)
    return checks.finish(SOURCE, rows, file_sha256(path), path)


def _core_mean(raw: pd.DataFrame, metric: str) -> pd.Series:
    """A summary metric averaged over the cores (NaN where the file lacks it)."""
    columns = [f"mean_Core{core}_{metric}" for core in range(CORES) if f"mean_Core{core}_{metric}" in raw]
    return (
        raw[columns].apply(pd.to_numeric, errors="coerce").mean(axis=1)
        if columns
        else pd.Series(np.nan, index=raw.index)
    )


def _solo_profiles(raw: pd.DataFrame, host: pd.Series, baseline: pd.Series) -> dict[str, pd.Series]:
    """Each run's session baseline at its replicas and load: the profile nginx shows alone."""
    metrics = pd.DataFrame(
        {
            "p99_ms": numeric(raw, "P99_Latency"),
            "ipc": _core_mean(raw, "IPC"),
            "l3_miss": _core_mean(raw, "L3MISS"),
            "l2_miss": _core_mean(raw, "L2MISS"),
            "c0_residency": _core_mean(raw, "C0res"),
        }
    )
    load = [numeric(raw, "Replicas"), numeric(raw, "Given_RPS")]
    alone = metrics[baseline.to_numpy()]
    profile = pd.DataFrame(np.nan, index=raw.index, columns=metrics.columns)
    for where in ([raw["FolderID"].astype(str)], [host], []):  # its session, else its node, else any
        keys = [*where, *load]
        means = alone.groupby([k[baseline] for k in keys]).mean()
        profile = profile.fillna(means.reindex(pd.MultiIndex.from_arrays(keys)).set_axis(raw.index))
    return {metric: profile[metric] for metric in metrics}


def _windows(raw: pd.DataFrame, traces: Path) -> pd.Series:
    """Each run's trace as ``[time][channel]`` (None where absent or unreadable)."""
    pairs = zip(raw["FolderID"].astype(str), raw["Test_ID"].astype(str))
    return pd.Series([_window(traces / folder, test) for folder, test in pairs], index=raw.index)


def _window(folder: Path, test_id: str) -> list[list[float]] | None:
    """The run's last ``WINDOW_STEPS`` 5-second samples whose channels were all measured."""
    core_file, system_file = folder / f"pcm_core_{test_id}.csv", folder / f"pcm_system_{test_id}.csv"
    if not (core_file.is_file() and system_file.is_file()):
        return None
    wanted = set(_CORE_COLUMNS + _SYSTEM_COLUMNS + _CLOCK)
    try:  # only the columns a window uses: a core file holds 130
        core, system = (pd.read_csv(file, usecols=wanted.__contains__) for file in (core_file, system_file))
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError):
        return None
    per_core = _resampled(core, _CORE_COLUMNS)
    per_system = _resampled(system, _SYSTEM_COLUMNS)
    if per_core is None or per_system is None:
        return None
    steps = min(len(per_core), len(per_system))
    values = np.concatenate([per_core[:steps], per_system[:steps]], axis=1)
    values = values[np.isfinite(values).all(axis=1)][-WINDOW_STEPS:]
    return values.tolist() if len(values) >= 2 else None


def _resampled(trace: pd.DataFrame, names: list[str]) -> np.ndarray | None:
    """Columns of a PCM trace on a 5-second grid (some sessions sampled every 2 s): rates and
    residencies averaged over each 5 s, counts as counts per 5 s."""
    if not {*names, *_CLOCK} <= set(trace.columns) or len(trace) < 2:
        return None
    stamp = trace["System - Date"].astype(str) + " " + trace["System - Time"].astype(str)
    seconds = pd.to_datetime(stamp, errors="coerce") - pd.to_datetime(stamp.iloc[0], errors="coerce")
    elapsed = seconds.dt.total_seconds().to_numpy()
    if np.isnan(elapsed).any():
        return None
    columns = trace[names]
    if not all(pd.api.types.is_numeric_dtype(dtype) for dtype in columns.dtypes):  # text among the numbers
        columns = columns.apply(pd.to_numeric, errors="coerce")
    values = columns.to_numpy(float, copy=True)
    counted = [name.rsplit(" - ", 1)[1] in COUNT_METRICS for name in names]
    values[:, counted] *= SAMPLE_SECONDS / float(np.median(np.diff(elapsed)))
    return pd.DataFrame(values).groupby(np.floor(elapsed / SAMPLE_SECONDS)).mean().to_numpy()
