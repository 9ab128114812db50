"""One contract test for every family: fit is deterministic, state round-trips, outputs are sane."""

import numpy as np
import pandas as pd
import pytest
from preflight.data import sources
from preflight.models.families import FAMILIES, make_family
from preflight.models.families.targets import is_absolute
from preflight.models.task import get_task

from tests.conftest import synthetic_gemm
from tests.nas import write_hw_nas_bench


@pytest.fixture(scope="module")
def data(catalogue):
    rows = synthetic_gemm(300, seed=1, catalogue=catalogue)
    task = get_task("gemm")
    features = task.featurize(rows, catalogue)
    return features, rows[list(task.targets)]


@pytest.fixture(scope="module")
def nas_data(catalogue, tmp_path_factory):
    """NAS accuracy rows (darcy's score below zero, so an absolute target) from a HW-NAS-Bench-360-layout file."""
    task = get_task("nas-accuracy")
    rows = task.rows(
        sources.load("hw-nas-bench-360", write_hw_nas_bench(tmp_path_factory.mktemp("nas"), n=120)).rows
    )
    return task.featurize(rows, catalogue), rows[list(task.targets)]


#: Small settings for the slow families, so the contract test stays fast.
FAST = {"gnn": {"epochs": 20, "hidden": 16, "head_hidden": 32}}
CASES = [
    (task, name)
    for task in ("gemm", "nas-accuracy")
    for name in sorted({*get_task(task).families, get_task(task).baseline})
]


@pytest.mark.parametrize(("task", "name"), CASES)
def test_family_contract(task, name, request, tmp_path):
    """Every family of every task, on that task's data."""
    features, Y = request.getfixturevalue("data" if task == "gemm" else "nas_data")
    family = make_family(name, seed=3, **FAST.get(name, {}))
    assert not any(k.endswith("_") for k in vars(family)), "constructor stores hyperparameters only"
    first = family.fit(features, Y).predict(features)
    again = make_family(name, seed=3, **FAST.get(name, {})).fit(features, Y).predict(features)
    pd.testing.assert_frame_equal(first, again)
    assert list(first.columns) == list(Y.columns) and len(first) == len(Y)
    assert np.isfinite(first.to_numpy()).all()
    positive = [t for t in Y.columns if not is_absolute(t)]
    assert (first[positive].to_numpy() > 0).all()
    family.save(tmp_path / name)
    loaded = FAMILIES[name].load(tmp_path / name)
    np.testing.assert_allclose(loaded.predict(features), first)


def test_tree_beats_roofline_on_structured_data(data):
    features, Y = data
    train, test = np.arange(200), np.arange(200, 300)
    errors = {}
    for name in ("tree", "roofline"):
        family = make_family(name).fit(features.take(train), Y.iloc[train].reset_index(drop=True))
        pred = family.predict(features.take(test))["runtime_ms"].to_numpy()
        measured = Y["runtime_ms"].iloc[test].to_numpy()
        errors[name] = np.median(np.abs(pred - measured) / measured)
    assert errors["tree"] < errors["roofline"] / 2


def test_targets_missing_on_some_rows_train_on_the_rest(data):
    features, Y = data
    Y = Y.copy()
    Y.loc[::2, "power_w"] = np.nan
    family = make_family("tree").fit(features, Y)
    assert family.predict(features)["power_w"].notna().all()


def test_unknown_family_is_refused():
    with pytest.raises(ValueError, match="known families"):
        make_family("crystal-ball")
