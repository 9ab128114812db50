r"""NAS figures for docs/BENCHMARKS.md, each on a split grouped by architecture (or device).

    PREFLIGHT_DATASETS=../shared/datasets .venv/bin/python bench/nas_accuracy.py \
        [--only NAME ...] [--families tree gnn]

Figures (every one for each family asked for, with the ``linear`` baseline and coverage at 0.9):

- ``cifar100``: NAS-Bench-201 CIFAR-100 accuracy (HW-NAS-Bench-360), Kendall tau, trained on 100
  and on 1,000 architecture groups (``rep_arch_idx``) drawn with the seed, tested on all the
  others; mean over 5 seeds.
- ``nas-bench-graph``: test accuracy per graph dataset, Kendall tau, 100 training architectures.
- ``help-shots``: latency on a device absent from training, 10 shots: each HELP NAS-Bench-201
  device (all its batch sizes) is left out in turn; the training file holds the other devices'
  columns for ``--help-train-archs`` architectures, the test file the held-out device's columns for
  all 15,625; Spearman per device setting. The files are written to bench/out/help-split/ so that
  ``preflight evaluate nas-latency --source help-nb201 --train A --test B --shots 10 --json``
  reproduces any one device.
- ``pi5-energy``: Raspberry Pi 5 ``energy_mj`` and ``latency_ms`` (HW-NAS-Bench-360, three runtimes,
  three tasks), MAPE under 5-fold cross-validation grouped by ``rep_arch_idx``, on 2,000 of its
  6,466 groups drawn with seed 0.

Writes bench/out/nas_accuracy.json (merged with earlier runs) and prints a line per figure.
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

SETTINGS = Settings()
CATALOGUE = Catalogue.load(SETTINGS.devices_file)
OUT = Path(__file__).parent / "out" / "nas_accuracy.json"
SPLIT_DIR = Path(__file__).parent / "out" / "help-split"
ACCURACY, LATENCY = get_task("nas-accuracy"), get_task("nas-latency")
SEEDS = (0, 1, 2, 3, 4)
KEYS = ("kendall", "spearman", "mape", "median_ape", "mae", "coverage", "interval_width")


def _table(source: str) -> pd.DataFrame:
    path = sources.default_path(source, SETTINGS.datasets)
    if path is None:
        raise SystemExit(f"{source}: file not found; set PREFLIGHT_DATASETS to the datasets folder")
    return load_source(source, path, SETTINGS, CATALOGUE, store=False)[0]


def _pick(metrics: dict) -> dict:
    return {k: metrics[k] for k in KEYS if k in metrics}


def _mean(results: list[dict]) -> dict:
    keys = set.intersection(*(set(r) for r in results))
    return {k: float(np.mean([r[k] for r in results])) for k in sorted(keys)}


def _grouped(task, rows: pd.DataFrame, family: str, train_size: int | None, seed: int) -> dict:
    """One grouped evaluation: the model's and the baseline's metrics per target."""
    evaluation = analysis.cross_validated(
        task, task.rows(rows), CATALOGUE, family, "arch", "", seed=seed, train_size=train_size
    )
    report = evaluation.summary()
    return {
        "model": {t: _pick(m) for t, m in report["metrics"].items()},
        "baseline": {t: _pick(m) for t, m in report["baseline"]["metrics"].items()},
        "n_test": report["n_test"],
    }


def _over_seeds(task, rows: pd.DataFrame, family: str, train_size: int, target: str, seeds=SEEDS) -> dict:
    runs = [_grouped(task, rows, family, train_size, seed) for seed in seeds]
    return {
        "model": _mean([r["model"][target] for r in runs]),
        "baseline": _mean([r["baseline"][target] for r in runs]),
        "per_seed_kendall": [r["model"][target].get("kendall") for r in runs],
        "n_test": runs[0]["n_test"],
    }


def cifar100(family: str) -> dict:
    rows = ACCURACY.rows(_table("hw-nas-bench-360"))
    rows = rows[rows["dataset"] == "cifar100"]
    return {str(size): _over_seeds(ACCURACY, rows, family, size, "accuracy") for size in (100, 1000)}


def nas_bench_graph(family: str) -> dict:
    rows = ACCURACY.rows(_table("nas-bench-graph"))
    return {
        dataset: _over_seeds(ACCURACY, part, family, 100, "accuracy", seeds=SEEDS[:3])
        for dataset, part in rows.groupby("dataset")
    }


def _help_files(held: str, train_archs: int, seed: int = 0) -> tuple[Path, Path]:
    """HELP-layout files: the other devices' columns for a sample of architectures, and the held-out
    device's columns (every batch size) for all of them."""
    path = sources.default_path("help-nb201", SETTINGS.datasets)
    raw = pd.read_csv(path)
    hardware = {c: CATALOGUE.resolve(_device_name(c)).id for c in raw.columns if c.startswith("lat_")}
    held_columns = [c for c, h in hardware.items() if h == held]
    train = raw.drop(columns=held_columns).sample(train_archs, random_state=seed)
    SPLIT_DIR.mkdir(parents=True, exist_ok=True)
    train_path, test_path = SPLIT_DIR / f"train-without-{held}.csv", SPLIT_DIR / f"test-{held}.csv"
    train.to_csv(train_path, index=False)
    raw[["arch_idx", "arch_str", *held_columns]].to_csv(test_path, index=False)
    return train_path, test_path


