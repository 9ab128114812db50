import copy

import numpy as np
import pandas as pd
import pytest
from preflight.data.catalogue import KINDS, Catalogue
from preflight.data.gemm import BYTES_PER_ELEMENT, Dtype
from preflight.data.settings import Settings
from preflight.features.device import VENDORS
from preflight.models.core import artifacts
from preflight.models.core.datasets import task_data
from preflight.models.core.predictor import CODES, Estimates, Predictor
from preflight.models.core.task import get_task

from tests.conftest import synthetic_gemm
from tests.samples import sample_paths

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
    assert {"range:m_log2", "range:aspect_log2"} <= set(estimates.reasons[0])
    assert estimates.reasons[1] == ["unseen:device_id=nvidia-h100-sxm5-80gb"]
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
    assert predictor.predict(features.take(rest)).reasons[0] == ["unseen:device_id=nvidia-a100-sxm4-40gb"]
    assert adapted.predict(features.take(rest)).reasons[0] == []


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
    assert {"seen/*", "unseen/*", "seen/gpu", "unseen/gpu"} <= set(predictor.calibration_.calibrators)
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
        np.exp(predictor.calibration_.calibrator("runtime_ms", "seen", "gpu.library.small").quantile(0.9))
    )
    assert ratio[1] == pytest.approx(
        np.exp(predictor.calibration_.calibrator("runtime_ms", "unseen", "gpu.library.small").quantile(0.9))
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
    assert record["power_w"]["value"] is None and {"missing:power_w", "missing:energy_j"} <= set(
        record["warnings"]
    )
    assert "absent:kernel_block_m" in record["warnings"]
    assert predictor.explain("missing:power_w").startswith("no power_w estimate: the input lacks the scale")
    assert predictor.explain("absent:kernel_block_m") == "kernel_block_m never present in the training data"


def test_targets_a_seen_device_was_never_measured_for_are_named(fitted, catalogue):
    predictor, _, _ = fitted
    rows = synthetic_gemm(6, seed=4, devices=("NV_P100", "NV_M40"), catalogue=catalogue)
    features = TASK.featurize(rows, catalogue)
    p100 = catalogue.resolve("NV_P100").id
    only_p100 = copy.copy(predictor)
    only_p100.target_devices_ = {"runtime_ms": [p100]}
    reasons = only_p100.predict(features).reasons
    lacking = features.meta["device_id"] != p100
    assert [r for r, lacks in zip(reasons, lacking) if lacks] == [["unmeasured:runtime_ms"]] * int(
        lacking.sum()
    )
    assert [r for r, lacks in zip(reasons, lacking) if not lacks] == [[]] * int((~lacking).sum())
    m40 = features.meta["device_id"][lacking].iloc[0]
    only_p100.shots_ = {m40: {"runtime_ms": {}}}  # measured by the user since
    devices = features.meta["device_id"].to_numpy()
    assert all(r == [] for r in only_p100._reasons(features, devices, devices, ["runtime_ms"]))
    assert "device has no runtime_ms measurements" in predictor.explain("unmeasured:runtime_ms")


def test_records_hold_none_for_non_finite_estimates_and_say_which_are_missing():
    value = pd.DataFrame({"runtime_ms": [1.5, np.nan, 2.0], "power_w": [np.inf, np.nan, 3.0]})
    estimates = Estimates(
        value,
        value * 0.5,
        value * 2,
        reasons=[["range:m_log2"], [], []],
        notes=[["a note"], [], ["a note"]],
    )
    assert estimates.records() == [
        {
            "runtime_ms": {"value": 1.5, "low": 0.75, "high": 3.0},
            "power_w": {"value": None, "low": None, "high": None},
            "ood": True,
            "warnings": ["range:m_log2", "missing:power_w", "a note"],
        },
        {
            "runtime_ms": {"value": None, "low": None, "high": None},
            "power_w": {"value": None, "low": None, "high": None},
            "ood": False,
            "warnings": ["missing:runtime_ms", "missing:power_w"],
        },
        {
            "runtime_ms": {"value": 2.0, "low": 1.0, "high": 4.0},
            "power_w": {"value": 3.0, "low": 1.5, "high": 6.0},
            "ood": False,
            "warnings": ["a note"],
        },
    ]


def test_codes_are_documented_and_unknown_warnings_read_as_themselves(fitted):
    predictor, _, _ = fitted
    assert set(CODES) == {
        "unseen",
        "range",
        "absent",
        "unmeasured",
        "missing",
        "prior",
        "adapted",
        "exact",
        "ambiguous",
    }
    assert predictor.explain("power_w, energy_j: a task's note") == "power_w, energy_j: a task's note"


def test_gemm_features_looked_up_once_per_device_equal_the_row_by_row_ones(catalogue, tmp_path):
    """The featurizer resolves devices, peaks and dtypes once per distinct value (it did per row):
    on the sample sweep and varied rows, every column that reads them is bit for bit what it was."""
    paths = sample_paths("gemm", tmp_path)
    sample = task_data(TASK, Settings(home=tmp_path / "home"), catalogue, paths).rows
    varied = synthetic_gemm(300, seed=11, catalogue=catalogue).assign(
        dtype=np.resize(["fp32", "fp16", "bf16", "fp64", "int8"], 300), b=np.resize([1, 1, 8], 300)
    )
    for rows in (sample, varied, varied.head(1)):
        features = TASK.featurize(rows, catalogue)
        specs = [catalogue.resolve(str(d)) for d in rows["device"]]
        math = rows["math_dtype"].fillna(rows["dtype"]).astype(str) if "math_dtype" in rows else rows["dtype"]
        peaks = [s.gemm_peak(Dtype(d)) for s, d in zip(specs, math)]
        bandwidth = np.array([s.memory_bandwidth_gbs for s in specs], dtype=float) * 1e9
        b = rows["b"].fillna(1).to_numpy(dtype=float) if "b" in rows else np.ones(len(rows))
        m, n, k = (rows[c].to_numpy(dtype=float).astype(int) for c in ("m", "n", "k"))
        expected = {
            "ridge_log2": np.log2(np.array([p for p, _ in peaks]) * 1e12 / bandwidth),
            "peak_is_fallback": np.array([f for _, f in peaks], dtype=float),
            "element_bytes": np.array([BYTES_PER_ELEMENT[Dtype(d)] for d in rows["dtype"]], dtype=float),
            # the codes are floats in X's one block, as every family reads them
            "dtype": np.array([list(Dtype).index(Dtype(d)) for d in rows["dtype"]], dtype=float),
            "math_dtype": np.array([list(Dtype).index(Dtype(d)) for d in math], dtype=float),
            "device_kind": np.array([KINDS[s.kind].code for s in specs], dtype=float),
            "vendor": np.array([VENDORS.get(s.vendor, np.nan) for s in specs], dtype=float),
        }
        for column, values in expected.items():
            np.testing.assert_array_equal(features.X[column].to_numpy(), values, strict=True)
        assert list(features.meta["device_id"]) == [s.id for s in specs]
        assert list(features.meta["architecture"]) == [s.architecture or s.id for s in specs]
        assert list(features.meta["shape"]) == [
            f"{int(c)}x{a}x{bb}x{kk}" if c > 1 else f"{a}x{bb}x{kk}" for c, a, bb, kk in zip(b, m, n, k)
        ]
        tdp = np.array([np.nan if s.tdp_w is None else s.tdp_w for s in specs], dtype=float)
        np.testing.assert_array_equal(features.reference["power_w"].to_numpy(), tdp)
