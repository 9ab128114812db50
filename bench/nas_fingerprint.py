"""HELP's protocol on HELP's own devices: each device held out in turn with all its batch sizes (its
spec sheet hidden, or not), the model trained on the other devices' settings, K measured architectures
of each held-out setting adapt it, and the rest of the space scores it per setting (Spearman, 0.9
coverage, beside the baseline family in the same run).

    python bench/nas_fingerprint.py --datasets ../shared/datasets [--hide] [--shots 10] [--informative]
        [--source help-fbnet] [--archs 300] [--only 1080ti] [--family gnn]
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


def held_out(rows: pd.DataFrame, device: str, hide: bool) -> pd.DataFrame:
    """The held-out device's rows, under a name no catalogue resolves when its spec sheet is hidden."""
    test = rows[rows["device"] == device].copy()
    if hide:
        test["device"] = f"unlisted-{device}"
    return test


def run(
    source: str,
    path: Path,
    hide: bool,
    shots: int,
    archs: int,
    only: str | None,
    seed: int,
    informative: bool,
    family: str,
) -> dict:
    rows = TASK.rows(sources.load(source, path).rows)
    rows = rows[rows["latency_ms"].notna()].reset_index(drop=True)
    rng = np.random.default_rng(seed)
    training_archs = rng.choice(rows["arch"].unique(), archs, replace=False)
    out = {}
    for device in sorted(rows["device"].astype(str).unique()):
        if only and only not in device:
            continue
        started = time.perf_counter()
        train = rows[(rows["device"] != device) & rows["arch"].isin(training_archs)]
        outcome = train_test(
            TASK, train, held_out(rows, device, hide), Catalogue.load(), family, "device", seed, shots,
            informative=informative,
        )  # fmt: skip
        model = target_metrics(TASK, outcome, outcome.model, by_group=True)["latency_ms"]
        baseline = target_metrics(TASK, outcome, outcome.baseline, by_group=True)["latency_ms"]
        seconds = round(time.perf_counter() - started, 1)
        for setting in (s for s in model if s != "mean"):
            out[f"{device} {setting.split('@')[-1] if '@' in setting else 'b1'}"] = {
                "spearman": model[setting]["spearman"],
                "coverage": model[setting]["coverage"],
                "median_ape": model[setting]["median_ape"],
                "baseline_spearman": baseline[setting]["spearman"],
                "seconds": seconds,
            }
        print(device, json.dumps({k: v for k, v in out.items() if k.startswith(device + " ")}), flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=Path, required=True)
    parser.add_argument("--source", default="help-nb201", choices=["help-nb201", "help-fbnet"])
    parser.add_argument("--hide", action="store_true", help="hide the held-out setting's spec sheet")
    parser.add_argument("--shots", type=int, default=10)
    parser.add_argument(
        "--archs", type=int, default=1000, help="cells of the training file (HELP's split: 1,000)"
    )
    parser.add_argument("--only", help="only the settings whose name contains this")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--informative", action="store_true", help="measure the recommended cells (default: random ones)"
    )
    parser.add_argument("--family", default="tree", choices=TASK.families, help="the model family adapted")
    args = parser.parse_args()
    path = sources.default_path(args.source, args.datasets)
    results = run(
        args.source,
        path,
        args.hide,
        args.shots,
        args.archs,
        args.only,
        args.seed,
        args.informative,
        args.family,
    )
    frame = pd.DataFrame(results).T
    print(frame.to_string())
    print(
        f"mean Spearman {frame['spearman'].mean():.3f} (min {frame['spearman'].min():.3f}), "
        f"baseline {frame['baseline_spearman'].mean():.3f}, coverage {frame['coverage'].mean():.2f} "
        f"({frame['coverage'].min():.2f}-{frame['coverage'].max():.2f})"
    )


if __name__ == "__main__":
    main()
