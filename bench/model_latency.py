"""Whole-model latency on a GPU absent from training: each GPU's traces (and so its kernels) left out.

    PREFLIGHT_DATASETS=../shared/datasets python bench/model_latency.py [--group G] [--with-elementwise]

NeuSight's traces (BERT-large, GPT-2 large, GPT-3 XL / 2.7B, OPT-1.3B; inference and training) on
nine GPUs. For each GPU: mean APE of the end-to-end latency over its traces for the kernel-sum model,
the fitted roofline (the task's baseline) and the plain roofline (summed kernel rooflines from the
spec sheet), and the coverage of the 0.9 interval. Folds are grouped (one group each while there are at
most 20 groups, else 5 folds). ``--group`` groups by another of the task's groups instead (``model``:
each model; ``model-device``: each model on each GPU), still reported per GPU. ``--with-elementwise``
trains on NeuSight's one-operator elementwise timings too, as ``preflight train model-latency`` does,
each in its device's group, and scores the traces alone. Writes bench/out/model_latency.json.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
from preflight.data import sources
from preflight.data.catalogue import Catalogue
from preflight.data.settings import Settings
from preflight.models.core import evaluate
from preflight.models.core.task import get_task

TASK = get_task("model-latency")
OUT = Path(__file__).parent / "out" / "model_latency.json"


def main() -> None:
    parser = argparse.ArgumentParser(description="whole-model latency on GPUs held out of training")
    parser.add_argument("--group", default="device", choices=sorted(TASK.groups))
    parser.add_argument("--with-elementwise", action="store_true")
    args = parser.parse_args()
    settings = Settings()
    path = sources.default_path("neusight-traces", settings.datasets)
    if path is None:
        raise SystemExit("no NeuSight traces found; set PREFLIGHT_DATASETS")
    start = time.perf_counter()
    traces = TASK.rows(sources.load("neusight-traces", path).rows)
    rows = pd.concat([traces, *_elementwise(settings, args.with_elementwise)], ignore_index=True)
    catalogue = Catalogue.load(settings.devices_file)
    outcome = evaluate.cross_validate(TASK, rows, catalogue, TASK.default_family, args.group)
    scored = outcome.test_index < len(traces)  # the traces, not the one-operator rows
    y = outcome.y["latency_ms"].to_numpy()[scored]
    tested = rows.iloc[outcome.test_index[scored]].reset_index(drop=True)
    plain = TASK.featurize(tested, catalogue).reference["latency_ms"].to_numpy()
    model, baseline = (e.value["latency_ms"].to_numpy()[scored] for e in (outcome.model, outcome.baseline))
    low, high = (getattr(outcome.model, side)["latency_ms"].to_numpy()[scored] for side in ("low", "high"))
    table = pd.DataFrame(
        {
            "device": tested["device"],
            "kernel-sum": np.abs(model - y) / y * 100,
            "fitted roofline": np.abs(baseline - y) / y * 100,
            "plain roofline": np.abs(plain - y) / y * 100,
            "coverage": (y >= low) & (y <= high),
        }
    )
    per_device = table.groupby("device").agg(
        n=("coverage", "size"), **{c: (c, "mean") for c in table.columns if c != "device"}
    )
    trained = " and the elementwise timings" if args.with_elementwise else ""
    print(
        f"{path}: {len(traces)} traces{trained}, folds by {args.group}, {time.perf_counter() - start:.0f} s"
    )
    print(per_device.round(2).to_string())
    print("mean over GPUs:", per_device.drop(columns="n").mean().round(2).to_dict())
    print("all traces:", table.drop(columns="device").mean().round(2).to_dict())
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps({"per_device": per_device.reset_index().to_dict("records")}, indent=2))


def _elementwise(settings: Settings, wanted: bool) -> list[pd.DataFrame]:
    """NeuSight's one-operator elementwise rows, if ``wanted``."""
    if not wanted:
        return []
    path = sources.default_path("neusight-elementwise", settings.datasets)
    if path is None:
        raise SystemExit("no NeuSight elementwise timings found; set PREFLIGHT_DATASETS")
    return [TASK.rows(sources.load("neusight-elementwise", path).rows)]


if __name__ == "__main__":
    main()
