"""The padding law over the catalogue: a GEMM is never slower than a larger one that contains it.

    .venv/bin/python bench/padding_law.py [--slack 1.05]

The GEMM family as the embedded default trains it (every shipped source, no datasets), asked for one
dimension swept from 1 to 4096 with the other two at 4096, on every GPU of the catalogue in fp32, fp16
and bf16: a library could run the smaller GEMM padded to the larger one, so the smaller one's estimate
should never be above the larger one's. Per axis, how many device-dtypes break it by more than
``--slack``, and the worst ratio of a GEMM's estimate to the fastest estimate of any larger one.
Writes bench/out/padding_law.json.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
from preflight.data.catalogue import Catalogue
from preflight.data.settings import Settings
from preflight.models.core.datasets import available_sources, task_data
from preflight.models.core.predictor import Predictor
from preflight.models.core.task import get_task

GEMM = get_task("gemm")
OUT = Path(__file__).parent / "out" / "padding_law.json"
DTYPES = ("fp32", "fp16", "bf16")
SIZES = (1, 2, 4, 8, 16, 24, 32, 40, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 2048, 4096)
LARGE = 4096


def embedded_default() -> tuple[Predictor, Catalogue]:
    """The GEMM family trained as a fresh clone trains it."""
    catalogue, settings = Catalogue.load(), Settings(datasets=None)
    rows = task_data(GEMM, settings, catalogue, available_sources(GEMM, settings), store=False).rows
    features = GEMM.featurize(rows, catalogue)
    groups = GEMM.group_values(features.meta, GEMM.group_key)
    return Predictor(GEMM, GEMM.default_family).fit(features, GEMM.target_frame(rows), groups), catalogue


def sweep(predictor: Predictor, catalogue: Catalogue, axis: str) -> pd.DataFrame:
    """Per GPU and dtype, the worst estimate along ``axis`` over the fastest estimate of a larger GEMM."""
    gpus = [d.id for d in catalogue if d.kind == "gpu" and d.peak_tflops and d.memory_bandwidth_gbs]
    base = {"m": LARGE, "n": LARGE, "k": LARGE, "trans_a": False, "trans_b": False}
    items = pd.DataFrame(
        [{**base, "dtype": t, "device": d, axis: s} for d in gpus for t in DTYPES for s in SIZES]
    )
    features = GEMM.featurize(GEMM.rows(items), catalogue)
    items["ms"] = predictor.predict(features, 0.9).value["runtime_ms"].to_numpy()
    worst = []
    for (device, dtype), group in items.groupby(["device", "dtype"]):
        ordered = group.sort_values(axis)
        ms = ordered["ms"].to_numpy()
        fastest_larger = np.minimum.accumulate(ms[::-1])[::-1]
        at = int(np.argmax(ms / fastest_larger))
        worst.append(
            {
                "axis": axis,
                "device": device,
                "dtype": dtype,
                "worst": float(ms[at] / fastest_larger[at]),
                "at": int(ordered[axis].iloc[at]),
            }
        )
    return pd.DataFrame(worst)


def main() -> None:
    parser = argparse.ArgumentParser(description="the padding law over the catalogue's GPUs")
    parser.add_argument("--slack", type=float, default=1.05)
    args = parser.parse_args()
    start = time.perf_counter()
    predictor, catalogue = embedded_default()
    table = pd.concat([sweep(predictor, catalogue, axis) for axis in ("m", "n", "k")], ignore_index=True)
    print(f"trained and swept in {time.perf_counter() - start:.0f} s; slack {args.slack}")
    summary = table.groupby("axis").agg(
        device_dtypes=("worst", "size"),
        broken=("worst", lambda w: int((w > args.slack).sum())),
        over_1_5=("worst", lambda w: int((w > 1.5).sum())),
        median=("worst", "median"),
        worst=("worst", "max"),
    )
    print(summary.round(2).to_string())
    print(table.sort_values("worst").tail(8).round(2).to_string(index=False))
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps({"summary": summary.reset_index().to_dict("records")}, indent=2))


if __name__ == "__main__":
    main()
