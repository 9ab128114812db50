"""GEMMs on GPUs absent from training, the way a user meets them: a newer generation, another vendor,
one device left out, with and without ten of its measurements.

    PREFLIGHT_DATASETS=../shared/datasets .venv/bin/python bench/gpu_physics.py [--only NAME ...] [--family F]

Scenarios (each through ``evaluate.train_test``, the path of ``preflight evaluate --train --test``):
NeuSight's own (the A100 80GB from its five training GPUs), a generation held out (A100 40GB from
Pascal, Volta and Turing; V100 and T4 from Pascal), another vendor (AMD MI100 / MI210 from the NVIDIA
GPUs), DeepBench leaving one device out with 0 and 10 shots (compared on the same rows), GPPerf's
RTX 4070 from DeepBench's devices, and the project's own H100 and H200 sweeps (tensor cores) from every
public GPU, the H100 from its sibling, and new shapes on both. Per device (and operator): MAPE, median
APE, the 0.9 interval's coverage and width (high / low), and the plain roofline (the spec sheet's
limit) beside. Writes bench/out/gpu_physics.json.
"""

from __future__ import annotations

import argparse
import json
import time
import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
from preflight.data import sources
from preflight.data.catalogue import Catalogue
from preflight.data.settings import Settings
from preflight.models.core import evaluate
from preflight.models.core.datasets import load_source, register_measured_devices
from preflight.models.core.task import get_task

TASK = get_task("gemm")
SETTINGS = Settings()
CATALOGUE = Catalogue.load(SETTINGS.devices_file)
OUT = Path(__file__).parent / "out" / "gpu_physics.json"
PASCAL = ["Tesla P4", "Tesla P100-PCIE-16GB"]
OLDER = [*PASCAL, "Tesla V100-PCIE-32GB", "Tesla T4"]


def _rows(source: str, name: str | None = None) -> pd.DataFrame:
    """A public source's rows, or those of one of its files (NeuSight's ``name``)."""
    path = sources.default_path(source, SETTINGS.datasets)
    if path is None or SETTINGS.datasets is None:
        raise SystemExit(f"{source}: file not found; set PREFLIGHT_DATASETS to the datasets folder")
    if name is not None:
        path = path.parent / name
    return TASK.rows(load_source(source, path, SETTINGS, CATALOGUE, store=False)[0])


def _errors(estimate: np.ndarray, y: np.ndarray) -> dict:
    ape = np.abs(estimate - y) / y * 100
    return {"mape": float(ape.mean()), "median_ape": float(np.median(ape))}


def _scored(outcome: evaluate.Outcome, test: pd.DataFrame, by: list[str]) -> dict:
    """Per device (and ``by`` columns of the test rows): the model's and the plain roofline's errors,
    the interval's coverage and its median width (high / low)."""
    rows = test.iloc[outcome.test_index].reset_index(drop=True)
    plain = TASK.featurize(rows, CATALOGUE).reference["runtime_ms"].to_numpy()
    y = outcome.y["runtime_ms"].to_numpy()
    value, low, high = (getattr(outcome.model, s)["runtime_ms"].to_numpy() for s in ("value", "low", "high"))
    out = {}
    for key, part in rows.assign(device=outcome.groups.to_numpy()).groupby(["device", *by]):
        at = part.index.to_numpy()
        out[" / ".join(map(str, np.atleast_1d(key)))] = _entry(value[at], low[at], high[at], plain[at], y[at])
    return out


def _entry(value: np.ndarray, low: np.ndarray, high: np.ndarray, plain: np.ndarray, y: np.ndarray) -> dict:
    """Errors, the interval's coverage and median width, and the plain roofline's errors, on some rows."""
    return {
        "n": len(y),
        **_errors(value, y),
        "coverage": float(np.mean((y >= low) & (y <= high))),
        "width": float(np.median(high / low)),
        "plain roofline": _errors(plain, y),
    }


def _train_test(train: pd.DataFrame, test: pd.DataFrame, family: str, by: list[str], shots: int = 0) -> dict:
    outcome = evaluate.train_test(TASK, train, test, CATALOGUE, family, "shape", shots=shots)
    return _scored(outcome, test, by)


