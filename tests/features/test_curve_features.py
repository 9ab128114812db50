"""Learning-curve features: the parametric extrapolations recover curves of their own form."""

import numpy as np
import pandas as pd
import pytest
from preflight.features.curve import extrapolate, partial_curve, stratum

EPOCHS = np.arange(1.0, 11.0)


@pytest.mark.parametrize(
    ("model", "curve", "budget"),
    [
        ("pow3", lambda x: 0.9 - 0.5 * x**-0.7, 50),
        ("exp3", lambda x: 0.8 - 0.6 * np.exp(-0.3 * x), 40),
        ("logpower", lambda x: 0.95 / (1 + (x / 3.0) ** -1.5), 30),
    ],
)
def test_each_model_extrapolates_a_curve_of_its_own_form(model, curve, budget):
    fits = extrapolate(EPOCHS, curve(EPOCHS), budget)
    assert fits[model] == pytest.approx(curve(float(budget)), abs=0.01)


def test_a_curve_too_short_to_fit_falls_back_to_its_last_value():
    row = partial_curve(
        pd.DataFrame(
            {
                "curve": [[0.2, 0.5]],
                "budget": [20],
                "space": ["nb201"],
                "dataset": ["digits"],
                "arch": ["|none~0|+|none~0|none~1|+|none~0|none~1|none~2|"],
            }
        ),
        None,
    ).X.iloc[0]
    assert np.isnan(row["curve_fit_pow3"]) and row["curve_fit_ensemble"] == 0.5
    assert row["curve_slope"] == pytest.approx(0.3) and row["curve_fraction"] == 0.1


def test_irregular_epochs_are_read_as_given():
    rows = pd.DataFrame(
        {
            "curve": [[0.3, 0.5, 0.6]],
            "epochs": [[2, 4, 8]],
            "budget": [16],
            "space": ["nb201"],
            "dataset": ["cifar10"],
            "arch": ["|none~0|+|none~0|none~1|+|none~0|none~1|none~2|"],
        }
    )
    features = partial_curve(rows, None)
    row = features.X.iloc[0]
    assert (
        row["curve_last_epoch"] == 8
        and row["curve_fraction"] == 0.5
        and row["curve_slope"] == pytest.approx(0.025)
    )
    assert 0.6 <= row["curve_fit_ensemble"] <= 1 and features.reference["accuracy"].iloc[0] == 0.6
    assert features.meta["stratum"].iloc[0] == "cifar10|<=50%|<0.8"


def test_strata_bin_the_share_trained_and_the_level_reached():
    labels = stratum(np.array(["digits"] * 3), np.array([0.05, 0.25, 0.9]), np.array([0.1, 0.8, 0.99]))
    assert list(labels) == ["digits|<=10%|<0.3", "digits|<=25%|<0.95", "digits|<100%|>=0.95"]
