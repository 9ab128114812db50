r"""NAS early-stopping figures for docs/BENCHMARKS.md (issue 5), on ``local-curves`` and ``ec-nas``.

    PREFLIGHT_DATASETS=../shared/datasets .venv/bin/python bench/nas_early_stop.py \
        [--seeds 20] [--only local-curves]
    # pip install lcdb
    .venv/bin/python bench/nas_early_stop.py --only lcdb --lcdb PATH/TO/lcdb/database-accuracy.csv

Every prediction of a run comes from a ``nas-curve`` predictor (calibration included) fitted
without that run's ``arch_group``: its architecture (LCDB: its dataset), 5 grouped folds. Then:

- ``mae``: final-accuracy MAE (percentage points) and 90% interval coverage from the longest prefix
  within 10%, 25% and 50% of each run's budget, for the learned model (``tree``) and both baselines
  (``extrapolation``: the power-law/exponential/log-power ensemble; ``last-value``). LCDB (curves
  over training-set size, ``--lcdb-runs`` of its 124,000 drawn with seed 0) gets this table only.
- ``replay``: random search over ``--candidates`` runs drawn per seed, in random order, each trained
  epoch by epoch; after each measured epoch the rule of ``models/tools/early_stop.py`` (stop when
  P(final > incumbent) < risk) decides, with the incumbent the best finished run so far. Compute is
  epochs trained (local-curves, also recorded wall seconds) or training energy (EC-NAS, cumulative
  kWh at the stopping epoch); regret is the best final accuracy among the candidates minus the
  incumbent at the end, in percentage points. Without early stopping every candidate runs in full.
- ``reliability``: P(final > incumbent) in deciles against the observed share, over every held-out
  partial curve against 10 search-like incumbents each (the best final accuracy of 1-30 other runs
  drawn with the seed), and over the decision points the replays visited (where runs that survived
  earlier checks are those the model has overrated so far, a selection the first table is free of).
  A final accuracy equal to the incumbent's does not beat it: P is taken half an accuracy step
  above the incumbent (``models/tools/early_stop.py::beat_threshold``; digits' 600 validation images).

Writes bench/out/nas_early_stop.json and prints the tables.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from preflight.data import sources
from preflight.data.catalogue import Catalogue
from preflight.data.collect.curves import VALID_ROWS
from preflight.data.settings import Settings
from preflight.models.core.conformal import Conformal
from preflight.models.core.datasets import load_source
from preflight.models.core.predictor import Predictor
from preflight.models.core.task import get_task
from preflight.models.tools.early_stop import DEFAULT_RISK, beat_threshold, stop
from sklearn.model_selection import GroupKFold

SETTINGS = Settings()
CATALOGUE = Catalogue.load(SETTINGS.devices_file)
TASK = get_task("nas-curve")
OUT = Path(__file__).parent / "out" / "nas_early_stop.json"
FAMILIES = ("tree", "extrapolation", "last-value")
PREFIXES = (0.10, 0.25, 0.50)
RISKS = (0.005, 0.01, 0.02, 0.05, 0.1, 0.2)
#: Per source: candidates per search, and the compute a run has used after each epoch.
CANDIDATES = {"local-curves": 100, "ec-nas": 200}
SOURCES = (*CANDIDATES, "lcdb")
#: What a user brings new, per source: an architecture, or (LCDB) a dataset.
SPLIT = {"local-curves": "arch", "ec-nas": "arch", "lcdb": "arch"}  # LCDB's arch_group is its dataset
#: Validation examples behind each source's accuracies (EC-NAS: 9,984 CIFAR-10 images, ties negligible).
VALID_SIZE = {"local-curves": VALID_ROWS, "ec-nas": None, "lcdb": None}
FOLDS = 5


@dataclass
class Held:
    """Out-of-fold estimates of every partial curve of a source, per family."""

    rows: pd.DataFrame  # the task's prefix rows (run, curve, epochs, budget, accuracy)
    value: dict[str, np.ndarray]
    low: dict[str, np.ndarray]
    high: dict[str, np.ndarray]
    calibrator: dict[str, list[Conformal]]  # per row: the calibrator its P comes from
    valid_size: int | None  # examples behind the accuracies: a tie with the incumbent does not beat it

    def p_beat(self, family: str, row: int, incumbents: np.ndarray) -> np.ndarray:
        """P(final > incumbent) for one partial curve against one or more incumbents."""
        incumbents = np.atleast_1d(np.asarray(incumbents, float))
        estimate = np.full(len(incumbents), self.value[family][row])
        return self.calibrator[family][row].probability_above(
            estimate, beat_threshold(incumbents, self.valid_size)
        )


def held_out(table: pd.DataFrame, split: str, valid_size: int | None) -> Held:
    rows = TASK.rows(table)
    features, Y = TASK.featurize(rows, CATALOGUE), TASK.target_frame(rows)
    groups = TASK.group_values(features.meta, split)
    out = Held(rows, {}, {}, {}, {}, valid_size)
    for family in FAMILIES:
        value, low, high = (np.full(len(rows), np.nan) for _ in range(3))
        calibrators: list[Conformal | None] = [None] * len(rows)
        for train, test in GroupKFold(n_splits=FOLDS).split(rows, groups=groups):
            predictor = Predictor(TASK, family).fit(
                features.take(train),
                Y.iloc[train].reset_index(drop=True),
                groups.iloc[train].reset_index(drop=True),
            )
            part = features.take(test)
            estimates = predictor.predict(part, 0.9)
            value[test], low[test], high[test] = (
                getattr(estimates, a)["accuracy"].to_numpy() for a in ("value", "low", "high")
            )
            for i, stratum in zip(test, part.meta["stratum"]):
                calibrators[i] = predictor.calibration_.calibrator("accuracy", "seen", stratum)
        out.value[family], out.low[family], out.high[family], out.calibrator[family] = (
            value,
            low,
            high,
            calibrators,
        )
    return out


def mae_by_prefix(held: Held) -> dict:
    """MAE and coverage from each run's longest prefix within 10/25/50% of its budget."""
    fraction = pd.Series(held.rows["epochs"].map(lambda e: e[-1]).to_numpy() / held.rows["budget"].to_numpy())
    y = held.rows["accuracy"].to_numpy(dtype=float)
    out = {}
    for share in PREFIXES:
        within = fraction[fraction <= share + 1e-9]
        if within.empty:
            continue
        rows = within.groupby(held.rows["run"][within.index]).idxmax().to_numpy()
        out[f"<={int(share * 100)}%"] = {
            "n_runs": len(rows),
            **{
                family: {
                    "mae_pp": float(np.mean(np.abs(held.value[family][rows] - y[rows])) * 100),
                    "coverage": float(
                        np.mean((y[rows] >= held.low[family][rows]) & (y[rows] <= held.high[family][rows]))
                    ),
                }
                for family in FAMILIES
            },
        }
    return out


