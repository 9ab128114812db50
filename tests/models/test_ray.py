"""``RAY_ADDRESS``: a grouped cross-validation (of every task, on its sample data), and a predictor's
calibration folds, fanned out over a Ray cluster of two nodes (a head and a second node, separate
processes on this machine) give the serial run's answers, to the last bit."""

import json

import pandas as pd
import preflight
import pytest
from preflight.models.core.predictor import Predictor
from preflight.models.core.task import all_tasks, get_task
from preflight.models.presentation import analysis

from tests.conftest import synthetic_gemm
from tests.samples import sample_paths

ray = pytest.importorskip("ray", reason="Ray is installed with the dev extra")
cluster_utils = pytest.importorskip("ray.cluster_utils")
TASK = get_task("gemm")


@pytest.fixture(scope="module")
def two_nodes():
    """A head of one CPU and a second node of one CPU joined to it."""
    cluster = cluster_utils.Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    yield cluster.address
    ray.shutdown()
    cluster.shutdown()


def summary(rows, catalogue) -> str:
    evaluation = analysis.cross_validated(TASK, TASK.rows(rows), catalogue, "tree", "device", "synthetic")
    return json.dumps(evaluation.summary(by_group=True), sort_keys=True)


def test_a_grouped_evaluation_on_two_nodes_equals_the_serial_one(two_nodes, catalogue, monkeypatch):
    rows = synthetic_gemm(
        240, seed=3, devices=("NV_P100", "NV_1080Ti", "AMD_MI25", "NV_M40"), catalogue=catalogue
    )
    serial = summary(rows, catalogue)
    monkeypatch.setenv("RAY_ADDRESS", two_nodes)
    fanned = summary(rows, catalogue)
    assert fanned == serial
    assert sum(node["Alive"] for node in ray.nodes()) == 2


def test_a_predictor_calibrated_on_two_nodes_answers_as_the_serial_one(two_nodes, catalogue, monkeypatch):
    rows = TASK.rows(synthetic_gemm(200, seed=4, catalogue=catalogue))
    features, Y = TASK.featurize(rows, catalogue), TASK.target_frame(rows)

    def fitted() -> pd.DataFrame:
        predictor = Predictor(TASK, "tree").fit(features, Y, TASK.group_values(features.meta, "shape"))
        estimates = predictor.predict(features)
        return pd.concat([estimates.value, estimates.low.add_suffix("_low"), predictor.oof_], axis=1)

    serial = fitted()
    monkeypatch.setenv("RAY_ADDRESS", two_nodes)
    pd.testing.assert_frame_equal(fitted(), serial, check_exact=True)


@pytest.mark.parametrize("task", [t.name for t in all_tasks()])
def test_every_tasks_evaluation_on_two_nodes_equals_the_serial_one(task, two_nodes, tmp_path, monkeypatch):
    files = sample_paths(task, tmp_path / "samples")
    monkeypatch.setenv("PREFLIGHT_HOME", str(tmp_path / "home"))

    def evaluated() -> str:
        evaluation = preflight.evaluate(task, files=files, max_rows=300, home=tmp_path / "home")
        return json.dumps(evaluation.summary(), sort_keys=True)

    serial = evaluated()
    monkeypatch.setenv("RAY_ADDRESS", two_nodes)
    assert evaluated() == serial
