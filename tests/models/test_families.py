"""One contract test for every family of every registered task, on that task's sample data: fit is
deterministic, state round-trips, outputs are sane, and the whole predictor (calibration, envelope)
saves and loads."""

import threading
from dataclasses import replace

import lightgbm as lgb
import numpy as np
import pandas as pd
import pytest
from preflight.data.errors import ModelStateError, UsageError
from preflight.data.settings import Settings
from preflight.models.core import artifacts
from preflight.models.core.datasets import task_data
from preflight.models.core.predictor import Predictor
from preflight.models.core.task import all_tasks, get_task
from preflight.models.families import FAMILIES, make_family, tree

from tests.conftest import synthetic_gemm
from tests.samples import sample_paths

GEMM = get_task("gemm")


@pytest.fixture(scope="module")
def data(catalogue):
    rows = synthetic_gemm(300, seed=1, catalogue=catalogue)
    return GEMM.featurize(rows, catalogue), GEMM.target_frame(rows)


@pytest.fixture(scope="module")
def samples(catalogue, tmp_path_factory):
    """Each task's features and targets from its sample files, at most 600 rows (seeded)."""
    out, settings = {}, Settings(home=tmp_path_factory.mktemp("home"))
    for task in all_tasks():
        paths = sample_paths(task.name, tmp_path_factory.mktemp(task.name))
        rows = task_data(task, settings, catalogue, paths).rows
        rows = rows.sample(min(len(rows), 600), random_state=0).reset_index(drop=True)
        # the targets a family learns, as the predictor hands them over (not those derived from them)
        out[task.name] = task.featurize(rows, catalogue), task.target_frame(rows)[task.learned_targets]
    return out


#: Small settings for the slow families, so the contract test stays fast.
FAST = {
    "gnn": {"epochs": 10, "hidden_channels": 16, "head_hidden": 32},
    "transformer": {"epochs": 10, "d_model": 16},
}
CASES = [(task.name, name) for task in all_tasks() for name in sorted({*task.families, task.baseline})]


@pytest.mark.parametrize(("task_name", "name"), CASES)
def test_family_contract(task_name, name, samples, tmp_path):
    """Every family of every task, on that task's data."""
    task = get_task(task_name)
    features, Y = samples[task_name]
    family = make_family(name, task.targets, seed=3, **FAST.get(name, {}))
    assert not any(k.endswith("_") for k in vars(family)), "constructor stores hyperparameters only"
    first = family.fit(features, Y).predict(features)
    again = make_family(name, task.targets, seed=3, **FAST.get(name, {})).fit(features, Y).predict(features)
    pd.testing.assert_frame_equal(first, again)
    learned = [t for t in Y.columns if task.targets[t].present(Y[t]).sum() >= 2]
    assert list(first.columns) == learned and len(first) == len(Y)
    assert np.isfinite(first.to_numpy()).all()
    positive = [t for t in learned if task.targets[t].scale == "log"]
    assert (first[positive].to_numpy() > 0).all()
    family.save(tmp_path / name)
    loaded = FAMILIES[name].load(tmp_path / name)
    np.testing.assert_allclose(loaded.predict(features), first)


@pytest.mark.parametrize(("task_name", "name"), CASES)
def test_predictor_contract(task_name, name, samples, tmp_path):
    """The family inside a calibrated predictor: intervals bracket estimates, and it saves and loads."""
    task = get_task(task_name)
    features, Y = samples[task_name]
    groups = task.group_values(features.meta, task.group_key)
    predictor = Predictor(task, name, params=FAST.get(name)).fit(features, Y, groups)
    estimates = predictor.predict(features, 0.8)
    for target in estimates.value.columns:
        known = estimates.value[target].notna()  # no estimate where a row lacks its scale (a CPU's TDP)
        assert (estimates.low[target][known] <= estimates.value[target][known] + 1e-9).all()
        assert (estimates.value[target][known] <= estimates.high[target][known] + 1e-9).all()
    artifacts.save(predictor, tmp_path)
    loaded = artifacts.load(tmp_path).predict(features, 0.8)
    pd.testing.assert_frame_equal(loaded.high, estimates.high)


def test_tree_beats_roofline_on_structured_data(data):
    features, Y = data
    train, test = np.arange(200), np.arange(200, 300)
    errors = {}
    for name in ("tree", "roofline"):
        family = make_family(name, GEMM.targets).fit(
            features.take(train), Y.iloc[train].reset_index(drop=True)
        )
        pred = family.predict(features.take(test))["runtime_ms"].to_numpy()
        measured = Y["runtime_ms"].iloc[test].to_numpy()
        errors[name] = np.median(np.abs(pred - measured) / measured)
    assert errors["tree"] < errors["roofline"] / 2


def test_targets_missing_on_some_rows_train_on_the_rest(data):
    features, Y = data
    Y = Y.copy()
    Y.loc[::2, "power_w"] = np.nan
    family = make_family("tree", GEMM.targets).fit(features, Y)
    assert family.predict(features)["power_w"].notna().all()


def test_unknown_family_is_refused():
    with pytest.raises(UsageError, match="known families"):
        make_family("crystal-ball", GEMM.targets)