@dataclass
class Run:
    final: float
    budget_cost: float
    points: list[tuple[int, float]]  # (row of the prefix ending at this point, compute used by then)


def runs(held: Held, cost: pd.DataFrame) -> dict[str, Run]:
    """Each run's final accuracy, full compute, and its decision points in order."""
    out: dict[str, Run] = {}
    by_run = cost.set_index(["run", "epoch"])["cost"]
    for i, row in held.rows.iterrows():  # a run's prefixes come in epoch order (``partial_curves``)
        run = out.setdefault(row["run"], Run(row["accuracy"], float(by_run[(row["run"], row["budget"])]), []))
        run.points.append((i, float(by_run[(row["run"], row["epochs"][-1])])))
    return out


def replay(
    held: Held,
    all_runs: dict[str, Run],
    family: str,
    risk: float,
    candidates: int,
    seed: int,
    decisions: list | None = None,
) -> dict:
    """One random search with early stopping under ``risk`` and one without, over the same candidates."""
    rng = np.random.default_rng(seed)
    names = rng.permutation(sorted(all_runs))[:candidates]
    incumbent, used = None, 0.0
    for name in names:
        run = all_runs[name]
        stopped = False
        for row, cost in run.points:
            if incumbent is None:
                continue
            p_beat = float(held.p_beat(family, row, incumbent)[0])
            if decisions is not None:
                decisions.append((p_beat, run.final > incumbent))
            if stop(p_beat, risk):
                used, stopped = used + cost, True
                break
        if not stopped:
            used += run.budget_cost
            incumbent = run.final if incumbent is None else max(incumbent, run.final)
    full = sum(all_runs[n].budget_cost for n in names)
    best = max(all_runs[n].final for n in names)
    return {"compute_ratio": full / used, "regret_pp": (best - incumbent) * 100}


def replays(held: Held, all_runs: dict[str, Run], candidates: int, seeds: int) -> dict:
    out = {}
    for family in ("tree", "extrapolation"):
        for risk in RISKS:
            results = [replay(held, all_runs, family, risk, candidates, seed) for seed in range(seeds)]
            ratio = np.array([r["compute_ratio"] for r in results])
            regret = np.array([r["regret_pp"] for r in results])
            out[f"{family}@{risk}"] = {
                "family": family,
                "risk": risk,
                "compute_ratio_mean": float(ratio.mean()),
                "compute_ratio_min": float(ratio.min()),
                "regret_pp_mean": float(regret.mean()),
                "regret_pp_max": float(regret.max()),
                "seeds": seeds,
            }
    return out


def reliability(pairs: list[tuple[float, bool]]) -> list[dict]:
    """Per decile of P: how many pairs, the mean P, the observed share that beat, and the gap in points."""
    p = np.array([a for a, _ in pairs])
    beat = np.array([b for _, b in pairs], dtype=float)
    decile = np.minimum((p * 10).astype(int), 9)
    table = []
    for d in range(10):
        rows = decile == d
        if rows.any():
            table.append(
                {
                    "bin": f"{d / 10:.1f}-{(d + 1) / 10:.1f}",
                    "n": int(rows.sum()),
                    "mean_p": float(p[rows].mean()),
                    "observed": float(beat[rows].mean()),
                    "gap_pts": float((beat[rows].mean() - p[rows].mean()) * 100),
                }
            )
    return table


