r"""Serial against Ray on this machine: two tasks' grouped evaluations, two batch scorings, a collection.

    PREFLIGHT_DATASETS=../shared/datasets OMP_NUM_THREADS=1 .venv/bin/python bench/scale.py \
        [--gemm-rows 1000000] [--nas-settings 20] [--curve-runs 24] [--cpus 2] [--nodes 16] \
        [--cores-per-node 16] [--parts evaluation,scoring,collection]

* Evaluation: ``gemm`` on DeepBench by device (tree) and ``nas-latency`` on 20,000 rows of HELP
  NAS-Bench-201 by device (tree), each serially, then with ``RAY_ADDRESS`` on a local Ray cluster of
  ``--cpus`` CPUs (the answers checked equal to 1e-9).
* Scoring: ``--gemm-rows`` seeded GEMM items (``bench/score.py``'s) and all 15,625 NAS-Bench-201 cells
  on ``--nas-settings`` HELP device settings, from Parquet through ``preflight.score``, serially, then
  with Ray Data workers (one CPU each).
* Collection: ``--curve-runs`` learning curves (``collect curves``, 10 epochs each) trained serially,
  then by one Ray worker per CPU, the driver appending each run.
* Ray's own cost: its start, and the time per task of a fan-out of empty tasks.
* A paper estimate for ``--nodes`` nodes of ``--cores-per-node`` cores: each evaluation's serial time
  spread over its Ray tasks (the slowest task bounds it), and each scoring's rows at the measured rate
  of one Ray worker times the cluster's cores, plus the measured overheads. It assumes the data are
  on storage every node reads and no contention; it is arithmetic, not a measurement.

``OMP_NUM_THREADS=1`` gives the serial run one thread, as each Ray task has: the speed-up is then
that of the cores, not of thread pools. Champions are trained as a first start trains them (on the
data at hand) into a temporary home. Writes bench/out/scale.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import preflight
import ray
from preflight.data.collect import curves
from preflight.models.core import evaluate, parallel
from score import write_items

OUT = Path(__file__).parent / "out" / "scale.json"
NB201_ARCHS = "nas/nb201_index_to_arch_str.csv"
EVALUATIONS = {
    "gemm": {"source": "deepbench", "split": "device", "family": "tree"},
    "nas-latency": {"source": "help-nb201", "split": "device", "family": "tree", "max_rows": 20_000},
}
RAY = str(Path(sys.executable).with_name("ray"))


def timed(work, *args, **kwargs) -> tuple[Any, float]:
    began = time.perf_counter()
    result = work(*args, **kwargs)
    return result, time.perf_counter() - began


@contextmanager
def on_ray() -> Iterator[None]:
    """Work inside fans out to the local cluster (``ray start``), as ``--ray auto`` would."""
    os.environ["RAY_ADDRESS"] = "auto"
    try:
        yield
    finally:
        del os.environ["RAY_ADDRESS"]


def summary(task: str, home: Path, options: dict) -> dict:
    return preflight.evaluate(task, home=home, **options).summary()


def _nothing(i: int) -> int:
    return i


@contextmanager
def counting_folds(counted: list[int]) -> Iterator[None]:
    """Inside, each grouped evaluation's top-level fan-out (its outer folds: its Ray tasks) is counted."""
    fan_out = evaluate.fan_out

    def counting(function, calls, *args, **kwargs):
        counted.append(len(calls))
        return fan_out(function, calls, *args, **kwargs)

    evaluate.fan_out = counting
    try:
        yield
    finally:
        evaluate.fan_out = fan_out


def evaluations(home: Path) -> dict:
    """Each task's evaluation serially and on Ray: seconds, and whether the answers agree."""
    found = {}
    for task, options in EVALUATIONS.items():
        folds: list[int] = []
        with counting_folds(folds):
            serial, serial_s = timed(summary, task, home, options)
        with on_ray():
            spread, ray_s = timed(summary, task, home, options)
        found[task] = {
            "options": options,
            "ray_tasks": folds[0],
            "serial_s": round(serial_s, 2),
            "ray_s": round(ray_s, 2),
            "speedup": round(serial_s / ray_s, 2),
            "same_json": json.dumps(serial, sort_keys=True) == json.dumps(spread, sort_keys=True)
            or _close(serial, spread),
        }
    return found


