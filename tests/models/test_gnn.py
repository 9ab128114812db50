"""The GNN family learns from the op graph itself: seeded, saved and loaded exactly, weighted,
multi-target."""

import numpy as np
import pandas as pd
import pytest
from preflight.data.errors import UsageError
from preflight.features import Features, Graphs
from preflight.features.arch import architecture_in_context
from preflight.models.core.targets import Target
from preflight.models.families.gnn import GnnFamily
from scipy.stats import kendalltau

NB201_OPS = ("none", "skip_connect", "nor_conv_1x1", "nor_conv_3x3", "avg_pool_3x3")
TARGETS = {"accuracy": Target("fraction", "identity", upper=1.0), "latency_ms": Target("ms")}
FAST = {"targets": TARGETS, "epochs": 40, "batch_size": 64, "hidden_channels": 32, "head_hidden": 64}


def nb201_rows(n: int, seed: int) -> pd.DataFrame:
    """Distinct NAS-Bench-201 cells whose accuracy and latency follow the graph: 3x3 convs help accuracy
    and cost time, and a cell whose output the input cannot reach (``none`` on every path) loses accuracy."""
    rng = np.random.default_rng(seed)
    cells: dict[str, tuple[int, int, bool]] = {}
    while len(cells) < n:
        ops = rng.choice(NB201_OPS, 6)  # edges 0->1, 0->2, 1->2, 0->3, 1->3, 2->3
        edges = [(0, 1), (0, 2), (1, 2), (0, 3), (1, 3), (2, 3)]
        reached = {0}
        for (a, b), op in zip(edges, ops):
            if a in reached and op != "none":
                reached.add(b)
        arch = "|{}~0|+|{}~0|{}~1|+|{}~0|{}~1|{}~2|".format(*ops)
        cells[arch] = (
            int((ops == "nor_conv_3x3").sum()),
            int((ops == "nor_conv_1x1").sum()),
            3 not in reached,
        )
    conv3, conv1, cut = (np.array(v) for v in zip(*cells.values()))
    return pd.DataFrame(
        {
            "space": "nb201",
            "arch": list(cells),
            "dataset": "cifar10",
            "device": "1080ti",
            "batch_size": 1,
            "accuracy": 0.5 + 0.05 * conv3 - 0.1 * cut + rng.normal(0, 0.01, n),
            "latency_ms": (1.0 + 0.5 * conv3 + 0.2 * conv1) * rng.lognormal(0, 0.02, n),
        }
    )


@pytest.fixture(scope="module")
def data(catalogue):
    rows = nb201_rows(200, seed=0)
    return architecture_in_context(rows, catalogue), rows[["accuracy", "latency_ms"]]


@pytest.fixture(scope="module")
def fitted(data):
    features, Y = data
    train = np.arange(150)
    return GnnFamily(seed=1, **FAST).fit(features.take(train), Y.iloc[train].reset_index(drop=True))


def test_two_fits_agree_and_a_saved_model_predicts_the_same(data, fitted, tmp_path):
    features, Y = data
    assert not any(k.endswith("_") for k in vars(GnnFamily(targets=TARGETS))), (
        "constructor stores hyperparameters only"
    )
    train = np.arange(150)
    again = GnnFamily(seed=1, **FAST).fit(features.take(train), Y.iloc[train].reset_index(drop=True))
    first = fitted.predict(features)
    pd.testing.assert_frame_equal(first, again.predict(features))
    assert list(first.columns) == ["accuracy", "latency_ms"] and first.index.equals(features.X.index)
    fitted.save(tmp_path / "gnn")
    loaded = GnnFamily.load(tmp_path / "gnn")
    assert loaded.get_params() == fitted.get_params()
    np.testing.assert_allclose(loaded.predict(features), first)


def test_it_learns_the_architecture_from_the_graph(data, fitted):
    features, Y = data
    test = np.arange(150, 200)
    predicted, measured = fitted.predict(features.take(test)), Y.iloc[test].reset_index(drop=True)
    assert kendalltau(predicted["accuracy"], measured["accuracy"])[0] > 0.6
    error = np.abs(np.log(predicted["latency_ms"] / measured["latency_ms"])).mean()
    baseline = np.abs(np.log(measured["latency_ms"]) - np.log(Y["latency_ms"].iloc[:150]).mean()).mean()
    assert error < baseline / 3


def test_sample_weight_pulls_the_fit_toward_weighted_rows(data):
    features, Y = data
    train, shots = np.arange(150), np.arange(5)
    Y = Y.iloc[train].reset_index(drop=True)
    Y.loc[shots, "accuracy"] += 0.3  # a handful of rows the unweighted fit treats as outliers
    weight = np.ones(len(train))
    weight[shots] = 20.0
    plain = GnnFamily(seed=1, **FAST).fit(features.take(train), Y)
    weighted = GnnFamily(seed=1, **FAST).fit(features.take(train), Y, sample_weight=weight)
    measured = Y["accuracy"].iloc[shots].to_numpy()

    def error(family: GnnFamily) -> float:
        return np.abs(family.predict(features.take(shots))["accuracy"] - measured).mean()

    assert error(weighted) < 0.75 * error(plain)


def test_a_target_missing_on_some_rows_trains_on_the_rest(data):
    features, Y = data
    Y = Y.copy()
    Y.loc[::2, "latency_ms"] = np.nan
    Y.loc[1::4, "accuracy"] = np.nan
    predicted = GnnFamily(**FAST | {"epochs": 5}).fit(features, Y).predict(features)
    assert predicted.notna().all().all() and (predicted["latency_ms"] > 0).all()


def test_scores_below_zero_are_learned_as_they_are(data):
    features, Y = data
    Y = Y[["accuracy"]] - 1.0  # a regression benchmark's score: every value negative
    predicted = GnnFamily(**FAST | {"epochs": 5}).fit(features, Y).predict(features)
    assert list(predicted.columns) == ["accuracy"]
    assert np.isfinite(predicted["accuracy"]).all() and (predicted["accuracy"] < 0).mean() > 0.9


def test_features_without_graphs_are_refused(data):
    features, Y = data
    flat = Features(features.X, features.reference, features.meta)
    with pytest.raises(UsageError, match="needs graphs"):
        GnnFamily(targets=TARGETS, epochs=1).fit(flat, Y)


def test_any_graph_is_learned_not_only_architectures():
    """Graphs that no NAS notation made (a chain of n nodes, one feature channel): the GNN learns their
    size."""
    sizes = np.arange(2, 42)
    graphs = Graphs(
        list(sizes),
        np.arange(len(sizes)),
        lambda n: (
            np.ones((n, 1), np.float32),
            np.array([np.arange(n - 1), np.arange(1, n)], dtype=np.int64),
        ),
    )
    frame = pd.DataFrame(index=range(len(sizes)))
    features = Features(
        frame.assign(ctx_bias=1.0), pd.DataFrame({"latency_ms": np.nan}, index=frame.index), frame, graphs
    )
    Y = pd.DataFrame({"latency_ms": sizes * 0.5})
    family = GnnFamily(targets={"latency_ms": Target("ms")}, epochs=150, hidden_channels=16, head_hidden=16)
    predicted = family.fit(features, Y).predict(features)["latency_ms"]
    assert family.in_channels_ == 1
    assert kendalltau(predicted, Y["latency_ms"]).statistic > 0.9
