"""Small MARLA-layout data made by the tests: a features CSV and the PCM traces beside it, with
slowdowns that follow the neighbours (seeded), so a model has something to learn."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from preflight.data.interference import CORE_METRICS, CORES, SYSTEM_METRICS

NAMES = {
    "Baseline0": {},
    "1_iBench_CPU_pod": {"cpu": 1},
    "2_iBench_CPU_pods": {"cpu": 2},
    "1_stress-ng_l3_pod": {"l3": 1},
    "2_stress-ng_l3_pods": {"l3": 2},
    "1_iBench_memBW_pod": {"membw": 1},
    "1_CPU_1_L3": {"cpu": 1, "l3": 1},
    "1_CPU_1_MemBW": {"cpu": 1, "membw": 1},
}
EFFECT = {"cpu": 0.35, "l3": 0.25, "membw": 0.12}
STEPS = 8


def write_marla(folder: Path, seed: int = 0, sessions: tuple[str, ...] = ("NodeA_V01", "NodeB_V01")) -> Path:
    """``marla_nginx_pcm_features.csv`` plus ``marla_pcm_traces/`` under ``folder``; returns the CSV."""
    rng = np.random.default_rng(seed)
    rows = []
    for host_effect, session in enumerate(sessions):
        for replicas in (1, 2):
            for rps in (500, 1000, 2000):
                for name, counts in NAMES.items():
                    pressure = sum(EFFECT[k] * n for k, n in counts.items()) * (1 + 0.3 * host_effect)
                    norm_perf = 1.0 if not counts else float(np.exp(-pressure * rps / 1000 / replicas))
                    norm_perf *= 1.0 if not counts else float(np.exp(rng.normal(0, 0.03)))
                    test_id = f"{replicas}replicas_scenario{len(rows) % 97}_{rps}rps"
                    rows.append(_row(session, test_id, replicas, rps, name, norm_perf))
                    _write_traces(folder / "marla_pcm_traces" / session, test_id, counts, rng)
    path = folder / "marla_nginx_pcm_features.csv"
    folder.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def _row(session: str, test_id: str, replicas: int, rps: int, name: str, norm_perf: float) -> dict:
    p99 = 0.15 / norm_perf
    row = {"Test_ID": test_id, "Replicas": replicas, "Interference_Name": name, "Given_RPS": rps,
           "FolderID": session, "P99_Latency": p99, "norm_perf": norm_perf}  # fmt: skip
    for core in range(CORES):
        row |= {f"mean_Core{core}_IPC": 0.9 * norm_perf, f"mean_Core{core}_L3MISS": 0.05 / norm_perf}
    return row


def _write_traces(folder: Path, test_id: str, counts: dict[str, int], rng: np.random.Generator) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    base = {"IPC": 0.9 - 0.1 * counts.get("cpu", 0), "L3MISS": 0.05 + 0.3 * counts.get("l3", 0),
            "L2MISS": 0.2, "C0res%": 5 + 40 * counts.get("cpu", 0), "C1res%": 90.0,
            "READ": 0.5 + 2 * counts.get("membw", 0), "WRITE": 0.1}  # fmt: skip
    noise = lambda: rng.normal(1, 0.05, STEPS)  # noqa: E731
    core = {f"Core{c} (Socket 0) - {m}": base[m] * noise() for c in range(CORES) for m in CORE_METRICS}
    system = {f"System - {m}": base[m] * noise() for m in SYSTEM_METRICS}
    stamps = {"System - Date": "2025-07-10", "System - Time": clock(STEPS, 5)}
    pd.DataFrame({**stamps, **core}).to_csv(folder / f"pcm_core_{test_id}.csv", index=False)
    pd.DataFrame({**stamps, **system}).to_csv(folder / f"pcm_system_{test_id}.csv", index=False)


def clock(samples: int, every_seconds: int) -> list[str]:
    """PCM's ``System - Time`` column: ``HH:MM:SS.mmm`` from 20:00:00."""
    return [f"20:{t // 60:02d}:{t % 60:02d}.000" for t in range(0, samples * every_seconds, every_seconds)]