def test_a_tree_trained_on_features_no_longer_computed_asks_to_be_retrained(data):
    features, Y = data
    family = make_family("tree", GEMM.targets).fit(features, Y)
    with pytest.raises(ModelStateError, match="retrain"):
        family.predict(replace(features, X=features.X.drop(columns=features.X.columns[0])))


TREE_TASKS = [task.name for task in all_tasks() if "tree" in task.families]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """Compiled boosters go to the cache of a home of the test's, never to XDG_CACHE_HOME."""
    monkeypatch.setenv("PREFLIGHT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    yield tmp_path / "home" / "cache" / "trees"
    assert not (tmp_path / "xdg").exists()


def small_tree(task_name: str, samples, tmp_path) -> tuple[tree.TreeFamily, np.ndarray]:
    """A small tree family fitted on a task's sample data, saved and loaded, and its input matrix."""
    features, Y = samples[task_name]
    make_family("tree", get_task(task_name).targets, n_estimators=20).fit(features, Y).save(tmp_path / "tree")
    loaded = tree.TreeFamily.load(tmp_path / "tree")
    return loaded, features.X[loaded.columns_].to_numpy(dtype=float)


@pytest.mark.parametrize("task_name", TREE_TASKS)
def test_compiled_boosters_predict_as_lightgbm_does(task_name, samples, cache, tmp_path):
    pytest.importorskip("lleaves")
    family, matrix = small_tree(task_name, samples, tmp_path)
    features = samples[task_name][0]
    before = family.predict(features)
    family.compile(matrix)
    assert set(family.compiled_) == set(family.boosters_)  # every objective of every task (binary: valid)
    for name, booster in family.boosters_.items():
        expected = booster.predict(matrix, num_threads=1)
        np.testing.assert_allclose(family.compiled_[name].predict(matrix, n_jobs=1), expected, rtol=1e-9)
    pd.testing.assert_frame_equal(family.predict(features), before, rtol=1e-9)
    assert len(list(cache.glob("*.o"))) == len(family.boosters_)  # a second load takes them from here


def test_a_loaded_family_compiles_once_it_has_predicted_enough_rows(samples, cache, tmp_path, monkeypatch):
    pytest.importorskip("lleaves")
    monkeypatch.setattr(tree, "COMPILE_AFTER_ROWS", 100)
    family, _ = small_tree("gemm", samples, tmp_path)
    features = samples["gemm"][0]
    family.predict(features.take(np.arange(60)))
    assert family.rows_until_compile_ == 40 and not family.compiled_
    family.predict(features.take(np.arange(60)))
    for thread in threading.enumerate():
        if thread.name == "preflight-compile":
            thread.join()
    assert family.rows_until_compile_ is None and set(family.compiled_) == set(family.boosters_)
    fitted = make_family("tree", GEMM.targets, n_estimators=20).fit(*samples["gemm"])
    assert fitted.rows_until_compile_ is None  # a fresh fit never compiles


def test_a_family_whose_boosters_the_cache_holds_compiles_before_the_rows_that_trigger_it(
    samples, cache, tmp_path, monkeypatch
):
    """Loading a cached object file takes milliseconds: the rows that reach ``COMPILE_AFTER_ROWS`` are
    predicted compiled, with no thread; the check against LightGBM reads ``COMPILE_CHECK_ROWS`` rows."""
    pytest.importorskip("lleaves")
    monkeypatch.setattr(tree, "COMPILE_AFTER_ROWS", 50)
    monkeypatch.setattr(tree, "COMPILE_CHECK_ROWS", 7)
    first, matrix = small_tree("gemm", samples, tmp_path)
    first.compile(matrix)  # fills the cache
    family = tree.TreeFamily.load(tmp_path / "tree")
    assert all(tree.is_cached(booster) for booster in family.boosters_.values())
    checked: list[int] = []
    predict = lgb.Booster.predict
    monkeypatch.setattr(
        lgb.Booster, "predict", lambda self, X, **kw: checked.append(len(X)) or predict(self, X, **kw)
    )
    features = samples["gemm"][0].take(np.arange(60))
    estimates = family.predict(features)
    assert set(family.compiled_) == set(family.boosters_) and family.rows_until_compile_ is None
    assert "preflight-compile" not in {thread.name for thread in threading.enumerate()}
    assert checked == [7] * len(family.boosters_)  # the check only: the 60 rows were predicted compiled
    pd.testing.assert_frame_equal(estimates, first.predict(features), rtol=1e-9)


def test_a_booster_that_cannot_be_compiled_predicts_through_lightgbm(
    samples, cache, tmp_path, monkeypatch, caplog
):
    lleaves = pytest.importorskip("lleaves")

    def broken(*args, **kwargs):
        raise RuntimeError("no LLVM here")

    monkeypatch.setattr(lleaves.Model, "compile", broken)
    family, matrix = small_tree("gemm", samples, tmp_path)
    expected = family.predict(samples["gemm"][0])
    family.compile(matrix)
    assert family.compiled_ == {}
    assert [r.message for r in caplog.records] == [
        "a booster was not compiled; LightGBM predicts (RuntimeError: no LLVM here)"
    ]
    pd.testing.assert_frame_equal(family.predict(samples["gemm"][0]), expected)