def incumbent_pairs(
    held: Held, all_runs: dict[str, Run], per_row: int = 10, seed: int = 0
) -> list[tuple[float, bool]]:
    """Every held-out partial curve against ``per_row`` incumbents like a search's: the best final
    accuracy of m other runs (drawn without replacement), m drawn from 1..30."""
    rng = np.random.default_rng(seed)
    names = sorted(all_runs)
    finals = np.array([all_runs[n].final for n in names])
    position = {n: i for i, n in enumerate(names)}
    pairs = []
    for i, row in held.rows.iterrows():
        others = np.delete(finals, position[row["run"]])
        incumbents = np.array(
            [rng.choice(others, size=m, replace=False).max() for m in rng.integers(1, 31, size=per_row)]
        )
        p = held.p_beat("tree", i, incumbents)
        pairs += list(zip(p.tolist(), (row["accuracy"] > incumbents).tolist()))
    return pairs


def costs(source: str, table: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Compute used by the end of each epoch, per kind of compute the source records (LCDB: none
    replayed; its curves grow with data, not with time)."""
    if source == "lcdb":
        return {}
    if source == "local-curves":
        epochs = table[["run", "epoch"]].assign(cost=table["epoch"].astype(float))
        seconds = table.sort_values("epoch").assign(cost=lambda t: t.groupby("run")["epoch_seconds"].cumsum())
        return {"epochs": epochs, "seconds": seconds[["run", "epoch", "cost"]]}
    return {"energy_kwh": table[["run", "epoch"]].assign(cost=table["train_energy_kwh"])}


def bench_source(source: str, seeds: int, path: Path | None = None, lcdb_runs: int = 1_000) -> dict:
    path = path or sources.default_path(source, SETTINGS.datasets)
    if path is None:
        raise SystemExit(
            f"{source}: file not found; set PREFLIGHT_DATASETS to the datasets folder (LCDB: --lcdb)"
        )
    table = load_source(source, path, SETTINGS, CATALOGUE, store=False)[0]
    if source == "lcdb":
        runs_drawn = np.random.default_rng(0).choice(table["run"].unique(), lcdb_runs, replace=False)
        table = table[table["run"].isin(runs_drawn)]
    start = time.perf_counter()
    held = held_out(table, SPLIT[source], VALID_SIZE[source])
    result = {
        "n_runs": int(held.rows["run"].nunique()),
        "n_partial_curves": len(held.rows),
        "mae": mae_by_prefix(held),
        "replay": {},
        "reliability": {},
    }
    decisions = []
    for kind, cost in costs(source, table).items():
        all_runs = runs(held, cost)
        result["replay"][kind] = replays(held, all_runs, CANDIDATES[source], seeds)
        if kind in ("epochs", "energy_kwh"):
            for seed in range(seeds):
                replay(held, all_runs, "tree", DEFAULT_RISK, CANDIDATES[source], seed, decisions)
            result["reliability"] = {
                "search_incumbents": reliability(incumbent_pairs(held, all_runs)),
                f"replay_decisions@{DEFAULT_RISK}": reliability(decisions),
            }
    result["seconds"] = time.perf_counter() - start
    return result


def show(source: str, result: dict) -> None:
    print(f"\n== {source}: {result['n_runs']} runs, {result['n_partial_curves']} partial curves")
    for prefix, row in result["mae"].items():
        print(
            f"MAE from {prefix:>5} of the budget ({row['n_runs']} runs): "
            + ", ".join(f"{f} {row[f]['mae_pp']:.2f} pp (cov {row[f]['coverage']:.2f})" for f in FAMILIES)
        )
    for kind, table in result["replay"].items():
        for r in table.values():
            print(
                f"replay [{kind}] {r['family']:>13} risk {r['risk']:<5}: "
                f"compute /{r['compute_ratio_mean']:.2f} (min /{r['compute_ratio_min']:.2f}), "
                f"regret {r['regret_pp_mean']:.3f} pp (max {r['regret_pp_max']:.2f})"
            )
    for name, table in result["reliability"].items():
        print(
            f"reliability ({name}): "
            + "; ".join(f"{r['bin']}: p {r['mean_p']:.3f} vs {r['observed']:.3f} (n {r['n']})" for r in table)
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=list(CANDIDATES), choices=SOURCES)
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--lcdb", type=Path, help="the lcdb package's database-accuracy.csv")
    parser.add_argument("--lcdb-runs", type=int, default=1_000)
    args = parser.parse_args()
    found = json.loads(OUT.read_text()) if OUT.exists() else {}
    for source in args.only:
        found[source] = bench_source(
            source, args.seeds, args.lcdb if source == "lcdb" else None, args.lcdb_runs
        )
        show(source, found[source])
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(found, indent=2))


if __name__ == "__main__":
    main()