def neusight(family: str) -> dict[str, dict]:
    train, test = _rows("neusight"), _rows("neusight", "gemm_test.csv")
    both = pd.concat([train, test], ignore_index=True)
    amd = _rows("neusight", "amd_gemm.csv")
    a100_80 = test[test.device == "NVIDIA A100 80GB PCIe"]
    return {
        "A100 80GB from NeuSight's five GPUs": _train_test(train, a100_80, family, ["kernel"]),
        "A100 40GB from Pascal, Volta, Turing": _train_test(
            both[both.device.isin(OLDER)], both[both.device == "NVIDIA A100-PCIE-40GB"], family, ["kernel"]
        ),
        "V100 from Pascal": _train_test(
            both[both.device.isin(PASCAL)], both[both.device == "Tesla V100-PCIE-32GB"], family, ["kernel"]
        ),
        "T4 from Pascal": _train_test(
            both[both.device.isin(PASCAL)], both[both.device == "Tesla T4"], family, ["kernel"]
        ),
        "AMD MI100, MI210 from the NVIDIA GPUs": _train_test(both, amd, family, ["kernel"]),
    }


def deepbench(family: str) -> dict[str, dict]:
    """Each device left out: zero-shot on all its rows; 10 shots, and zero-shot again, on the rows not
    given as shots (so that the two compare on the same rows)."""
    rows = _rows("deepbench")
    out: dict[str, dict] = {name: {} for name in (DEEPBENCH, DEEPBENCH_REST, DEEPBENCH_SHOTS)}
    for device in sorted(rows["device"].unique()):
        held = (rows["device"] == device).to_numpy()
        train, test = rows[~held], rows[held].reset_index(drop=True)
        adapted = evaluate.train_test(TASK, train, test, CATALOGUE, family, "shape", shots=10)
        rest = test.iloc[adapted.test_index].reset_index(drop=True)
        out[DEEPBENCH] |= _train_test(train, test, family, [])
        out[DEEPBENCH_REST] |= _train_test(train, rest, family, [])
        out[DEEPBENCH_SHOTS] |= _scored(adapted, test, [])
    return out


def deepbench_draws(family: str, draws: int = 5) -> dict[str, dict]:
    """Each device left out, fitted once; 10 shots drawn ``draws`` times (seeds 0, 1, ...), each draw's
    adapted answers beside the zero-shot ones on the same rows (those not given): does ten shots' help
    hold in expectation, not only on the one draw ``deepbench`` makes?"""
    rows = _rows("deepbench")
    out: dict[str, dict] = {name: {} for name in (DRAWS_ZERO, DRAWS_SHOTS)}
    for device in sorted(rows["device"].unique()):
        held = (rows["device"] == device).to_numpy()
        train, test = (TASK.rows(part) for part in (rows[~held], rows[held].reset_index(drop=True)))
        for part in (train, test):
            register_measured_devices(TASK, part, CATALOGUE, persist=False)
        features, y = TASK.featurize(test, CATALOGUE), TASK.target_frame(test)
        known = TASK.featurize(train, CATALOGUE)
        predictor = evaluate._fit(TASK, family, known, TASK.target_frame(train), "shape", seed=0)
        zero, plain = predictor.predict(features), features.reference["runtime_ms"].to_numpy()
        for draw in range(draws):  # the shots ``evaluate --shots 10 --seed DRAW`` would draw
            shots = evaluate._shot_rows(features.meta[TASK.subject], 10, seed=draw)
            rest = np.setdiff1d(np.arange(len(test)), shots)
            adapted = predictor.adapted(features.take(shots), y.iloc[shots].reset_index(drop=True))
            measured, key = y["runtime_ms"].to_numpy()[rest], f"{device} / draw {draw}"
            for name, estimates in (
                (DRAWS_ZERO, zero.take(rest)),
                (DRAWS_SHOTS, adapted.predict(features.take(rest))),
            ):
                value, low, high = (
                    getattr(estimates, s)["runtime_ms"].to_numpy() for s in ("value", "low", "high")
                )
                out[name][key] = _entry(value, low, high, plain[rest], measured)
    return out


DRAWS_ZERO = "DeepBench, one device left out, 5 draws of 10 shots: zero-shot on the rows not given"
DRAWS_SHOTS = "DeepBench, one device left out, 5 draws of 10 shots: adapted"
DEEPBENCH = "DeepBench, one device left out"
DEEPBENCH_REST = "DeepBench, one device left out, the rows not given as shots"
DEEPBENCH_SHOTS = "DeepBench, one device left out, 10 shots"


#: The project's own sweeps (``data/local/gemm``): fp16, bf16 and tf32 on the tensor cores, fp64 on the
#: FP64 tensor cores, fp32 on the vector units, the same shapes on both.
H100, H200 = "nvidia-h100-sxm5-80gb", "nvidia-h200-sxm-141gb"


