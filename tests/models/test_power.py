import numpy as np
import pytest
from preflight.models.tools import power
from preflight.models.tools.power import PHYSICS_PRIOR, PowerShape

TRUE = PowerShape(static_fraction=0.25, exponent=0.6)


def _measurements(rng: np.random.Generator, n: int, noise: float = 0.02):
    u = rng.uniform(0.02, 1.0, n)
    tdp = rng.choice([200.0, 350.0, 700.0], n)
    return u, power.power_w(TRUE, u, tdp) * rng.lognormal(0, noise, n), tdp


def test_fit_recovers_a_known_shape():
    u, measured, tdp = _measurements(np.random.default_rng(0), 400)
    fitted = power.fit_shape(u, measured, tdp)
    assert fitted.static_fraction == pytest.approx(TRUE.static_fraction, abs=0.02)
    assert fitted.exponent == pytest.approx(TRUE.exponent, abs=0.05)


def test_fit_resists_outliers_and_skips_invalid_rows():
    rng = np.random.default_rng(1)
    u, measured, tdp = _measurements(rng, 400)
    measured[:40] *= rng.uniform(2, 5, 40)  # 10 % of samples read far too high
    measured[40:45], u[45:50] = np.nan, 0.0
    fitted = power.fit_shape(u, measured, tdp)
    assert fitted.static_fraction == pytest.approx(TRUE.static_fraction, abs=0.04)
    assert fitted.exponent == pytest.approx(TRUE.exponent, abs=0.1)


def test_fit_stays_within_bounds_and_needs_two_rows():
    u = np.array([0.5, 0.9])
    fitted = power.fit_shape(u, np.array([900.0, 990.0]), np.array([1000.0, 1000.0]))
    (low_s, low_e), (high_s, high_e) = power.FIT_BOUNDS
    assert low_s <= fitted.static_fraction <= high_s and low_e <= fitted.exponent <= high_e
    with pytest.raises(ValueError, match="at least 2"):
        power.fit_shape(np.array([0.5, np.nan]), np.array([100.0, 100.0]), np.array([200.0, 200.0]))


@pytest.mark.parametrize("shape", [TRUE, *PHYSICS_PRIOR.values(), *power.PRIOR_INTERVAL["gpu"]])
def test_power_lies_between_static_and_tdp_and_grows_with_utilisation(shape):
    u = np.linspace(-0.5, 1.5, 201)
    watts = power.power_w(shape, u, np.full(u.size, 300.0))
    assert np.all(watts >= shape.static_fraction * 300 - 1e-9) and np.all(watts <= 300 + 1e-9)
    assert np.all(np.diff(watts) >= 0)
    assert watts[-1] == pytest.approx(300)


def test_utilisation_is_clipped_to_the_open_unit_interval():
    u = power.utilisation(np.array([1.0, 3.0, 0.0, -1.0, np.nan]), np.array([2.0, 1.0, 1.0, 1.0, 1.0]))
    np.testing.assert_allclose(u[:4], [0.5, 1.0, power.MIN_UTILISATION, power.MIN_UTILISATION])
    assert np.isnan(u[4])
    tdp = np.full(2, 100.0)
    np.testing.assert_allclose(power.power_w(TRUE, np.array([1.0, 7.0]), tdp), tdp)


def test_prior_is_used_for_kinds_without_a_fit():
    fitted = {"gpu": TRUE}
    assert power.shape_for("gpu", fitted) == TRUE
    assert power.shape_for("cpu", fitted) == PHYSICS_PRIOR["cpu"]
    assert power.shape_for("gpu") == PHYSICS_PRIOR["gpu"]
    with pytest.raises(ValueError, match="fpga"):
        power.shape_for("fpga", fitted)


@pytest.mark.parametrize("kind", sorted(power.PRIOR_INTERVAL))
def test_prior_interval_holds_the_prior_and_closes_at_full_utilisation(kind):
    u, tdp = np.array([0.05, 0.3, 0.7, 1.0]), np.full(4, 250.0)
    low, high = power.prior_interval(kind, u, tdp)
    point = power.power_w(PHYSICS_PRIOR[kind], u, tdp)
    assert np.all(low <= point) and np.all(point <= high)
    assert low[-1] == pytest.approx(250) and high[-1] == pytest.approx(250)


def test_energy_is_power_times_runtime():
    np.testing.assert_allclose(power.energy_j(np.array([200.0, 50.0]), np.array([1500.0, 2.0])), [300.0, 0.1])
