"""``RAY_ADDRESS``: a grouped cross-validation (of every task, on its sample data), a predictor's
calibration folds and a file's batch scoring (Ray Data), fanned out over a Ray cluster of two nodes (a
head and a second node, separate processes on this machine) give the serial run's answers to 1e-9: the
same computations, whose float sums differ only in the last bits where a Ray task (one thread) and this
process (every core) split them differently. A fold whose worker is killed runs again, unchanged; so
does a collector's call (a learning curve, a GEMM point), written once."""

import json
import math
import os
import signal

import numpy as np
import pandas as pd
import preflight
import pytest
from preflight.data.collect import curves, gemm
from preflight.data.errors import DataError
from preflight.data.sources import local_gemm
from preflight.models.core import evaluate, parallel
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


def summary(rows, catalogue) -> dict:
    evaluation = analysis.cross_validated(TASK, TASK.rows(rows), catalogue, "tree", "device", "synthetic")
    return evaluation.summary(by_group=True)


def assert_same(found: object, expected: object, where: str = "") -> None:
    """Two ``evaluate --json`` objects alike: the same keys and texts, numbers within 1e-9."""
    if isinstance(expected, dict):
        assert isinstance(found, dict) and found.keys() == expected.keys(), where
        for key in expected:
            assert_same(found[key], expected[key], f"{where}.{key}")
    elif isinstance(expected, list):
        assert isinstance(found, list) and len(found) == len(expected), where
        for i, (a, b) in enumerate(zip(found, expected)):
            assert_same(a, b, f"{where}[{i}]")
    elif isinstance(expected, float) and isinstance(found, float):
        both_nan = math.isnan(found) and math.isnan(expected)
        assert both_nan or math.isclose(found, expected, rel_tol=1e-9, abs_tol=1e-12), where
    else:
        assert found == expected, where


