import numpy as np
from preflight.models.core import evaluate
from preflight.models.core.task import get_task
from preflight.models.presentation import analysis

from tests.conftest import synthetic_gemm

TASK = get_task("gemm")


def test_leave_one_device_out_reports_each_device_and_the_baseline(catalogue):
    rows = synthetic_gemm(
        240, seed=3, devices=("NV_P100", "NV_1080Ti", "AMD_MI25", "NV_M40"), catalogue=catalogue
    )
    evaluation = analysis.cross_validated(TASK, TASK.rows(rows), catalogue, "tree", "device", "synthetic")
    report = evaluation.summary(by_group=True)
    per_device = report["metrics"]["runtime_ms"]
    assert len(per_device) == 5 and "mean" in per_device
    assert report["n_test"] == 240 and report["baseline"]["name"] == "roofline"
    assert per_device["mean"]["coverage"] >= 0.7  # nominal 0.9, four held-out devices
    assert (
        per_device["mean"]["median_ape"] < report["baseline"]["metrics"]["runtime_ms"]["mean"]["median_ape"]
    )


def test_train_size_draws_groups_and_tests_on_the_rest(catalogue):
    rows = synthetic_gemm(200, seed=4, catalogue=catalogue)
    outcome = evaluate.cross_validate(TASK, rows, catalogue, "roofline", "shape", seed=1, train_size=10)
    features = TASK.featurize(rows, catalogue)
    test_shapes = set(features.meta["shape"].iloc[outcome.test_index])
    assert len(set(features.meta["shape"])) - len(test_shapes) == 10


def test_shots_are_taken_out_of_the_test_rows(catalogue):
    train = synthetic_gemm(200, seed=5, devices=("NV_P100", "NV_1080Ti"), catalogue=catalogue)
    test = synthetic_gemm(80, seed=6, devices=("AMD_MI25", "NV_M40"), catalogue=catalogue)
    evaluation = analysis.train_tested(TASK, train, test, catalogue, "tree", "device", "synthetic", shots=10)
    assert len(evaluation.outcome.y) == len(evaluation.inputs) == 80 - 2 * 10
    report = evaluation.summary()  # with shots: by device
    assert set(report["metrics"]["runtime_ms"]) == {"mean", "amd-radeon-instinct-mi25", "nvidia-tesla-m40"}
    assert np.isfinite(report["metrics"]["runtime_ms"]["mean"]["mape"])
