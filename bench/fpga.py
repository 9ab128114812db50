r"""FPGA synthesis figures for docs/BENCHMARKS.md (issue 14).

    PREFLIGHT_DATASETS=../shared/datasets .venv/bin/python bench/fpga.py [--families tree,gnn]

Every estimate is out of fold: 5 folds grouped by kernel (HLSyn's 35 kernels, 34 with a graph:
31,561 designs), from predictors (calibration included) fitted without the row's kernel
(``models/presentation/analysis.py``, exactly what ``preflight evaluate fpga --split kernel`` runs).
Per family:

- ``metrics``: the ``evaluate --json`` metrics (``cycles`` MAPE, median APE, RMSE of log10 and 0.9
  coverage; ``lut``/``ff``/``dsp``/``bram`` MAE and coverage, on the designs that fit; ``valid`` ROC
  AUC and accuracy on all designs), and the linear baseline's.
- ``explore``: for each held-out kernel and tool (a design space), the designs ranked as
  ``/v1/fpga/explore`` ranks them by default (predicted to fit: among the half of the space with
  the highest P(valid), every resource <= 0.8; then fewest predicted cycles), and with
  P(valid) >= 0.5 as the fit rule instead. Reported: where a truly best valid design (fewest
  measured cycles; designs often tie) lands in the model's top 10 (its position, or none), how
  often one is there, the regret of the top 10 (the fewest measured cycles among its valid designs
  over the true best, minus 1), and the chance that 10 designs drawn at random hold a best one
  (mean over spaces).
- ``random_split`` (tree only, for scale): ``--split design``, 5 folds over designs at random, every
  kernel seen in training, as HLSyn's and GNN-DSE's own evaluations split.

Writes bench/out/fpga.json and prints the figures.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np
import pandas as pd
from preflight.data import sources
from preflight.data.catalogue import Catalogue
from preflight.data.settings import Settings
from preflight.models.core.evaluate import Outcome
from preflight.models.core.task import get_task
from preflight.models.presentation.analysis import cross_validated
from preflight.models.tools.explore import feasible

OUT = Path(__file__).parent / "out" / "fpga.json"
LIMITS = {"lut": 0.8, "ff": 0.8, "dsp": 0.8, "bram": 0.8}
TOP = 10


def explore_replay(outcome: Outcome, kernels: pd.Series, tools: pd.Series) -> dict:
    """Per design space (kernel, tool), two ways of choosing the top 10 (resources within 0.8, fewest
    predicted cycles): among designs with P(valid) >= 0.5, and among the half of the space with the
    highest P(valid), the API's default (a kernel never seen shifts every probability)."""
    values, y = outcome.model.value, outcome.y
    spaces = pd.DataFrame({"k": kernels, "t": tools}).groupby(["k", "t"]).indices
    space = kernels + "|" + tools
    rules = {
        "p_valid_at_least_0.5": feasible(values, LIMITS, min_valid=0.5, likely_share=1.0),
        "upper_half_of_p_valid": feasible(values, LIMITS, spaces=space),  # the API's default
    }
    out: dict = {}
    for rule, fits in rules.items():
        replay = [_space(rows, values["cycles"], y["cycles"], fits) for rows in spaces.values()]
        replay = [r for r in replay if r is not None]
        regrets = [r["top10_regret"] for r in replay if r["top10_regret"] is not None]
        out[rule] = {
            "spaces": len(replay),
            "best_in_top10_share": float(np.mean([r["position"] is not None for r in replay])),
            "best_at_1_share": float(np.mean([r["position"] == 1 for r in replay])),
            "random_top10_share": float(np.mean([r["random"] for r in replay])),
            "median_top10_regret": float(np.median(regrets)) if regrets else None,
            "no_valid_in_top10": int(sum(r["top10_regret"] is None for r in replay)),
            "positions": [r["position"] for r in replay],
        }
    return out


def _space(rows: np.ndarray, predicted: pd.Series, measured: pd.Series, fits: np.ndarray) -> dict | None:
    """The model's top 10 of one design space against its truly best valid designs (ties included),
    and the chance that 10 designs drawn at random hold one of them."""
    cycles = measured.iloc[rows].to_numpy()
    if np.isnan(cycles).all():
        return None  # nothing in this space fits: no best to find
    best = np.nanmin(cycles)
    chosen = [i for i in np.argsort(predicted.iloc[rows].to_numpy(), kind="stable") if fits[rows[i]]][:TOP]
    top = cycles[chosen]
    found = top[~np.isnan(top)]
    n, tied = len(rows), int((cycles == best).sum())
    return {
        "position": next((i + 1 for i, c in enumerate(top) if c == best), None),
        "top10_regret": float(found.min() / best - 1) if len(found) else None,
        "random": 1 - math.comb(n - tied, min(TOP, n)) / math.comb(n, min(TOP, n)),
    }


def main() -> None:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--families", default="tree,gnn")
    args = parser.parse_args()
    settings, catalogue, task = Settings(), Catalogue.load(), get_task("fpga")
    path = sources.default_path("hlsyn", settings.datasets)
    rows = task.rows(sources.load("hlsyn", path).rows)
    out: dict = {"rows": len(rows), "kernels": int(rows["kernel"].nunique())}
    for family in args.families.split(","):
        start = time.perf_counter()
        evaluation = cross_validated(task, rows, catalogue, family, "kernel", "hlsyn")
        tested = evaluation.inputs
        out[family] = evaluation.summary() | {
            "explore": explore_replay(evaluation.outcome, tested["kernel"], tested["tool"]),
            "seconds": round(time.perf_counter() - start),
        }
        print(family, json.dumps({k: v for k, v in out[family].items() if k != "explore"}, indent=1))
        for rule, replay in out[family]["explore"].items():
            print(family, rule, json.dumps({k: v for k, v in replay.items() if k != "positions"}))
    random_split = cross_validated(task, rows, catalogue, "tree", "design", "hlsyn")
    out["random_split"] = random_split.summary()["metrics"]
    print("random split (tree)", json.dumps(out["random_split"], indent=1))
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
