"""Co-location interference: the kinds of neighbour, the canonical table, and the items the API takes.

A row is one run of a *workload* (nginx at a load, a micro-benchmark) next to *neighbours*, a
multiset of kinds with counts (``{"cpu": 2, "l3": 1}``); ``norm_perf`` is its performance with the
neighbours over its performance alone (1.0: no slowdown; below 1: slowed). The workload's *solo
profile* (``solo_*`` columns: its metrics measured alone) is what a scheduler knows of it before
placing it. A row may also carry ``window``: the metric time series measured during the run
(``[time][channel]`` in ``TRACE_CHANNELS`` order), the input of the black-box sequence model.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictFloat, StrictInt, field_validator

#: Neighbour kinds, with what each stands for in the sources.
KINDS: dict[str, str] = {
    "cpu": "a CPU-bound co-runner (iBench CPU, stress-ng --cpu, the collector's spin)",
    "l3": "a last-level-cache thrasher (stress-ng --l3, the collector's random walk over the LLC)",
    "membw": "a memory-bandwidth streamer (iBench memBW, stress-ng --stream, the collector's copy)",
    "io": "a disk writer (stress-ng --hdd, the collector's write-and-fsync loop)",
    "web_serving": "CloudSuite web serving (CloudProphet)",
    "media_streaming": "CloudSuite media streaming (CloudProphet)",
    "inmem_analytics": "CloudSuite in-memory analytics (CloudProphet)",
    "data_serving": "CloudSuite data serving (CloudProphet)",
    "redis": "Redis (CloudProphet)",
}

#: A workload's solo profile: metrics measured while it runs alone, each optional.
SOLO_METRICS: dict[str, str] = {
    "ipc": "instructions per cycle (mean over the cores it ran on)",
    "l3_miss": "L3 misses per sample interval, millions (PCM's L3MISS)",
    "l2_miss": "L2 misses per sample interval, millions (PCM's L2MISS)",
    "c0_residency": "percent of time its cores were active (C0)",
    "cpu_util": "CPU time over wall time, in cores",
    "p99_ms": "99th-percentile request latency alone, ms",
    "ops_per_s": "work units per second alone",
}

#: The channels of a metric window, in order: Intel PCM's per-core IPC, L3 and L2 misses (millions
#: per sample) and C0/C1 residency (%) for cores 0-7, then the system's IPC, L3/L2 misses and memory
#: read/write (GB per sample); one sample per ``SAMPLE_SECONDS``, at most ``WINDOW_STEPS`` of them.
CORE_METRICS = ("IPC", "L3MISS", "L2MISS", "C0res%", "C1res%")
SYSTEM_METRICS = ("IPC", "L3MISS", "L2MISS", "READ", "WRITE")
CORES = 8
#: Metrics that count events or bytes per sample (the others are rates and residencies).
COUNT_METRICS = ("L3MISS", "L2MISS", "READ", "WRITE")
SAMPLE_SECONDS = 5.0
#: Most recent samples a window holds: 3 minutes, the length of a MARLA run.
WINDOW_STEPS = 36
TRACE_CHANNELS: tuple[str, ...] = tuple(
    f"core{core}_{metric}" for core in range(CORES) for metric in CORE_METRICS
) + tuple(f"system_{metric}" for metric in SYSTEM_METRICS)

#: Most neighbours of one kind a host is asked about (a bound, not a model limit).
MAX_COUNT = 64.0
ALONE = "alone"


def mix_label(neighbours: Mapping[str, float]) -> str:
    """The canonical name of a multiset of neighbours (``cpu=2,l3=1``, kinds sorted); ``alone`` if empty."""
    present = {k: v for k, v in neighbours.items() if v > 0}
    return ",".join(f"{k}={v:g}" for k, v in sorted(present.items())) or ALONE


def parse_mix(label: str) -> dict[str, float]:
    """The neighbours a canonical mix label names (``mix_label``'s inverse)."""
    if label in ("", ALONE):
        return {}
    counts = {}
    for part in label.split(","):
        kind, equals, count = part.partition("=")
        if not equals:
            raise ValueError(f"a mix label lists kind=count pairs, not {part!r}")
        counts[kind] = float(count)
    return counts


def check_neighbours(neighbours: Mapping[str, float]) -> dict[str, float]:
    """Known kinds with finite counts in [0, MAX_COUNT], or a ValueError naming the first bad one."""
    for kind, count in neighbours.items():
        if kind not in KINDS:
            raise ValueError(f"unknown neighbour kind {kind!r}; known kinds: {', '.join(KINDS)}")
        if not (math.isfinite(count) and 0 <= count <= MAX_COUNT):
            raise ValueError(f"count of {kind!r} must be in [0, {MAX_COUNT:g}], got {count}")
    return dict(neighbours)


#: An API field of neighbours: kind -> count, each kind known and each count in bounds.
Neighbours = Annotated[dict[str, StrictFloat], AfterValidator(check_neighbours)]


class InterferenceItem(BaseModel):
    """A workload, its load and solo profile, and the neighbours it would run next to."""

    model_config = ConfigDict(extra="forbid")

    workload: str = Field(min_length=1, max_length=100, examples=["nginx"])
    host: str | None = Field(
        default=None, max_length=100, description="the node it would run on, if the model has seen it"
    )
    neighbours: Neighbours = Field(
        default_factory=dict,
        description="kind -> how many of that kind run beside it; kinds: " + ", ".join(KINDS),
        examples=[{"cpu": 1, "l3": 2}],
    )
    load_rps: StrictFloat | None = Field(
        default=None, gt=0, le=1e7, description="requests per second offered"
    )
    replicas: StrictInt | None = Field(default=None, ge=1, le=1024)
    solo: dict[str, StrictFloat] = Field(
        default_factory=dict,
        description="metrics measured alone; keys: " + ", ".join(SOLO_METRICS),
        examples=[{"p99_ms": 0.9, "ipc": 0.85}],
    )

    @field_validator("solo")
    @classmethod
    def _known_metrics(cls, value: dict[str, float]) -> dict[str, float]:
        for name, number in value.items():
            if name not in SOLO_METRICS:
                raise ValueError(f"unknown solo metric {name!r}; known: {', '.join(SOLO_METRICS)}")
            if not math.isfinite(number) or number < 0:
                raise ValueError(f"solo metric {name!r} must be finite and >= 0, got {number}")
        return value


class TraceItem(BaseModel):
    """A window of a host's metric time series while the workload runs: how slowed is it now?"""

    model_config = ConfigDict(extra="forbid")

    window: list[list[StrictFloat]] = Field(
        min_length=2,
        max_length=WINDOW_STEPS,
        description=f"[time][channel], oldest first, one sample per {SAMPLE_SECONDS:g} s, at most "
        f"{WINDOW_STEPS}; {len(TRACE_CHANNELS)} channels in this order: " + ", ".join(TRACE_CHANNELS),
    )
    load_rps: StrictFloat | None = Field(default=None, gt=0, le=1e7)
    replicas: StrictInt | None = Field(default=None, ge=1, le=1024)

    @field_validator("window")
    @classmethod
    def _shape(cls, value: list[list[float]]) -> list[list[float]]:
        for step, sample in enumerate(value):
            if len(sample) != len(TRACE_CHANNELS):
                raise ValueError(
                    f"sample {step} has {len(sample)} channels; a window needs {len(TRACE_CHANNELS)}"
                )
            if not all(math.isfinite(x) for x in sample):
                raise ValueError(f"sample {step} holds NaN or infinity; send only measured values")
        return value