def test_a_grouped_evaluation_on_two_nodes_equals_the_serial_one(two_nodes, catalogue, monkeypatch):
    rows = synthetic_gemm(
        240, seed=3, devices=("NV_P100", "NV_1080Ti", "AMD_MI25", "NV_M40"), catalogue=catalogue
    )
    serial = summary(rows, catalogue)
    monkeypatch.setenv("RAY_ADDRESS", two_nodes)
    assert_same(summary(rows, catalogue), serial)
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
    pd.testing.assert_frame_equal(fitted(), serial, check_exact=False, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("task", [t.name for t in all_tasks()])
def test_every_tasks_evaluation_on_two_nodes_equals_the_serial_one(task, two_nodes, tmp_path, monkeypatch):
    files = sample_paths(task, tmp_path / "samples")
    monkeypatch.setenv("PREFLIGHT_HOME", str(tmp_path / "home"))

    def evaluated() -> dict:
        evaluation = preflight.evaluate(task, files=files, max_rows=300, home=tmp_path / "home")
        return json.loads(json.dumps(evaluation.summary()))  # as `evaluate --json` prints it

    serial = evaluated()
    monkeypatch.setenv("RAY_ADDRESS", two_nodes)
    assert_same(evaluated(), serial)


def test_a_task_fans_out_in_turn_where_the_cluster_has_idle_cpus(two_nodes, monkeypatch):
    """One outer call on two CPUs: its own calls are Ray tasks of their own, not run inside it."""

    def _task_id(_: int) -> str | None:
        return ray.get_runtime_context().get_task_id()

    def _inner_task_ids(_: int) -> tuple[str | None, list[str | None]]:  # local: Ray pickles it by value
        return _task_id(0), parallel.fan_out(_task_id, [(0,), (1,)], "inner")

    monkeypatch.setenv("RAY_ADDRESS", two_nodes)
    [(outer, inner)] = parallel.fan_out(_inner_task_ids, [(0,)], "outer")
    assert outer is not None and None not in inner and outer not in inner and len(set(inner)) == 2
    both = parallel.fan_out(_inner_task_ids, [(0,), (1,)], "outer")
    assert all(set(inner) == {outer} for outer, inner in both)  # two outer calls fill both CPUs


def test_a_file_scored_by_ray_data_on_two_nodes_equals_the_serial_scoring(
    two_nodes, home, tmp_path, monkeypatch
):
    rng = np.random.default_rng(5)
    items = pd.DataFrame(
        {
            "id": np.arange(300),
            "m": 2 ** rng.integers(4, 13, 300),
            "n": 2 ** rng.integers(4, 13, 300),
            "k": 2 ** rng.integers(4, 13, 300),
            "dtype": rng.choice(["fp32", "fp16"], 300),
            "device": rng.choice(["Tesla T4", "NVIDIA H100 80GB HBM3"], 300),
        }
    )
    items.to_parquet(tmp_path / "items.parquet")
    serial = preflight.score(
        "gemm", tmp_path / "items.parquet", tmp_path / "serial.parquet", batch_rows=40, home=home
    )
    monkeypatch.setenv("RAY_ADDRESS", two_nodes)
    spread = preflight.score(
        "gemm", tmp_path / "items.parquet", tmp_path / "ray.parquet", batch_rows=40, home=home
    )
    assert spread.rows == serial.rows == 300
    pd.testing.assert_frame_equal(
        pd.read_parquet(spread.output), pd.read_parquet(serial.output), check_exact=False, rtol=1e-9
    )


def test_a_bad_row_scored_by_ray_data_is_named_by_its_row_in_the_file(two_nodes, home, tmp_path, monkeypatch):
    items = pd.DataFrame({"m": 64, "n": 64, "k": np.arange(1, 301), "dtype": "fp32", "device": "Tesla T4"})
    items.loc[213, "m"] = -4  # in the sixth batch of 40, the 14th row
    items.to_parquet(tmp_path / "items.parquet")
    monkeypatch.setenv("RAY_ADDRESS", two_nodes)
    with pytest.raises(
        DataError, match=r"row 213: m: .*greater than 0 \(1 problem in its batch of 40 rows\)"
    ):
        preflight.score(
            "gemm", tmp_path / "items.parquet", tmp_path / "out.parquet", batch_rows=40, home=home
        )
    assert not list(tmp_path.glob("out.parquet*"))


def test_a_fold_whose_worker_is_killed_runs_again_and_the_evaluation_is_unchanged(
    two_nodes, catalogue, tmp_path, monkeypatch
):
    """The first attempt of one fold kills its own Ray worker (as a lost node would); Ray runs it again."""
    rows = synthetic_gemm(160, seed=6, devices=("NV_P100", "NV_1080Ti", "AMD_MI25"), catalogue=catalogue)
    serial = summary(rows, catalogue)
    fold, killed = evaluate._fold, tmp_path / "killed"

    def killed_once(*args, **kwargs):
        if not killed.exists():
            killed.touch()
            os.kill(os.getpid(), signal.SIGKILL)
        return fold(*args, **kwargs)

    monkeypatch.setattr(evaluate, "_fold", killed_once)
    monkeypatch.setenv("RAY_ADDRESS", two_nodes)
    assert_same(summary(rows, catalogue), serial)
    assert killed.exists()


def killing_its_worker_once(worker: type, marker) -> type:
    """``worker`` whose first call anywhere kills its own process (as a lost node would)."""

    class Killed(worker):
        def run(self, call):
            if not marker.exists():
                marker.touch()
                os.kill(os.getpid(), signal.SIGKILL)
            return super().run(call)

    return Killed


def test_curves_trained_on_two_nodes_with_a_worker_killed_equal_the_serial_collection(
    two_nodes, tmp_path, monkeypatch
):
    serial = curves.collect_curves(tmp_path / "serial.csv", runs=4, epochs=2, progress=False)
    monkeypatch.setattr(curves, "Trainer", killing_its_worker_once(curves.Trainer, tmp_path / "killed"))
    monkeypatch.setenv("RAY_ADDRESS", two_nodes)
    spread = curves.collect_curves(tmp_path / "ray.csv", runs=4, epochs=2, progress=False)
    assert (tmp_path / "killed").exists() and spread.trained == serial.trained == 4
    timed = ["epoch_seconds", "collected_at"]  # the only cells that depend on when and where
    found, expected = (
        pd.read_csv(summary.path).drop(columns=timed).sort_values(["run", "epoch"], ignore_index=True)
        for summary in (spread, serial)
    )
    pd.testing.assert_frame_equal(found, expected)


def test_a_gemm_sweep_per_node_with_a_worker_killed_measures_each_point_once(
    two_nodes, tmp_path, monkeypatch
):
    """Two nodes of one machine: two sweeps of its CPU (seeds 0 and 1), one file each in one folder,
    which a longer rerun extends."""
    monkeypatch.setattr(gemm, "Sweeper", killing_its_worker_once(gemm.Sweeper, tmp_path / "killed"))
    monkeypatch.setenv("RAY_ADDRESS", two_nodes)
    dims = (1, 16, 24, 48)
    summary = gemm.collect_gemm(
        "cpu", tmp_path / "fleet", points=5, threads=1, repeats=3, power=False, progress=False, dims=dims
    )
    assert (tmp_path / "killed").exists() and summary.measured == 10
    loaded = local_gemm.load(tmp_path / "fleet")
    assert len(loaded.rows) == 10 and len(loaded.rejects) == 0
    for seed in (0, 1):
        [path] = (tmp_path / "fleet").glob(f"*_seed{seed}.csv")
        raw = pd.read_csv(path)
        measured = set(raw[["m", "n", "k", "dtype", "trans_a", "trans_b"]].itertuples(index=False, name=None))
        planned = gemm.sweep(5, seed, gemm.DTYPES["cpu"], dims)
        assert len(raw) == 5 and measured == {(p.m, p.n, p.k, p.dtype, p.trans_a, p.trans_b) for p in planned}
    resumed = gemm.collect_gemm(
        "cpu", tmp_path / "fleet", points=6, threads=1, repeats=3, power=False, progress=False, dims=dims
    )
    assert (resumed.measured, resumed.skipped_existing) == (2, 10)
