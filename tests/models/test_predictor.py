import numpy as np
import pandas as pd
import pytest
from preflight.data.catalogue import Catalogue
from preflight.models import artifacts
from preflight.models.predictor import Predictor
from preflight.models.task import get_task

from tests.conftest import synthetic_gemm

TASK = get_task("gemm")


@pytest.fixture(scope="module")
def fitted(catalogue):
    rows = synthetic_gemm(400, seed=2, catalogue=catalogue)
    features = TASK.featurize(rows, catalogue)
    Y = rows[list(TASK.targets)]
    predictor = Predictor(TASK, "tree").fit(features, Y, TASK.group_values(features.meta, "shape"))
    return predictor, features, Y


def test_intervals_bracket_the_estimate_and_widen_with_coverage(fitted, catalogue):
    predictor, _, _ = fitted
    test = synthetic_gemm(200, seed=9, catalogue=catalogue)
    features = TASK.featurize(test, catalogue)
    narrow, wide = predictor.predict(features, 0.5), predictor.predict(features, 0.95)
    for target in TASK.targets:
        assert (narrow.low[target] <= narrow.value[target]).all() and (
            narrow.value[target] <= narrow.high[target]
        ).all()
        assert (wide.high[target] >= narrow.high[target]).all()
    inside = (test["runtime_ms"] >= wide.low["runtime_ms"]) & (test["runtime_ms"] <= wide.high["runtime_ms"])
    assert inside.mean() > 0.85


def test_out_of_distribution_inputs_say_why(fitted, catalogue):
    predictor, _, _ = fitted
    rows = pd.DataFrame(
        {
            "m": [2**20, 512],
            "n": [512, 512],
            "k": [512, 512],
            "dtype": "fp32",
            "trans_a": False,
            "trans_b": False,
            "device": ["NV_P100", "NVIDIA H100 80GB HBM3"],
        }
    )
    estimates = predictor.predict(TASK.featurize(rows, catalogue))
    assert any(r.startswith("aspect_log2=") for r in estimates.reasons[0])
    assert any("has no measurements" in r for r in estimates.reasons[1])
    record = estimates.records()[1]
    assert record["ood"] is True and set(record) >= {"runtime_ms", "power_w", "energy_j", "warnings"}


def test_shots_adapt_a_device_that_runs_slower_than_its_spec(fitted, catalogue):
    predictor, _, _ = fitted
    rows = synthetic_gemm(60, seed=5, devices=("NVIDIA A100-SXM4-40GB",), catalogue=catalogue)
    rows["runtime_ms"] *= 3.0  # the device underperforms its spec sheet threefold
    features, Y = TASK.featurize(rows, catalogue), rows[list(TASK.targets)]
    shots, rest = np.arange(10), np.arange(10, 60)

    def median_ape(p):
        pred = p.predict(features.take(rest)).value["runtime_ms"]
        return np.median(
            np.abs(pred - Y["runtime_ms"].iloc[rest].to_numpy()) / Y["runtime_ms"].iloc[rest].to_numpy()
        )

    before = median_ape(predictor)
    adapted = predictor.adapted(features.take(shots), Y.iloc[shots].reset_index(drop=True))
    assert median_ape(adapted) < before / 2
    assert median_ape(predictor) == before  # the original is untouched (requests in flight keep it)
    assert not any("has no measurements" in r for r in adapted.predict(features.take(rest)).reasons[0])


def test_measurements_of_a_target_the_model_lacks_are_ignored(catalogue):
    rows = synthetic_gemm(120, seed=7, catalogue=catalogue)
    features = TASK.featurize(rows, catalogue)
    runtime_only = rows[list(TASK.targets)].assign(power_w=np.nan, energy_j=np.nan)
    predictor = Predictor(TASK, "roofline").fit(
        features, runtime_only, TASK.group_values(features.meta, "shape")
    )
    shots = synthetic_gemm(10, seed=8, devices=("NV_P100",), catalogue=catalogue)
    adapted = predictor.adapted(TASK.featurize(shots, catalogue), shots[list(TASK.targets)])
    estimates = adapted.predict(TASK.featurize(shots, catalogue))
    assert adapted.targets == ["runtime_ms"]  # power and energy are derived from it, never learned
    assert list(estimates.value.columns) == ["runtime_ms", "power_w", "energy_j"]


