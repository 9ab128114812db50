"""Where a large GEMM's interval width comes from, on a GPU whose generation was seen (the sibling side).

    PREFLIGHT_HOME=/tmp/emb/home preflight train gemm    # the embedded default: no PREFLIGHT_DATASETS
    .venv/bin/python bench/interval_sides.py --home /tmp/emb/home [--stratum S] [--device "NVIDIA A10"]

The GEMM champion of a home, as the service answers with it. Prints the 0.9
score quantile of every calibrator of `runtime_ms`, then re-runs the sibling-device folds and shows,
per held-out device of the stratum, its rows, the spread of its log residuals and the coverage of two
quantiles: the shipped one over rows, and one that weighs every held-out device alike. Last, the
0.9 interval of an 8192³ fp32 GEMM on ``--device`` under each. Writes bench/out/interval_sides.json.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd
import preflight
from preflight.data.catalogue import Catalogue
from preflight.models.core.calibration import strata
from preflight.models.core.predictor import Predictor
from preflight.models.core.task import get_task

GEMM = get_task("gemm")

OUT = Path(__file__).parent / "out" / "interval_sides.json"
COVERAGE = 0.9
PER_DEVICE = 1000  # scores each device contributes to the device-weighted quantile


def calibrator_quantiles(predictor: Predictor) -> pd.DataFrame:
    """Each calibrator's score count and 0.9 quantile for runtime."""
    rows = [
        {"key": key, "scores": len(c["runtime_ms"].scores_), "q90": c["runtime_ms"].quantile(COVERAGE)}
        for key, c in sorted(predictor.calibration_.calibrators.items())
        if "runtime_ms" in c
    ]
    return pd.DataFrame(rows)


def sibling_residuals(predictor: Predictor, stratum: str) -> pd.DataFrame:
    """Log residuals of the sibling-device folds' held-out rows in a stratum or its children (the rows
    its calibrator holds), with their device."""
    features, Y = predictor.train_
    shared, splits = predictor.sibling_splits(features.meta)
    held, _ = predictor.out_of_fold(features, Y[["runtime_ms"]], splits, "sibling-device folds")
    residual = np.log(Y["runtime_ms"].to_numpy()) - np.log(held["runtime_ms"].to_numpy())
    table = pd.DataFrame(
        {
            "device": features.meta[GEMM.device_column].astype(str).to_numpy(),
            "stratum": strata(features.meta, GEMM.stratum_column),
            "residual": residual,
        }
    ).iloc[shared]
    inside = (table.stratum == stratum) | table.stratum.str.startswith(stratum + ".")
    return table[inside & table.residual.notna()]


def device_weighted_quantile(table: pd.DataFrame) -> float:
    """The 0.9 quantile of |residual| with every device's scores weighed alike (evenly spaced ranks)."""
    picks = []
    for _, group in table.groupby("device"):
        scores = np.sort(np.abs(group.residual.to_numpy()))
        picks.append(scores[np.round(np.linspace(0, len(scores) - 1, PER_DEVICE)).astype(int)])
    return float(np.quantile(np.concatenate(picks), COVERAGE))


def per_device(table: pd.DataFrame, quantiles: dict[str, float]) -> pd.DataFrame:
    """Each held-out device's rows, residual spread, and the share of its rows inside each quantile."""
    residuals = table.groupby("device").residual
    out = residuals.agg(
        rows="size", mean="mean", p05=lambda r: r.quantile(0.05), p95=lambda r: r.quantile(0.95)
    )
    for name, q in quantiles.items():
        out[f"coverage_{name}"] = residuals.apply(lambda r, q=q: (r.abs() <= q).mean())
    return out


def large_gemm_widths(
    predictor: Predictor, catalogue: Catalogue, device: str, quantiles: dict[str, float]
) -> dict[str, float]:
    """High over low of an 8192³ fp32 GEMM's 0.9 interval on a device under each quantile, the fast
    end clipped at the roofline as the served answer is."""
    item = {
        "m": 8192,
        "n": 8192,
        "k": 8192,
        "dtype": "fp32",
        "device": device,
        "trans_a": False,
        "trans_b": False,
    }
    features = GEMM.featurize(GEMM.rows(pd.DataFrame([item])), catalogue)
    value = float(predictor.predict(features, COVERAGE).value["runtime_ms"].iloc[0])
    roofline = float(features.reference["runtime_ms"].iloc[0])  # with the launch floor
    print(f"\n{device} 8192³ fp32: {value:.1f} ms, roofline {roofline:.1f} ms")
    return {name: value * np.exp(q) / max(value * np.exp(-q), roofline) for name, q in quantiles.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description="where a sibling GPU's interval width comes from")
    parser.add_argument("--home", required=True, help="a PREFLIGHT_HOME with a trained GEMM champion")
    parser.add_argument("--stratum", default="gpu.library.large")
    parser.add_argument("--device", default="NVIDIA A10")
    args = parser.parse_args()
    model = preflight.load("gemm", home=args.home)
    print(calibrator_quantiles(model.predictor).round(3).to_string(index=False))
    table = sibling_residuals(model.predictor, args.stratum)
    quantiles = {
        "rows": float(np.quantile(np.abs(table.residual), COVERAGE)),
        "devices": device_weighted_quantile(table),
    }
    print(
        f"\nsibling/{args.stratum}, 0.9 quantile: " + ", ".join(f"{n} {q:.3f}" for n, q in quantiles.items())
    )
    devices = per_device(table, quantiles)
    print(devices.round(3).to_string())
    for name in quantiles:
        inside = devices[f"coverage_{name}"].between(0.85, 0.95).sum()
        print(f"devices covered 0.85-0.95 with the {name} quantile: {inside} of {len(devices)}")
    widths = large_gemm_widths(model.predictor, model.catalogue, args.device, quantiles)
    print("0.9 interval high / low: " + ", ".join(f"{name} {w:.2f}×" for name, w in widths.items()))
    OUT.parent.mkdir(exist_ok=True)
    record = {
        "quantiles": quantiles,
        "widths": widths,
        "per_device": devices.reset_index().to_dict("records"),
    }
    OUT.write_text(json.dumps(record, indent=2))


if __name__ == "__main__":
    main()
