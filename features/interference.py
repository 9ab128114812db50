"""Features of co-location interference (``data/interference.py``): what a scheduler knows before
placing a workload, and what a host's metric trace shows while it runs.

``before_placement`` is the pre-flight view: the workload's load (requests/s, replicas), its solo profile,
and its neighbours as counts per kind (plus their total and how many kinds), so a mix never seen is
a new point in a space the model has seen (``cpu=2,l3=1`` after ``cpu=2`` and ``l3=1``); slowdown
never lessens with more neighbours of a kind (monotone). ``trace`` is the black-box view: the
window itself (``Features.sequences``, count channels as log1p) for sequence models, and its
per-channel mean, standard deviation and 95th percentile for trees.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from preflight.data.catalogue import Catalogue
from preflight.data.interference import (
    COUNT_METRICS,
    KINDS,
    SOLO_METRICS,
    TRACE_CHANNELS,
    mix_label,
    parse_mix,
)
from preflight.features import Features, Sequences, numbers

#: Channels that count events or bytes: log1p, as their values span decades.
COUNT_CHANNELS = np.array([c.rsplit("_", 1)[1] in COUNT_METRICS for c in TRACE_CHANNELS])
META_COLUMNS = ("workload", "host", "session", "mix")


def canonical(rows: pd.DataFrame) -> pd.DataFrame:
    """API items as canonical rows: the ``neighbours`` dict as its ``mix`` label, ``solo`` as ``solo_*``."""
    rows = rows.copy()
    if "neighbours" in rows:
        rows["mix"] = rows.pop("neighbours").map(mix_label)
    if "solo" in rows:
        solo = pd.DataFrame(list(rows.pop("solo").map(lambda s: s or {})), index=rows.index)
        for metric in SOLO_METRICS:
            rows[f"solo_{metric}"] = solo.get(metric, np.nan)
    for column in META_COLUMNS:
        if column not in rows:
            rows[column] = ""
    return rows


def neighbour_counts(labels: pd.Series) -> pd.DataFrame:
    """``n_<kind>`` per kind, the total and the number of kinds present, from mix labels."""
    parsed = pd.DataFrame([parse_mix(str(label)) for label in labels], index=labels.index)
    counts = parsed.reindex(columns=list(KINDS)).fillna(0.0).astype(float)
    counts.columns = [f"n_{kind}" for kind in KINDS]
    counts["n_total"] = counts.sum(axis=1)
    counts["n_kinds"] = (counts[[f"n_{kind}" for kind in KINDS]] > 0).sum(axis=1).astype(float)
    return counts


def _meta(rows: pd.DataFrame) -> pd.DataFrame:
    meta = rows[list(META_COLUMNS)].fillna("").astype(str).reset_index(drop=True)
    meta["stratum"] = meta["host"]  # nodes differ in how noisy their slowdowns are
    return meta


def before_placement(rows: pd.DataFrame, catalogue: Catalogue) -> Features:
    """What is known before placement: load, solo profile, and the neighbours as counts per kind."""
    del catalogue  # hosts are named, not looked up: their character shows in the solo profile
    rows = canonical(rows)
    counts = neighbour_counts(rows["mix"])
    X = pd.concat(
        [
            pd.DataFrame(
                {"load_rps": numbers(rows, "load_rps"), "replicas": numbers(rows, "replicas")},
                index=rows.index,
            ),
            counts,
            pd.DataFrame({f"solo_{m}": numbers(rows, f"solo_{m}") for m in SOLO_METRICS}, index=rows.index),
        ],
        axis=1,
    ).reset_index(drop=True)
    falling = {column: -1 for column in counts.columns if column != "n_kinds"}
    return Features(
        X=X,
        reference=pd.DataFrame({"norm_perf": np.ones(len(X))}),  # learned as a change from running alone
        meta=_meta(rows),
        monotone={"norm_perf": falling},
    )


def windows(values: pd.Series) -> Sequences:
    """Windows of ``[time][channel]`` as padded sequences, count channels as log1p."""
    arrays = [
        np.asarray([list(step) for step in v], dtype=float) for v in values
    ]  # lists or parquet's arrays
    steps = max((len(a) for a in arrays), default=1)
    out = np.zeros((len(arrays), steps, len(TRACE_CHANNELS)), dtype=np.float32)
    mask = np.zeros((len(arrays), steps), dtype=bool)
    for i, a in enumerate(arrays):
        a = a.copy()
        a[:, COUNT_CHANNELS] = np.log1p(np.clip(a[:, COUNT_CHANNELS], 0, None))
        out[i, : len(a)], mask[i, : len(a)] = a, True
    return Sequences(out, mask)


def window_statistics(sequences: Sequences) -> pd.DataFrame:
    """Per channel: mean, standard deviation and 95th percentile over each window's measured steps."""
    values = np.where(sequences.mask[:, :, None], sequences.values, np.nan)
    stats = {"mean": np.nanmean(values, axis=1), "std": np.nanstd(values, axis=1)}
    stats["p95"] = np.nanpercentile(values, 95, axis=1)
    return pd.DataFrame(
        {f"{name}_{c}": stat[:, j] for name, stat in stats.items() for j, c in enumerate(TRACE_CHANNELS)}
    )


def trace(rows: pd.DataFrame, catalogue: Catalogue) -> Features:
    """What a host's metric window shows while the workload runs, with its load as context."""
    del catalogue
    rows = rows.reset_index(drop=True)
    sequences = windows(rows["window"])
    context = pd.DataFrame(
        {
            "ctx_load_rps": numbers(rows, "load_rps"),
            "ctx_replicas": numbers(rows, "replicas"),
            "ctx_steps": sequences.mask.sum(axis=1).astype(float),  # a window shorter than seen is flagged
        }
    )
    return Features(
        X=pd.concat([window_statistics(sequences), context], axis=1),
        reference=pd.DataFrame({"norm_perf": np.ones(len(rows))}),
        meta=_meta(canonical(rows)),
        sequences=sequences,
    )