def _device_name(column: str) -> str:
    """The device of a HELP latency column, as the loader reads it (one column per device setting)."""
    from preflight.data.sources._nas import melt_latency

    return melt_latency(pd.DataFrame({column: [1.0]}), []).loc[0, "device"]


def help_shots(family: str, train_archs: int = 1000, shots: int = 10) -> dict:
    table = _table("help-nb201")
    devices = sorted({CATALOGUE.resolve(d).id for d in table["device"].unique()})
    per_setting, baseline = {}, {}
    for held in devices:
        train_path, test_path = _help_files(held, train_archs)
        train_rows = load_source("help-nb201", train_path, SETTINGS, CATALOGUE, store=False)[0]
        test_rows = load_source("help-nb201", test_path, SETTINGS, CATALOGUE, store=False)[0]
        evaluation = analysis.train_tested(
            LATENCY, train_rows, test_rows, CATALOGUE, family, "arch", "help-nb201", shots=shots
        )
        report = evaluation.summary(by_group=True)
        for setting, metrics in report["metrics"]["latency_ms"].items():
            if setting != "mean":
                per_setting[setting] = _pick(metrics)
                baseline[setting] = _pick(report["baseline"]["metrics"]["latency_ms"][setting])
        print(
            f"    {held}: "
            + ", ".join(
                f"{s} spearman {m['spearman']:.3f} coverage {m['coverage']:.2f}"
                for s, m in per_setting.items()
                if s.startswith(held)
            ),
            flush=True,
        )
    return {
        "model": _mean(list(per_setting.values())),
        "baseline": _mean(list(baseline.values())),
        "per_setting": per_setting,
        "train_archs": train_archs,
        "shots": shots,
    }


def pi5_energy(family: str, groups: int = 2000) -> dict:
    """5-fold CV grouped by ``rep_arch_idx`` over a seeded sample of architecture groups (every
    runtime and task of each), to keep 25 fits on 2 cores within minutes."""
    rows = LATENCY.rows(_table("hw-nas-bench-360"))
    rows = rows[rows["device"] == "Raspberry Pi 5"]
    chosen = pd.Series(rows["arch_group"].unique()).sample(groups, random_state=0)
    rows = rows[rows["arch_group"].isin(set(chosen))]
    return _grouped(LATENCY, rows, family, None, seed=0) | {"groups": groups, "rows": len(rows)}


FIGURES = {
    "cifar100": cifar100,
    "nas-bench-graph": nas_bench_graph,
    "help-shots": help_shots,
    "pi5-energy": pi5_energy,
}


def _line(result: dict) -> str:
    def fmt(m: dict) -> str:
        return " ".join(f"{k} {m[k]:.3f}" for k in ("kendall", "spearman", "mape", "coverage") if k in m)

    if "model" in result:
        model = result["model"]
        if all(isinstance(v, dict) for v in model.values()):  # per target
            return "; ".join(
                f"{t}: {fmt(m)} (linear: {fmt(result['baseline'].get(t, {}))})" for t, m in model.items()
            )
        return f"{fmt(model)} (linear: {fmt(result['baseline'])})"
    return "\n      ".join(
        f"{key}: {_line(value)}" for key, value in result.items() if isinstance(value, dict)
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", nargs="*", choices=list(FIGURES), default=list(FIGURES))
    parser.add_argument("--families", nargs="*", default=["tree", "gnn"])
    args = parser.parse_args()
    for name in args.only:
        for family in args.families:
            start = time.perf_counter()
            result = FIGURES[name](family) | {"seconds": round(time.perf_counter() - start, 1)}
            print(f"{name} / {family} ({result['seconds']} s)\n      {_line(result)}", flush=True)
            results = json.loads(OUT.read_text()) if OUT.exists() else {}  # read late: runs may overlap
            results.setdefault(name, {})[family] = result
            OUT.parent.mkdir(parents=True, exist_ok=True)
            OUT.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
