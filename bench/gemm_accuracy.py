"""GEMM accuracy figures for docs/BENCHMARKS.md, each on a split grouped by what a user brings new.

    PREFLIGHT_DATASETS=../shared/datasets .venv/bin/python bench/gemm_accuracy.py [--only NAME ...]

Figures: GPPerf runtime MAPE grouped by (m,n,k) shape; DeepBench runtime
median APE leaving one device out (zero-shot from the spec sheet) and with 10 shots of it; GPPerf's
RTX 4070 zero-shot from DeepBench's devices; UCI
SGEMM MAPE grouped by kernel-configuration family beside the run-to-run noise floor; the target
transform comparison (log vs log-ratio to the roofline); interval coverage at 0.9 for each.
Writes bench/out/gemm_accuracy.json and prints a table.
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
from preflight.models.core.datasets import load_source
from preflight.models.core.task import get_task
from preflight.models.presentation import analysis

TASK = get_task("gemm")
SETTINGS = Settings()
CATALOGUE = Catalogue.load(SETTINGS.devices_file)
OUT = Path(__file__).parent / "out" / "gemm_accuracy.json"


def _rows(source: str) -> pd.DataFrame:
    """A public source's rows (devices that travel with a file are added to the catalogue)."""
    path = sources.default_path(source, SETTINGS.datasets)
    if path is None:
        raise SystemExit(f"{source}: file not found; set PREFLIGHT_DATASETS to the datasets folder")
    return load_source(source, path, SETTINGS, CATALOGUE)[0]


def _summary(report: dict, by_group: bool) -> dict:
    def pick(metrics: dict) -> dict:
        return {t: (m["mean"] if by_group else m) for t, m in metrics.items()}

    return {
        "model": pick(report["metrics"]),
        "baseline": pick(report["baseline"]["metrics"]),
        "per_group": report["metrics"] if by_group else None,
        "n_test": report["n_test"],
    }


def gpperf(catalogue: Catalogue) -> dict:
    evaluation = analysis.cross_validated(
        TASK, TASK.rows(_rows("gpperf")), catalogue, "tree", "shape", "gpperf"
    )
    return _summary(evaluation.summary(), by_group=False)


def deepbench_zero_shot(catalogue: Catalogue, params: dict | None = None) -> dict:
    rows = TASK.rows(_rows("deepbench"))
    evaluation = analysis.cross_validated(TASK, rows, catalogue, "tree", "device", "deepbench", params=params)
    return _summary(evaluation.summary(by_group=True), by_group=True)


def deepbench_shots(catalogue: Catalogue, shots: int = 10) -> dict:
    """For each device in turn: train on the others, give `shots` of its rows, test on the rest."""
    rows = _rows("deepbench")
    per_device, baseline = {}, {}
    for device in sorted(rows["device"].unique()):
        held = (rows["device"] == device).to_numpy()
        evaluation = analysis.train_tested(
            TASK, rows[~held], rows[held], catalogue, "tree", "device", "deepbench", shots=shots
        )
        report = evaluation.summary(by_group=True)
        (key,) = [k for k in report["metrics"]["runtime_ms"] if k != "mean"]
        per_device[key] = report["metrics"]["runtime_ms"][key]
        baseline[key] = report["baseline"]["metrics"]["runtime_ms"][key]
    mean = {
        k: float(np.mean([m[k] for m in per_device.values()])) for k in ("median_ape", "mape", "coverage")
    }
    base = {k: float(np.mean([m[k] for m in baseline.values()])) for k in ("median_ape", "mape", "coverage")}
    return {"model": {"runtime_ms": mean}, "baseline": {"runtime_ms": base}, "per_group": per_device}


def rtx4070_zero_shot(catalogue: Catalogue) -> dict:
    """GPPerf's RTX 4070 (Ada, 2023: newer than every DeepBench device) from DeepBench's devices alone."""
    evaluation = analysis.train_tested(
        TASK, _rows("deepbench"), _rows("gpperf"), catalogue, "tree", "shape", "deepbench->gpperf"
    )
    return _summary(evaluation.summary(), by_group=False)


def uci(catalogue: Catalogue) -> dict:
    rows = _rows("uci-sgemm")
    evaluation = analysis.cross_validated(TASK, TASK.rows(rows), catalogue, "tree", "kernel", "uci-sgemm")
    result = _summary(evaluation.summary(), by_group=False)
    result["noise_floor_ape_pct"] = float(rows["repeat_ape_pct"].mean())
    return result


def transforms(catalogue: Catalogue) -> dict:
    """The target transform that generalises to a new device, measured leave-one-device-out."""
    return {
        name: deepbench_zero_shot(catalogue, {"relative": relative})["model"]
        for name, relative in (("log", False), ("log_ratio", True))
    }


FIGURES = {
    "gpperf": gpperf,
    "deepbench": deepbench_zero_shot,
    "deepbench-10-shot": deepbench_shots,
    "rtx4070-zero-shot": rtx4070_zero_shot,
    "uci": uci,
    "transform": transforms,
}


def _line(name: str, result: dict) -> str:
    if name == "transform":
        return "  ".join(
            f"{t}: median APE {r['runtime_ms']['median_ape']:.1f}%"
            for t, r in result.items()
            if t != "seconds"
        )
    parts = []
    for target, m in result["model"].items():
        base = result["baseline"].get(target, {})
        parts.append(
            f"{target}: MAPE {m['mape']:.1f}% median APE {m['median_ape']:.1f}% coverage "
            f"{m.get('coverage', float('nan')):.2f} "
            f"(roofline median APE {base.get('median_ape', float('nan')):.1f}%)"
        )
    if "noise_floor_ape_pct" in result:
        parts.append(f"noise floor {result['noise_floor_ape_pct']:.2f}%")
    return "\n    ".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", nargs="*", choices=list(FIGURES), default=list(FIGURES))
    args = parser.parse_args()
    catalogue = CATALOGUE
    results = json.loads(OUT.read_text()) if OUT.exists() else {}
    for name in args.only:
        start = time.perf_counter()
        results[name] = FIGURES[name](catalogue) | {"seconds": round(time.perf_counter() - start, 1)}
        print(f"{name} ({results[name]['seconds']} s)\n    {_line(name, results[name])}", flush=True)
        OUT.parent.mkdir(parents=True, exist_ok=True)
        OUT.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
