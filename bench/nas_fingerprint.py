"""HELP's protocol on HELP's own device settings: each setting held out in turn (its spec sheet hidden,
or not), the model trained on the others, K measured architectures adapt it, and the rest of the space
scores it (Spearman, 0.9-interval coverage, beside the baseline family in the same run).

    python bench/nas_fingerprint.py --datasets ../shared/datasets [--hide] [--shots 10] [--only 1080ti]
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
from preflight.models.core.evaluate import target_metrics, train_test
from preflight.models.core.task import get_task

TASK = get_task("nas-latency")


def settings(rows: pd.DataFrame) -> pd.Series:
    """HELP's device setting of each row: the device and its batch size."""
    return rows["device"].astype(str) + "@b" + rows["batch_size"].astype(int).astype(str)


def held_out(rows: pd.DataFrame, setting: str, hide: bool) -> pd.DataFrame:
    """The held-out setting's rows, under a name no catalogue resolves when its spec sheet is hidden."""
    test = rows[settings(rows) == setting].copy()
    if hide:
        test["device"] = "unlisted-" + setting.replace("@", "-")
    return test


def run(source: str, path: Path, hide: bool, shots: int, archs: int, only: str | None, seed: int) -> dict:
    rows = TASK.rows(sources.load(source, path).rows)
    rows = rows[rows["latency_ms"].notna()].reset_index(drop=True)
    names = settings(rows)
    rng = np.random.default_rng(seed)
    training_archs = rng.choice(rows["arch"].unique(), archs, replace=False)
    out = {}
    for setting in sorted(names.unique()):
        if only and only not in setting:
            continue
        started = time.perf_counter()
        train = rows[(names != setting) & rows["arch"].isin(training_archs)]
        outcome = train_test(
            TASK, train, held_out(rows, setting, hide), Catalogue.load(), "tree", "device", seed, shots
        )
        model = target_metrics(TASK, outcome, outcome.model)["latency_ms"]
        baseline = target_metrics(TASK, outcome, outcome.baseline)["latency_ms"]
        out[setting] = {
            "spearman": model["spearman"],
            "coverage": model["coverage"],
            "mape": model["mape"],
            "baseline_spearman": baseline["spearman"],
            "seconds": round(time.perf_counter() - started, 1),
        }
        print(setting, json.dumps(out[setting]), flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=Path, required=True)
    parser.add_argument("--source", default="help-nb201", choices=["help-nb201", "help-fbnet"])
    parser.add_argument("--hide", action="store_true", help="hide the held-out setting's spec sheet")
    parser.add_argument("--shots", type=int, default=10)
    parser.add_argument("--archs", type=int, default=900, help="architectures measured per training setting")
    parser.add_argument("--only", help="only the settings whose name contains this")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    path = sources.default_path(args.source, args.datasets)
    results = run(args.source, path, args.hide, args.shots, args.archs, args.only, args.seed)
    frame = pd.DataFrame(results).T
    print(frame.to_string())
    print(
        f"mean Spearman {frame['spearman'].mean():.3f} (min {frame['spearman'].min():.3f}), "
        f"baseline {frame['baseline_spearman'].mean():.3f}, coverage {frame['coverage'].mean():.2f} "
        f"({frame['coverage'].min():.2f}-{frame['coverage'].max():.2f})"
    )


if __name__ == "__main__":
    main()
