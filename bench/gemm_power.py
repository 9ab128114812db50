"""GEMM power from the spec sheet's TDP and the achieved utilisation (models/tools/power.py).

    PREFLIGHT_DATASETS=../shared/datasets .venv/bin/python bench/gemm_power.py [--datasets PATH]

What GPPerf's ``power_w`` is: GPPerf's script (cutlass-analysis/experiment_data.sh) runs the CUTLASS
profiler (3 warm-up + 10 timed launches), then Nsight Compute, and only then starts ``nvidia-smi -l 1``
and keeps its first line: one board-power sample (a 1 s average on Ada) taken after the GEMM ended.
It reads the idle board (~30 W of 200 W) unless something else kept the GPU busy at that moment,
which the same line's ``gpu_util_pct`` tells: busy samples cluster in the sweep's first shape and its
last hours, where the same kernels ran twice as long as before (another workload shared the GPU).
``energy_j`` is that sample times the runtime.

Figures: (a) the RTX 4070 left out: physics-prior power of its large GEMMs, with the measured
runtime's utilisation (an oracle for u) and with the roofline-only u = 1, median APE and coverage of
the prior's interval; (b) the shape fitted on RTX 4070 power, 5 folds grouped by (m,n,k) shape;
(c) the project's own sweeps (the H100's 322 and the H200's 155 GEMMs with the power of a settled 1 s
window).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd
from preflight.data import sources
from preflight.data.catalogue import Catalogue
from preflight.data.settings import Settings
from preflight.data.sources import local_gemm
from preflight.features.gemm import gemm_on_device
from preflight.models.core.datasets import load_source
from preflight.models.tools import power
from sklearn.model_selection import GroupKFold

#: Large GEMMs: >= 2^38 flops, >= 9.4 ms at the RTX 4070's fp32 peak (26-166 ms measured): the sweep's
#: three largest shapes, the nearest it comes to large GEMMs back to back filling a 1 s power window.
LARGE_FLOPS = 2.0**38
#: The power sample saw the GPU busy: nvidia-smi's utilisation over its last period, in percent.
BUSY_PCT = 50
FOLDS = 5


def _frame(rows: pd.DataFrame, catalogue: Catalogue, power_w: pd.Series) -> pd.DataFrame:
    """Rows with power: utilisation from the roofline, TDP and device kind from the spec sheet."""
    features = gemm_on_device(rows, catalogue)
    frame = pd.DataFrame(
        {
            "shape": features.meta["shape"],
            "kind": [catalogue.resolve(d).kind for d in rows["device"]],
            "flops": 2 * rows["m"] * rows["n"] * rows["k"],
            "u": power.utilisation(features.reference["runtime_ms"], rows["runtime_ms"]),
            "tdp_w": features.reference["power_w"],  # the reference scale of power is the TDP
            "power_w": power_w,
        }
    )
    return frame[frame["power_w"].notna()]


def _gpperf(path: Path, catalogue: Catalogue) -> pd.DataFrame:
    loaded = sources.load("gpperf", path)  # leaves the published power out: it is read raw here
    raw = pd.read_csv(path, usecols=["gpu_util_pct", "power_w"]).drop(index=loaded.rejects["row"])
    raw = raw.reset_index(drop=True)
    frame = _frame(loaded.rows, catalogue, pd.to_numeric(raw["power_w"], errors="coerce"))
    return frame.assign(busy=raw["gpu_util_pct"][frame.index] >= BUSY_PCT)


def _ape(measured: pd.Series, predicted: np.ndarray) -> np.ndarray:
    return 100 * np.abs(predicted - measured.to_numpy()) / measured.to_numpy()


def _prior_scores(frame: pd.DataFrame, u: np.ndarray) -> tuple[float, float]:
    """Median APE of the prior's power and coverage of its interval, at utilisation ``u``."""
    (kind,) = frame["kind"].unique()
    predicted = power.power_w(power.shape_for(kind), u, frame["tdp_w"])
    low, high = power.prior_interval(kind, u, frame["tdp_w"])
    covered = (frame["power_w"] >= low) & (frame["power_w"] <= high)
    return float(np.median(_ape(frame["power_w"], predicted))), float(covered.mean())


def _held_out_line(name: str, frame: pd.DataFrame) -> str:
    oracle = _prior_scores(frame, frame["u"].to_numpy())
    roofline = _prior_scores(frame, np.ones(len(frame)))
    return (
        f"    {name:<26}{len(frame):>6}{frame['u'].median():>8.2f}{frame['power_w'].median():>8.1f}"
        f"{oracle[0]:>12.1f}%{oracle[1]:>7.2f}{roofline[0]:>11.1f}%{roofline[1]:>7.2f}"
    )


