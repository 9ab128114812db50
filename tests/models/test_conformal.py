import math

import numpy as np
import pytest
from preflight.data.errors import UsageError
from preflight.models.core.conformal import Conformal, NotConformalized
from preflight.models.core.targets import Target
from scipy import stats

TARGETS = {"runtime_ms": Target("ms"), "accuracy": Target("fraction", "identity", upper=1.0)}


def _relative_errors(rng, n):
    y_pred = rng.lognormal(0, 1, n)
    return y_pred * rng.lognormal(0, 0.3, n), y_pred


def _absolute_errors(rng, n):
    y_pred = rng.normal(0.5, 0.5, n)  # a score that goes below zero
    return y_pred + rng.normal(0, 0.1, n), y_pred


@pytest.mark.parametrize(
    ("target", "draw"), [("runtime_ms", _relative_errors), ("accuracy", _absolute_errors)]
)
def test_coverage_is_valid_over_many_splits(target, draw):
    """Mean coverage lies in [c, c + 1/(n+1)] up to sampling error (t-test, Bonferroni over coverages)."""
    rng = np.random.default_rng(0)
    n_cal, n_test, trials = 200, 500, 40
    for coverage in (0.8, 0.9):
        observed = []
        for _ in range(trials):
            y, y_pred = draw(rng, n_cal + n_test)
            calibrator = Conformal(TARGETS[target]).conformalize(y[:n_cal], y_pred[:n_cal])
            low, high = calibrator.interval(y_pred[n_cal:], coverage)
            observed.append(np.mean((y[n_cal:] >= low) & (y[n_cal:] <= high)))
        upper = coverage + 1 / (n_cal + 1)
        below = stats.ttest_1samp(observed, coverage, alternative="less").pvalue
        above = stats.ttest_1samp(observed, upper, alternative="greater").pvalue
        assert min(below, above) > 0.01 / 2, (coverage, np.mean(observed))


def test_too_few_scores_give_an_unbounded_interval():
    calibrator = Conformal(TARGETS["runtime_ms"]).conformalize(np.array([1.0, 2.0]), np.array([1.1, 1.9]))
    assert math.isinf(calibrator.quantile(0.9))
    low, high = calibrator.interval(np.array([5.0]), 0.9)
    assert low[0] == 0 and math.isinf(high[0])


def test_steps_and_domain_are_checked():
    with pytest.raises(NotConformalized, match="conformalize"):
        Conformal(TARGETS["runtime_ms"]).interval(np.array([1.0]), 0.9)
    with pytest.raises(ValueError, match="inside its domain"):
        Conformal(TARGETS["runtime_ms"]).conformalize(np.array([0.0]), np.array([1.0]))
    with pytest.raises(UsageError, match="coverage"):
        Conformal.from_scores(TARGETS["runtime_ms"], [0.1, 0.2]).quantile(1.5)


def test_absolute_intervals_are_symmetric_in_the_target_units():
    calibrator = Conformal(TARGETS["accuracy"]).conformalize(
        np.array([-0.2, 0.5, 0.9]), np.array([-0.1, 0.3, 0.9])
    )
    low, high = calibrator.interval(np.array([-0.5]), 0.5)
    np.testing.assert_allclose([low[0], high[0]], [-0.6, -0.4])


def test_probability_above_counts_the_residuals_that_carry_an_estimate_past_a_threshold():
    calibrator = Conformal.from_residuals(TARGETS["accuracy"], [0.2, -0.1, 0.0, 0.1])
    assert calibrator.probability_above(np.array([0.5]), np.array([0.55]))[0] == pytest.approx(0.5)
    assert calibrator.probability_above(np.array([0.5]), np.array([0.35]))[0] == pytest.approx(
        0.8
    )  # at most n/(n+1)
    assert calibrator.probability_above(np.array([0.5]), np.array([0.9]))[0] == pytest.approx(
        0.2
    )  # at least 1/(n+1)


def test_probabilities_are_calibrated_where_the_error_grows_along_the_scale():
    rng = np.random.default_rng(0)

    def draw(n):  # scores well below accuracy's bound of 1 (a score such as darcy's)
        estimate = rng.uniform(-5, -4, n)
        return estimate + rng.normal(0, 0.01 + 0.3 * (estimate + 5), n), estimate

    calibrator = Conformal(TARGETS["accuracy"]).conformalize(*draw(5000))
    y_new, estimate = draw(4000)
    threshold = estimate + rng.normal(0, 0.2, 4000)
    p = calibrator.probability_above(estimate, threshold)
    for lo in (0.0, 0.1, 0.4, 0.7, 0.9):
        rows = (p >= lo) & (p < lo + 0.1)
        assert abs(np.mean(y_new[rows] > threshold[rows]) - p[rows].mean()) < 0.05, lo


def test_nothing_exceeds_the_targets_bound():
    calibrator = Conformal.from_residuals(TARGETS["accuracy"], [0.2, -0.1, 0.0, 0.1])
    assert calibrator.probability_above(np.array([0.95, 0.95]), np.array([1.0, 0.9])).tolist() == [0.0, 0.75]
