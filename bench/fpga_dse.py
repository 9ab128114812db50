r"""A replayed design-space exploration on kernels never seen (issue 27), for docs/BENCHMARKS.md.

    PREFLIGHT_DATASETS=../shared/datasets .venv/bin/python bench/fpga_dse.py [--folds 5] [--budget 100]

5 folds grouped by kernel (as ``preflight evaluate fpga --split kernel``): a tree predictor is
trained on the other kernels, and each held-out kernel × tool with a valid design is a design space
whose measured designs HLSyn holds. The replay synthesizes (reads the measurement of) what a
strategy picks, up to ``--budget`` designs:

- ``active, k=K``: the unadapted model picks K designs (``models.explore.next_batch``: expected
  improvement in cycles times the probability of fitting, spread over the space); then, in batches
  of ``--batch``, the model adapted to every design synthesized so far (``Predictor.adapted``: a
  process per target over the kernel's designs) picks the next. After each adaptation: the valid
  ROC AUC, the cycles median APE and the 0.9 interval coverage on the designs not synthesized yet.
- ``greedy unadapted``: the first ``--budget`` designs by the unadapted model's ranking (what
  ``/v1/fpga/explore`` ranks by default: feasible first, fewest predicted cycles).
- ``random``: ``--budget`` designs drawn at random (mean over ``--draws`` draws).
- ``shots, K``: K designs drawn at random, the model adapted to them (what ``preflight evaluate fpga
  --shots K`` does), and the same figures as ``active`` on the rest of the space.

For each strategy: the share of spaces where a truly best valid design (within 5% of the fewest
cycles any valid design of the space has) was synthesized, and the median regret (fewest cycles
found over the true best, minus 1). Writes bench/out/fpga_dse.json and prints the figures.
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
from preflight.features import Features
from preflight.models.core.predictor import Predictor, folds
from preflight.models.core.task import get_task
from preflight.models.tools.explore import feasible, next_batch
from sklearn.metrics import roc_auc_score

OUT = Path(__file__).parent / "out" / "fpga_dse.json"
STARTS = (10, 20, 50)
RANDOM_SHOTS = (10, 20, 50)
WITHIN = 0.05


def replay_space(
    predictor: Predictor, features: Features, Y: pd.DataFrame, budget: int, batch: int, draws: int, seed: int
) -> dict:
    """Every strategy on one design space (its rows: ``features``, ``Y``)."""
    cycles = Y["cycles"].to_numpy(dtype=float)
    best = np.nanmin(cycles)
    unadapted = predictor.predict(features)
    rng = np.random.default_rng(seed)
    ranked = np.argsort(
        np.where(feasible(unadapted.value, {}), unadapted.value["cycles"], np.inf), kind="stable"
    )
    out = {
        "designs": len(Y),
        "valid": int(np.isfinite(cycles).sum()),
        "zero_shot": _quality(unadapted, Y, np.arange(len(Y))),
        "greedy_unadapted": _found(cycles[ranked[:budget]], best),
        "random": float(
            np.mean([_found(cycles[rng.permutation(len(Y))[:budget]], best)["found"] for _ in range(draws)])
        ),
    }
    for k in RANDOM_SHOTS:
        out[f"shots_{k}"] = _random_shots(predictor, features, Y, k, rng)
    x = predictor.design_space(features)
    for start in STARTS:
        out[f"active_{start}"] = _active(predictor, features, Y, x, start, budget, batch, best)
    return out


def _active(
    predictor: Predictor, features: Features, Y: pd.DataFrame, x: np.ndarray, start: int, budget: int,
    batch: int, best: float,
) -> dict:  # fmt: skip
    """The model picks ``start`` designs, then ``batch`` at a time adapted to what it synthesized."""
    cycles = Y["cycles"].to_numpy(dtype=float)
    chosen = list(next_batch(predictor.predict(features), x, start))
    steps = []
    while True:
        adapted = predictor.adapted(features.take(np.array(chosen)), Y.iloc[chosen].reset_index(drop=True))
        rest = np.setdiff1d(np.arange(len(Y)), chosen)
        if not len(rest):
            break
        estimates = adapted.predict(features.take(rest))
        steps.append(
            {"synthesized": len(chosen), **_quality(estimates, Y, rest), **_found(cycles[chosen], best)}
        )
        if len(chosen) >= budget:
            break
        measured = cycles[chosen]
        incumbent = float(np.nanmin(measured)) if np.isfinite(measured).any() else None
        picks = next_batch(estimates, x[rest], min(batch, budget - len(chosen)), incumbent)
        chosen += rest[picks].tolist()
    return {"steps": steps, **_found(cycles[chosen[:budget]], best)}


def _random_shots(
    predictor: Predictor, features: Features, Y: pd.DataFrame, k: int, rng: np.random.Generator
) -> dict | None:
    """The figures on the rest of the space after adapting to ``k`` designs drawn at random."""
    if len(Y) <= k:
        return None
    chosen = rng.permutation(len(Y))[:k]
    adapted = predictor.adapted(features.take(chosen), Y.iloc[chosen].reset_index(drop=True))
    rest = np.setdiff1d(np.arange(len(Y)), chosen)
    return _quality(adapted.predict(features.take(rest)), Y, rest)


def _quality(estimates, Y: pd.DataFrame, rows: np.ndarray) -> dict:
    """Valid ROC AUC, cycles median APE and 0.9 coverage of estimates for ``rows`` of ``Y``."""
    y = Y.iloc[rows].reset_index(drop=True)
    valid, p = y["valid"].to_numpy(), estimates.value["valid"].to_numpy()
    measured = y["cycles"].notna().to_numpy()
    value, low, high = (
        f["cycles"].to_numpy()[measured] for f in (estimates.value, estimates.low, estimates.high)
    )
    truth = y["cycles"].to_numpy()[measured]
    return {
        "auc": float(roc_auc_score(valid, p)) if 0 < valid.sum() < len(valid) else None,
        "cycles_median_ape": float(np.median(np.abs(value / truth - 1)) * 100) if measured.any() else None,
        "coverage": float(np.mean((truth >= low) & (truth <= high))) if measured.any() else None,
    }


def _found(synthesized: np.ndarray, best: float) -> dict:
    """Whether a design within ``WITHIN`` of the best was synthesized, and the regret."""
    found = np.nanmin(synthesized) if np.isfinite(synthesized).any() else np.inf
    return {"found": bool(found <= best * (1 + WITHIN)), "regret": float(found / best - 1)}


def summary(spaces: list[dict]) -> dict:
    """Per strategy: the share of spaces whose best was found and the median regret; per active start
    and step: mean AUC, median of the spaces' cycles median APE, mean coverage."""
    out: dict = {"spaces": len(spaces), "zero_shot": _mean_steps([s["zero_shot"] for s in spaces])}
    out["random"] = {"found_share": float(np.mean([s["random"] for s in spaces]))}
    for k in RANDOM_SHOTS:
        out[f"shots_{k}"] = _mean_steps([s[f"shots_{k}"] for s in spaces if s.get(f"shots_{k}")])
    for name in ["greedy_unadapted", *(f"active_{k}" for k in STARTS)]:
        regrets = [s[name]["regret"] for s in spaces]
        out[name] = {
            "found_share": float(np.mean([s[name]["found"] for s in spaces])),
            "median_regret": float(np.median(regrets)),
        }
        if name.startswith("active"):
            by_step = pd.DataFrame([step for s in spaces for step in s[name]["steps"]])
            out[name]["steps"] = {
                int(n): _mean_steps(group.to_dict("records"))
                for n, group in by_step.groupby("synthesized")
                if len(group) >= len(spaces) // 2
            }
    return out


