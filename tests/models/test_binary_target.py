"""A binary target (an event: a design fits its board): probabilities from every family, recalibrated
monotonically on out-of-fold estimates, a Wilson interval, and AUC and accuracy as its metrics."""

import numpy as np
import pandas as pd
import pytest
from preflight.features import Features
from preflight.models.core import metrics
from preflight.models.core.conformal import Conformal
from preflight.models.core.targets import Target
from preflight.models.families import make_family

VALID = Target("probability", "binary", lower=0.0, upper=1.0)


def test_a_binary_target_is_a_probability():
    with pytest.raises(ValueError, match="lower=0, upper=1"):
        Target("probability", "binary")
    assert VALID.present(np.array([0, 1, 0.3, 2, np.nan])).tolist() == [True, True, True, False, False]


def test_recalibration_keeps_the_order_and_fixes_the_rate():
    rng = np.random.default_rng(0)
    truth = rng.uniform(0, 1, 4000)
    y = (rng.uniform(0, 1, 4000) < truth).astype(float)
    overconfident = np.clip(truth**3, 1e-3, 1 - 1e-3)  # says 0.1 where the rate is ~0.46
    calibrator = Conformal(VALID).conformalize(y, overconfident)
    fixed = calibrator.recalibrated(np.array([0.001, 0.1, 0.5, 0.9]))
    assert np.all(np.diff(fixed) > 0)
    assert abs(fixed[1] - 0.1 ** (1 / 3)) < 0.08
    low, high = calibrator.interval(fixed, 0.9)
    assert np.all((low <= fixed) & (fixed <= high)) and np.all((high - low) < 0.2)
    wider_low, wider_high = calibrator.interval(fixed, 0.99)
    assert np.all(wider_high - wider_low > high - low)


def test_classification_metrics():
    y, p = np.array([0, 0, 1, 1]), np.array([0.1, 0.6, 0.4, 0.9])
    out = metrics.classification(y, p)
    assert out["auc"] == 0.75 and out["accuracy"] == 0.5 and out["n"] == 4
    assert "auc" not in metrics.classification(np.ones(3), np.array([0.2, 0.5, 0.9]))  # one outcome only


@pytest.mark.parametrize("family", ["tree", "linear"])
def test_families_predict_probabilities_that_rank_the_event(family):
    rng = np.random.default_rng(1)
    X = pd.DataFrame({"a": rng.normal(size=600), "b": rng.normal(size=600)})
    Y = pd.DataFrame({"valid": (X["a"] + 0.3 * rng.normal(size=600) > 0).astype(float)})
    features = Features(X, pd.DataFrame({"valid": np.nan}, index=X.index), pd.DataFrame(index=X.index))
    model = make_family(family, {"valid": VALID}, seed=0).fit(features.take(range(400)), Y.iloc[:400])
    p = model.predict(features.take(range(400, 600)))["valid"].to_numpy()
    assert np.all((p >= 0) & (p <= 1))
    assert metrics.classification(Y["valid"].iloc[400:].to_numpy(), p)["auc"] > 0.9