def test_save_and_load_round_trip(fitted, catalogue, tmp_path):
    predictor, features, _ = fitted
    artifacts.save(predictor, tmp_path)
    loaded = artifacts.load(tmp_path)
    a, b = predictor.predict(features, 0.8), loaded.predict(features, 0.8)
    pd.testing.assert_frame_equal(a.value, b.value)
    pd.testing.assert_frame_equal(a.high, b.high)
    assert a.reasons == b.reasons
    target, value = "runtime_ms", a.value["runtime_ms"].to_numpy()
    np.testing.assert_array_equal(
        predictor.probability_above(features, target, value, value * 1.1),
        loaded.probability_above(features, target, value, value * 1.1),
    )


def test_a_predictor_saved_before_probabilities_still_loads_and_saves(fitted, tmp_path):
    """Saved before issue 5: |residuals| only. Intervals as before; saving it again works."""
    predictor, features, _ = fitted
    artifacts.save(predictor, tmp_path / "old")
    for name in ("residuals.npz", "estimates.npz"):
        (tmp_path / "old" / name).unlink()
    old = artifacts.load(tmp_path / "old")
    pd.testing.assert_frame_equal(old.predict(features, 0.8).high, predictor.predict(features, 0.8).high)
    artifacts.save(old, tmp_path / "again")
    pd.testing.assert_frame_equal(
        artifacts.load(tmp_path / "again").predict(features, 0.8).high, predictor.predict(features, 0.8).high
    )


def test_devices_known_only_by_spec_sheet_get_device_held_out_intervals(fitted, catalogue):
    predictor, _, _ = fitted
    assert {"seen/*", "unseen/*", "seen/plain", "unseen/plain"} <= set(predictor.calibration_.calibrators)
    rows = pd.DataFrame(
        {
            "m": [512, 512],
            "n": 512,
            "k": 512,
            "dtype": "fp32",
            "trans_a": False,
            "trans_b": False,
            "device": ["NV_P100", "NVIDIA H100 80GB HBM3"],
        }
    )
    estimates = predictor.predict(TASK.featurize(rows, catalogue), 0.9)
    ratio = (estimates.high["runtime_ms"] / estimates.value["runtime_ms"]).to_numpy()
    assert ratio[0] == pytest.approx(
        np.exp(predictor.calibration_.calibrator("runtime_ms", "seen", "plain").quantile(0.9))
    )
    assert ratio[1] == pytest.approx(
        np.exp(predictor.calibration_.calibrator("runtime_ms", "unseen", "plain").quantile(0.9))
    )


def test_missing_estimates_and_unseen_inputs_are_explained(fitted, catalogue):
    predictor, _, _ = fitted
    rows = pd.DataFrame(
        {
            "m": [512],
            "n": 512,
            "k": 512,
            "dtype": "fp32",
            "trans_a": False,
            "trans_b": False,
            "device": ["NV_P100"],
            "block_m": [128],
            "block_n": [128],
        }
    )
    spec = catalogue.resolve("NV_P100").model_copy(
        update={"id": "p100-no-tdp", "name": "P100 without TDP", "aliases": [], "tdp_w": None}
    )
    no_tdp = Catalogue([*catalogue, spec])
    estimates = predictor.predict(TASK.featurize(rows.assign(device="p100-no-tdp"), no_tdp))
    record = estimates.records()[0]
    assert record["power_w"]["value"] is None and any(
        w.startswith("no power_w estimate") for w in record["warnings"]
    )
    assert any(w.startswith("kernel_block_m=128 never present") for w in record["warnings"])