def _mean_steps(records: list[dict]) -> dict:
    frame = pd.DataFrame(records).astype(float)
    return {
        "auc": float(frame["auc"].mean()),
        "cycles_median_ape": float(frame["cycles_median_ape"].median()),
        "coverage": float(frame["coverage"].mean()),
        "spaces": len(frame),
    }


def main() -> None:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--folds", type=int, default=5, help="folds to run, of 5 grouped by kernel")
    parser.add_argument("--budget", type=int, default=100)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--draws", type=int, default=20, help="random draws per space")
    args = parser.parse_args()
    settings, catalogue, task = Settings(), Catalogue.load(), get_task("fpga")
    rows = task.rows(sources.load("hlsyn", sources.default_path("hlsyn", settings.datasets)).rows)
    features, Y = task.featurize(rows, catalogue), task.target_frame(rows)
    kernels = features.meta["kernel"].astype(str)
    spaces = []
    for fold, (train, held) in enumerate(folds(kernels, 5)[: args.folds]):
        start = time.perf_counter()
        predictor = Predictor(task, "tree").fit(
            features.take(train),
            Y.iloc[train].reset_index(drop=True),
            kernels.iloc[train].reset_index(drop=True),
        )
        space_of = features.meta.iloc[held].groupby(["kernel", "tool"]).indices
        for (kernel, tool), at in space_of.items():
            rows_ = held[at]
            if Y["cycles"].iloc[rows_].notna().any():
                space_Y = Y.iloc[rows_].reset_index(drop=True)
                result = replay_space(
                    predictor, features.take(rows_), space_Y, args.budget, args.batch, args.draws, fold
                )
                spaces.append({"kernel": kernel, "tool": tool, **result})
                print(
                    kernel,
                    tool,
                    json.dumps({k: v for k, v in result.items() if not k.startswith(("active", "shots"))}),
                    flush=True,
                )
        print(f"fold {fold}: {time.perf_counter() - start:.0f} s", flush=True)
    out = {"budget": args.budget, "batch": args.batch, "summary": summary(spaces), "spaces": spaces}
    large = [s for s in spaces if s["designs"] > 2 * args.budget]
    out["summary_large_spaces"] = summary(large) if large else None
    print(json.dumps({k: out[k] for k in ("summary", "summary_large_spaces")}, indent=1))
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
