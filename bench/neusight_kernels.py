"""NeuSight kernels (bmm, linear) on GPUs absent from training, by hardware generation.

    PREFLIGHT_DATASETS=../shared/datasets .venv/bin/python bench/neusight_kernels.py [--only NAME ...]

Scenarios: the unseen A100 80GB from the five training GPUs (NeuSight's own protocol); leave the
newest generation out (A100 40GB from Pascal, Volta and Turing; V100 from Pascal); AMD MI100/MI210
from the NVIDIA GPUs. Each prints MAPE by operator for the model, the plain roofline (time = max of
work / peak and traffic / bandwidth, the spec sheet alone) and the roofline with one fitted
efficiency (the task's baseline family), and the coverage of the 0.9 interval per unseen GPU.
Writes bench/out/neusight_kernels.json.
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

TASK = get_task("gemm")
SETTINGS = Settings()
OUT = Path(__file__).parent / "out" / "neusight_kernels.json"
PASCAL = ["Tesla P4", "Tesla P100-PCIE-16GB"]
TRAINING_GPUS = [*PASCAL, "Tesla V100-PCIE-32GB", "Tesla T4", "NVIDIA A100-PCIE-40GB"]


def _file(name: str) -> pd.DataFrame:
    if SETTINGS.datasets is None or not (SETTINGS.datasets / "gemm/neusight" / name).is_file():
        raise SystemExit("NeuSight files not found; set PREFLIGHT_DATASETS to the datasets folder")
    return sources.load("neusight", SETTINGS.datasets / "gemm/neusight" / name).rows


def _scenario(train: pd.DataFrame, test: pd.DataFrame, catalogue: Catalogue) -> dict:
    outcome = evaluate.train_test(TASK, train, test, catalogue, "tree", "shape")
    y = outcome.y["runtime_ms"].to_numpy()
    plain = TASK.featurize(TASK.rows(test), catalogue).reference["runtime_ms"].to_numpy()[outcome.test_index]
    rows = TASK.rows(test).iloc[outcome.test_index].reset_index(drop=True)
    estimates = {"model": outcome.model, "fitted roofline": outcome.baseline}
    result: dict = {}
    for (device, op), part in rows.groupby(["device", "kernel"]):
        at = part.index.to_numpy()
        entry = {"n": len(at), "plain roofline": _mape(plain[at], y[at])}
        for name, est in estimates.items():
            entry[name] = _mape(est.value["runtime_ms"].to_numpy()[at], y[at])
        low, high = (getattr(outcome.model, side)["runtime_ms"].to_numpy()[at] for side in ("low", "high"))
        entry["coverage"] = float(np.mean((y[at] >= low) & (y[at] <= high)))
        result[f"{device} / {op}"] = entry
    return result


def _mape(estimate: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean(np.abs(estimate - y) / y) * 100)


def scenarios(train: pd.DataFrame, test: pd.DataFrame, amd: pd.DataFrame | None) -> dict:
    both = pd.concat([train, test], ignore_index=True)
    plans = {
        "A100 80GB (never in training) from the five GPUs": (
            train,
            test[test.device == "NVIDIA A100 80GB PCIe"],
        ),
        "A100 40GB from Pascal, Volta, Turing": (
            both[both.device.isin(TRAINING_GPUS[:4])],
            both[both.device == "NVIDIA A100-PCIE-40GB"],
        ),
        "V100 from Pascal": (both[both.device.isin(PASCAL)], both[both.device == "Tesla V100-PCIE-32GB"]),
    }
    if amd is not None:
        plans["AMD MI100, MI210 from the NVIDIA GPUs"] = (both, amd)
    return plans


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", nargs="*", help="substrings of scenario names to run")
    args = parser.parse_args()
    train, test = _file("gemm_train.csv"), _file("gemm_test.csv")
    amd = _file("amd_gemm.csv")
    results = {}
    for name, (tr, te) in scenarios(train, test, amd).items():
        if args.only and not any(o in name for o in args.only):
            continue
        start = time.perf_counter()
        results[name] = _scenario(tr, te, Catalogue.load(SETTINGS.devices_file))
        print(f"\n{name}  ({len(tr)} train rows, {len(te)} test rows, {time.perf_counter() - start:.0f} s)")
        print(
            f"  {'device / op':42s} {'n':>6s} {'model':>7s} {'plain roof':>10s} {'fit roof':>9s} {'cov':>5s}"
        )
        for key, e in results[name].items():
            print(
                f"  {key:42s} {e['n']:6d} {e['model']:6.1f}% {e['plain roofline']:9.1f}% "
                f"{e['fitted roofline']:8.1f}% {e['coverage']:5.2f}"
            )
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