def held_out(frame: pd.DataFrame) -> list[str]:
    """(a) The physics prior alone on a GPU whose power it never saw."""
    kind = frame["kind"].iloc[0]
    prior, (low, high) = power.PHYSICS_PRIOR[kind], power.PRIOR_INTERVAL[kind]
    large = frame["flops"] >= LARGE_FLOPS
    subsets = {
        "large (flops >= 2^38)": frame[large],
        "  large, busy at sample": frame[large & frame["busy"]],
        "  large, idle at sample": frame[large & ~frame["busy"]],
        "all rows with power": frame,
    }
    return [
        f"(a) held out, {kind} prior: static {prior.static_fraction:.2f} "
        f"[{low.static_fraction:.2f}, {high.static_fraction:.2f}], exponent {prior.exponent:.2f} "
        f"[{high.exponent:.2f}, {low.exponent:.2f}]",
        f"    {'rows':<26}{'n':>6}{'u':>8}{'P (W)':>8}{'oracle-u APE':>13}{'cover':>7}"
        f"{'u=1 APE':>12}{'cover':>7}",
        *(_held_out_line(name, subset) for name, subset in subsets.items()),
    ]


def _fit_line(name: str, frame: pd.DataFrame) -> str:
    """Shape fitted on all of ``frame``; median APE of shapes fitted without each (m,n,k) shape."""
    predicted = np.empty(len(frame))
    for train, test in GroupKFold(FOLDS).split(frame, groups=frame["shape"]):
        part = frame.iloc[train]
        shape = power.fit_shape(part["u"], part["power_w"], part["tdp_w"])
        predicted[test] = power.power_w(shape, frame["u"].iloc[test], frame["tdp_w"].iloc[test])
    ape = _ape(frame["power_w"], predicted)
    large = (frame["flops"] >= LARGE_FLOPS).to_numpy()
    whole = power.fit_shape(frame["u"], frame["power_w"], frame["tdp_w"])
    return (
        f"    {name} ({len(frame)}): fitted static {whole.static_fraction:.3f}, exponent "
        f"{whole.exponent:.2f}; median APE on left-out shapes {np.median(ape):.1f}% "
        f"(large {np.median(ape[large]):.1f}%)"
    )


def in_sample(frame: pd.DataFrame) -> list[str]:
    """(b) The shape fitted on the device's own power, scored on (m,n,k) shapes left out."""
    return [
        f"(b) in sample: shape fitted on RTX 4070 power, {FOLDS} folds grouped by (m,n,k) shape",
        _fit_line("all rows with power", frame),
        _fit_line("busy at sample", frame[frame["busy"]]),
    ]


def local_sweeps(catalogue: Catalogue) -> list[str]:
    """(c) The project's own sweeps (``data/local/gemm``), per device that measured power with a TDP:
    the prior, and a shape fitted on the device's own power with (m,n,k) shapes left out. Each GPU's is
    NVML's energy counter over a settled 1 s window of back-to-back runs of each GEMM."""
    rows, _ = load_source("local-gemm", local_gemm.SHIPPED, Settings(), catalogue, store=False)
    frame = _frame(rows, catalogue, rows["power_w"]).assign(device=rows["device"])
    lines = []
    for device in sorted(rows["device"].unique()):
        part = frame[(frame["device"] == device) & frame["tdp_w"].notna()]
        head = f"(c) local sweep {device}: {len(part)} rows with power_w and a TDP"
        if part.empty:
            lines.append(f"{head}. No power figure.")
            continue
        oracle, roofline = _prior_scores(part, part["u"].to_numpy()), _prior_scores(part, np.ones(len(part)))
        lines += [
            f"{head} (median {part['power_w'].median():.0f} W, u {part['u'].median():.2f}); "
            f"{part['kind'].iloc[0]} prior median APE {oracle[0]:.1f}% (coverage {oracle[1]:.2f}), "
            f"u=1 {roofline[0]:.1f}% ({roofline[1]:.2f})",
            _fit_line("fitted on its own power", part),
        ]
    return lines


def describe(frame: pd.DataFrame) -> list[str]:
    """What the power column holds: the sample's board state, idle or busy."""
    idle, busy = frame.loc[~frame["busy"], "power_w"], frame.loc[frame["busy"], "power_w"]
    return [
        f"GPPerf RTX 4070 (TDP {frame['tdp_w'].iloc[0]:.0f} W): {len(frame)} rows with power; sample saw "
        f"the GPU idle in {len(idle)} (median {idle.median():.1f} W), busy (gpu_util_pct >= {BUSY_PCT}) "
        f"in {len(busy)} (median {busy.median():.1f} W)"
    ]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--datasets", type=Path, default=os.environ.get("PREFLIGHT_DATASETS"))
    args = parser.parse_args()
    path = sources.default_path("gpperf", args.datasets)
    if path is None:
        raise SystemExit("gpperf: file not found; set PREFLIGHT_DATASETS or pass --datasets")
    start = time.perf_counter()
    catalogue = Catalogue.load()
    frame = _gpperf(path, catalogue)
    for line in [*describe(frame), *held_out(frame), *in_sample(frame), *local_sweeps(catalogue)]:
        print(line, flush=True)
    print(f"took {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
