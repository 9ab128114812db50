r"""Co-location interference figures for docs/BENCHMARKS.md (issue 13).

    PREFLIGHT_DATASETS=../shared/datasets .venv/bin/python bench/interference.py \
        [--trace-families tree,transformer] [--transformer-epochs 20] [--skip-trace]

Every estimate is out of fold, from predictors (calibration included) fitted without the row's
neighbour mix (``Interference_Name``; MARLA's 24 names are 22 mixes, the three baselines one
``alone`` mix), 5 grouped folds (``models/core/evaluate.py``). Then:

- ``preflight``: the ``interference`` task (load, solo profile, neighbour counts) with its tree and
  the linear baseline: ``norm_perf`` MAE over all rows and over co-located rows, 0.9 coverage.
- ``trace``: the ``interference-trace`` task (the run's PCM window) with the tree on window
  statistics and the sequence transformer, same folds.
- ``placement``: replay of a scheduler over MARLA: for each (session, replicas, load) every measured
  co-located mix is a candidate host; the model picks the host of highest predicted ``norm_perf``.
  Reported: how often it is the truly least-slowed one, the mean regret (best true ``norm_perf``
  minus the chosen host's), beside picking the host with the fewest neighbours (ties: first).
- ``local``: the ``local-interference`` set shipped in ``data/local/``: measured ``norm_perf`` range
  per workload and stressor kind, and the pre-flight tree's MAE on it grouped by mix.

Writes bench/out/interference.json and prints the tables.
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
from preflight.data.interference import ALONE
from preflight.data.settings import Settings
from preflight.features.interference import neighbour_counts
from preflight.models.core.evaluate import Outcome, cross_validate
from preflight.models.core.metrics import regression
from preflight.models.core.task import get_task

OUT = Path(__file__).parent / "out" / "interference.json"


def scores(outcome: Outcome, estimates_of: str = "model") -> dict[str, float]:
    """MAE over all rows and co-located rows, and interval coverage, of out-of-fold estimates."""
    estimates = getattr(outcome, estimates_of)
    y = outcome.y["norm_perf"].to_numpy()
    value, low, high = (getattr(estimates, a)["norm_perf"].to_numpy() for a in ("value", "low", "high"))
    crowded = (outcome.groups != ALONE).to_numpy()
    every = regression(y, value, low, high)
    colocated = regression(y[crowded], value[crowded], low[crowded], high[crowded])
    return {
        "n": every["n"],
        "mae": every["mae"],
        "mae_colocated": colocated["mae"],
        "coverage": every["coverage"],
        "coverage_colocated": colocated["coverage"],
    }


def placement(rows: pd.DataFrame, outcome: Outcome) -> dict[str, float]:
    """The scheduler's replay: per (session, replicas, load), pick among the co-located mixes."""
    table = rows.iloc[outcome.test_index].reset_index(drop=True)
    table["predicted"] = outcome.model.value["norm_perf"].to_numpy()
    table["n_total"] = neighbour_counts(table["mix"])["n_total"]
    table = table[table["mix"] != ALONE]
    hits, regrets, naive_hits, naive_regrets, situations = [], [], [], [], 0
    for _, hosts in table.groupby(["session", "replicas", "load_rps"]):
        if len(hosts) < 2:
            continue
        situations += 1
        best = hosts["norm_perf"].max()
        for choice, hit, regret in (
            (hosts.loc[hosts["predicted"].idxmax()], hits, regrets),
            (hosts.loc[hosts["n_total"].idxmin()], naive_hits, naive_regrets),
        ):
            hit.append(choice["norm_perf"] == best)
            regret.append(best - choice["norm_perf"])
    return {
        "situations": situations,
        "candidates_mean": float(table.groupby(["session", "replicas", "load_rps"]).size().mean()),
        "top1": float(np.mean(hits)),
        "regret": float(np.mean(regrets)),
        "fewest_neighbours_top1": float(np.mean(naive_hits)),
        "fewest_neighbours_regret": float(np.mean(naive_regrets)),
    }


def local_ranges(rows: pd.DataFrame) -> dict[str, dict[str, float]]:
    """Measured norm_perf (min, median, max) per workload and mix."""
    out: dict[str, dict[str, float]] = {}
    for (workload, mix), group in rows.groupby(["workload", "mix"]):
        values = group["norm_perf"]
        out[f"{workload} | {mix}"] = {
            "min": float(values.min()),
            "median": float(values.median()),
            "max": float(values.max()),
        }
    return out


def main() -> None:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--trace-families", default="tree,transformer")
    parser.add_argument("--skip-trace", action="store_true")
    parser.add_argument(
        "--transformer-epochs", type=int, default=20, help="fewer than the family's 40: 25 fits"
    )
    args = parser.parse_args()
    settings, catalogue = Settings(), Catalogue.load()
    path = sources.default_path("marla", settings.datasets)
    if path is None:
        raise SystemExit("MARLA not found: set PREFLIGHT_DATASETS to the shared datasets folder")
    rows = sources.load("marla", path).rows
    report: dict = {}
    task = get_task("interference")
    start = time.perf_counter()
    outcome = cross_validate(task, rows, catalogue, "tree", "mix")
    report["preflight"] = {"tree": scores(outcome), "linear": scores(outcome, "baseline")}
    report["preflight"]["seconds"] = time.perf_counter() - start
    report["placement"] = placement(task.rows(rows), outcome)
    print(json.dumps({k: report[k] for k in ("preflight", "placement")}, indent=2))
    if not args.skip_trace:
        trace_task = get_task("interference-trace")
        report["trace"] = {}
        for family in args.trace_families.split(","):
            start = time.perf_counter()
            params = {"epochs": args.transformer_epochs} if family == "transformer" else None
            trace_outcome = cross_validate(trace_task, rows, catalogue, family, "mix", params=params)
            report["trace"][family] = scores(trace_outcome) | {"seconds": time.perf_counter() - start}
            report["trace"]["linear"] = scores(trace_outcome, "baseline")
            print(family, json.dumps(report["trace"][family]))
    local = sources.load("local-interference", sources.default_path("local-interference", None)).rows
    local_outcome = cross_validate(task, local, catalogue, "tree", "mix")
    report["local"] = {"tree": scores(local_outcome), "linear": scores(local_outcome, "baseline")}
    report["local"]["ranges"] = local_ranges(local)
    print(json.dumps(report["local"], indent=2))
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