def _hopper_rows() -> tuple[pd.DataFrame, pd.DataFrame]:
    """The public GPUs' rows (none ran on a matrix unit) and the two Hopper sweeps."""
    local = _rows("local-gemm")
    public = pd.concat([_rows("deepbench"), _rows("neusight")], ignore_index=True)
    return public, local[local.device.isin([H100, H200])].reset_index(drop=True)


def hopper(family: str) -> dict[str, dict]:
    """The H100 and H200 sweeps from every public GPU; zero-shot and with 10 shots each, compared on
    the same rows."""
    public, hopper = _hopper_rows()
    adapted = evaluate.train_test(TASK, public, hopper, CATALOGUE, family, "shape", shots=10)
    rest = hopper.iloc[adapted.test_index].reset_index(drop=True)
    return {
        HOPPER: _train_test(public, hopper, family, ["dtype"]),
        HOPPER_REST: _train_test(public, rest, family, ["dtype"]),
        HOPPER_SHOTS: _scored(adapted, hopper, ["dtype"]),
    }


def hopper_sibling(family: str) -> dict[str, dict]:
    """The H100 with its sibling the H200 measured in training: a user's Hopper card that nobody here
    measured (an H100 PCIe, an H800) meets the model this way."""
    public, hopper = _hopper_rows()
    train = pd.concat([public, hopper[hopper.device == H200]], ignore_index=True)
    return {
        "H100 from the H200 and the public GPUs": _train_test(
            train, hopper[hopper.device == H100].reset_index(drop=True), family, ["dtype"]
        )
    }


def hopper_shapes(family: str) -> dict[str, dict]:
    """Both Hopper sweeps in training, a fifth of their (m, n, k) shapes held out (by a stable hash):
    how a measured device's new shapes fare."""
    public, hopper = _hopper_rows()
    shape = hopper.m.astype(str) + "x" + hopper.n.astype(str) + "x" + hopper.k.astype(str)
    held = shape.map(lambda text: zlib.crc32(text.encode()) % 5 == 0).to_numpy()
    train = pd.concat([public, hopper[~held]], ignore_index=True)
    return {
        "H100 and H200 in training, a fifth of their shapes held out": _train_test(
            train, hopper[held], family, ["dtype"]
        )
    }


HOPPER = "H100 and H200 tensor cores (own sweeps) from DeepBench and NeuSight"
HOPPER_REST = f"{HOPPER}, the rows not given as shots"
HOPPER_SHOTS = f"{HOPPER}, 10 shots each"


def rtx4070(family: str) -> dict[str, dict]:
    return {"RTX 4070 (GPPerf) from DeepBench": _train_test(_rows("deepbench"), _rows("gpperf"), family, [])}


SCENARIOS: dict[str, Callable[[str], dict[str, dict]]] = {
    "neusight": neusight,
    "deepbench": deepbench,
    "deepbench-draws": deepbench_draws,
    "rtx4070": rtx4070,
    "hopper": hopper,
    "hopper-sibling": hopper_sibling,
    "hopper-shapes": hopper_shapes,
}


def _print(name: str, result: dict, seconds: float) -> None:
    print(f"\n{name}  ({seconds:.0f} s)")
    head = ("n", "MAPE", "median", "cov", "width", "roofline")
    print(f"  {'device / op':48s} " + " ".join(f"{h:>{w}s}" for h, w in zip(head, (6, 6, 7, 5, 6, 15))))
    for key, e in result.items():
        roof = e["plain roofline"]
        print(
            f"  {key:48s} {e['n']:6d} {e['mape']:5.1f}% {e['median_ape']:6.1f}% {e['coverage']:5.2f} "
            f"{e['width']:5.2f}x {roof['mape']:6.1f}% / {roof['median_ape']:4.1f}%"
        )
    mean = {k: float(np.mean([e[k] for e in result.values()])) for k in ("mape", "median_ape", "coverage")}
    figures = f"{mean['mape']:5.1f}% {mean['median_ape']:6.1f}% {mean['coverage']:5.2f}"
    print(f"  {'mean over the rows above':55s} {figures}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", nargs="*", choices=list(SCENARIOS), default=list(SCENARIOS))
    parser.add_argument("--family", default=TASK.default_family, choices=TASK.families)
    args = parser.parse_args()
    results = json.loads(OUT.read_text()) if OUT.exists() else {}
    for scenario in args.only:
        start = time.perf_counter()
        for name, result in SCENARIOS[scenario](args.family).items():
            results.setdefault(args.family, {})[name] = result
            _print(name, result, time.perf_counter() - start)
        OUT.parent.mkdir(parents=True, exist_ok=True)
        OUT.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