def _close(a: object, b: object) -> bool:
    """Two summaries alike to 1e-9 (numbers), exactly elsewhere."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        return bool(np.isclose(a, b, rtol=1e-9, atol=1e-12, equal_nan=True))
    return a == b


def nas_items(path: Path, datasets: Path | None, settings: int, home: Path) -> int:
    """All NAS-Bench-201 cells on the first ``settings`` HELP device settings the champion learned."""
    table = pd.read_parquet(home / "tables" / "help-nb201.parquet")
    pairs = table[["device", "batch_size"]].drop_duplicates().head(settings)
    if datasets is not None and (datasets / NB201_ARCHS).exists():
        archs = pd.read_csv(datasets / NB201_ARCHS)["arch_str"].to_numpy()
    else:  # without the full index: the cells the extract holds
        archs = table["arch"].drop_duplicates().to_numpy()
    items = pd.DataFrame(
        {
            "space": "nb201",
            "arch": np.tile(archs, len(pairs)),
            "dataset": "cifar10",
            "device": np.repeat(pairs["device"].to_numpy(), len(archs)),
            "batch_size": np.repeat(pairs["batch_size"].to_numpy(dtype=int), len(archs)),
        }
    )
    items.to_parquet(path)
    return len(items)


def scorings(home: Path, work: Path, gemm_rows: int, nas_settings: int, datasets: Path | None) -> dict:
    """Each file scored serially and by Ray Data workers: rows, seconds and rows per second."""
    write_items(work / "gemm.parquet", gemm_rows)
    files = {"gemm": (work / "gemm.parquet", gemm_rows)}
    files["nas-latency"] = (
        work / "nas.parquet",
        nas_items(work / "nas.parquet", datasets, nas_settings, home),
    )
    found = {}
    for task, (path, rows) in files.items():
        serial = preflight.score(task, path, work / f"{task}-serial.parquet", home=home)
        with on_ray():
            spread = preflight.score(task, path, work / f"{task}-ray.parquet", home=home)
        found[task] = {
            "rows": rows,
            "serial_s": round(serial.seconds, 2),
            "ray_s": round(spread.seconds, 2),
            "serial_rows_per_s": round(rows / serial.seconds),
            "ray_rows_per_s": round(rows / spread.seconds),
            "speedup": round(serial.seconds / spread.seconds, 2),
        }
    return found


def collections(work: Path, runs: int, epochs: int = 10) -> dict:
    """``runs`` learning curves trained serially, then by Ray workers: seconds and runs per minute."""
    serial, serial_s = timed(
        curves.collect_curves, work / "serial.csv", runs=runs, epochs=epochs, progress=False
    )
    with on_ray():
        spread, ray_s = timed(
            curves.collect_curves, work / "ray.csv", runs=runs, epochs=epochs, progress=False
        )
    assert serial.trained == spread.trained == runs
    return {
        "runs": runs,
        "epochs": epochs,
        "serial_s": round(serial_s, 2),
        "ray_s": round(ray_s, 2),
        "speedup": round(serial_s / ray_s, 2),
    }


def overheads(tasks: int = 200) -> dict:
    """Ray's cost per task: a fan-out of empty tasks, per task."""
    with on_ray():
        parallel.fan_out(_nothing, [(0,)], "warm-up")
        _, seconds = timed(parallel.fan_out, _nothing, [(i,) for i in range(tasks)], "empty tasks")
    return {"empty_tasks": tasks, "per_task_ms": round(1000 * seconds / tasks, 2)}


def on_a_cluster(found: dict, nodes: int, cores: int, cpus: int) -> dict:
    """The paper estimate for ``nodes`` × ``cores`` (see the module's docstring): an evaluation's serial
    time over its Ray tasks (balanced folds; more cores than folds do not help), a scoring's rows at
    one local worker's rate times every core; each plus Ray's start and per-task cost."""
    per_task_s, start_s = found["overhead"]["per_task_ms"] / 1000, found["ray_start_s"]
    estimate: dict[str, float] = {}
    for task, measured in found.get("evaluation", {}).items():
        folds = measured["ray_tasks"]
        estimate[f"evaluate {task}"] = round(
            measured["serial_s"] / min(folds, nodes * cores) + per_task_s + start_s, 1
        )
    for task, measured in found.get("scoring", {}).items():
        per_worker = measured["ray_rows_per_s"] / cpus
        estimate[f"score {task}"] = round(measured["rows"] / (per_worker * nodes * cores) + start_s, 1)
    return {"nodes": nodes, "cores_per_node": cores, "seconds": estimate}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--gemm-rows", type=int, default=1_000_000)
    parser.add_argument("--nas-settings", type=int, default=20)
    parser.add_argument("--cpus", type=int, default=2)
    parser.add_argument("--nodes", type=int, default=16)
    parser.add_argument("--cores-per-node", type=int, default=16)
    parser.add_argument("--curve-runs", type=int, default=24)
    parser.add_argument(
        "--parts", default="evaluation,scoring,collection", help="comma-separated: what to measure"
    )
    args = parser.parse_args()
    datasets = Path(os.environ["PREFLIGHT_DATASETS"]) if os.environ.get("PREFLIGHT_DATASETS") else None
    with tempfile.TemporaryDirectory() as work:
        home = Path(work) / "home"
        for task in ("gemm", "nas-latency") if {"evaluation", "scoring"} & set(args.parts.split(",")) else ():
            preflight.train(task, home=home)  # on the data at hand, as a first start trains them
        _, start_s = timed(subprocess.run, [RAY, "start", "--head", f"--num-cpus={args.cpus}"], check=True)
        try:
            found = {"cpus": args.cpus, "ray_start_s": round(start_s, 2), "overhead": overheads()}
            if "evaluation" in args.parts:
                found["evaluation"] = evaluations(home)
            if "scoring" in args.parts:
                found["scoring"] = scorings(home, Path(work), args.gemm_rows, args.nas_settings, datasets)
            if "collection" in args.parts:
                found["collection"] = collections(Path(work), args.curve_runs)
        finally:
            ray.shutdown()  # this process leaves the cluster before it stops (a driver dies with it)
            subprocess.run([RAY, "stop"], check=False)
    found["cluster_estimate"] = on_a_cluster(found, args.nodes, args.cores_per_node, args.cpus)
    print(json.dumps(found, indent=2))
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps(found, indent=2) + "\n")


if __name__ == "__main__":
    main()
