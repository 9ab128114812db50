"""Adaptation by residuals: a subject's measurements correct its estimates only, near a measured point
more than far from it, with intervals calibrated by simulating the same adaptation on held-out
subjects and narrowing as measurements arrive."""

import functools

import numpy as np
import pandas as pd
import pytest
from preflight.features import Features
from preflight.models.core.residual import ResidualAdaptation, Scaler, ZeroShot
from preflight.models.core.targets import Target

CYCLES = Target("cycles", "log")
VALID = Target("probability", "binary", lower=0.0, upper=1.0)
TARGETS = {"cycles": CYCLES, "valid": VALID}


def _subjects(n_subjects: int, rows: int, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """Rows of several subjects: a knob that varies within a subject, a size that does not, and a
    residual each subject draws anew (an offset plus a slope along the knob)."""
    rng = np.random.default_rng(seed)
    subjects = np.repeat([f"s{i}" for i in range(n_subjects)], rows)
    knob = rng.uniform(0, 4, len(subjects))
    size = np.repeat(rng.uniform(5, 9, n_subjects), rows)
    offset, slope = (np.repeat(rng.normal(0, s, n_subjects), rows) for s in (1.0, 0.5))
    residual = offset + slope * knob + rng.normal(0, 0.05, len(subjects))
    return pd.DataFrame({"knob": knob, "size": size}), subjects, residual


def _features(X: pd.DataFrame) -> Features:
    return Features(X=X, reference=pd.DataFrame(index=X.index), meta=pd.DataFrame(index=X.index))


def test_the_scale_is_the_spread_within_a_subject_and_shared_columns_drop_out():
    X, subjects, _ = _subjects(6, 40)
    scaler = Scaler.fit(X, subjects)
    assert scaler.columns == ("knob",)  # the size is one value per subject
    assert scaler.spread[0] == pytest.approx(4 / np.sqrt(12), rel=0.15)  # a uniform's spread
    assert Scaler.from_state(scaler.state()).columns == scaler.columns


@functools.cache  # its simulations are cached in it: each is run once per module
def _zero_shot(n_subjects: int = 12) -> ZeroShot:
    X, subjects, residual = _subjects(n_subjects, 120, seed=1)
    Y = pd.DataFrame({"cycles": np.exp(residual) * 100, "valid": np.ones(len(X))})
    oof = pd.DataFrame({"cycles": np.full(len(X), 100.0), "valid": np.full(len(X), 0.9)})
    return ZeroShot.of(TARGETS, Y, oof, subjects, X, {"cycles": "median APE 50"}, seed=0)


def _adapt(
    shots: int, seed: int = 2, corner: bool = False
) -> tuple[ResidualAdaptation, pd.DataFrame, np.ndarray, np.ndarray]:
    """An adaptation to ``shots`` measurements of a new subject whose residual is 1 + 0.5·knob (the
    lowest knobs where ``corner``, as a search would pick them, else a random sample), and the
    subject's other rows with their true residual."""
    rng = np.random.default_rng(seed)
    knob = rng.uniform(0, 4, 200)
    if corner:
        knob = np.sort(knob)
    X = pd.DataFrame({"knob": knob, "size": 7.0})
    truth = 1 + 0.5 * knob
    measured = pd.DataFrame({"cycles": np.exp(truth[:shots]) * 100})
    estimates = pd.DataFrame({"cycles": np.full(shots, 100.0)})
    subject = np.full(shots, "new")
    adaptation = ResidualAdaptation.fit(_zero_shot(), _features(X.iloc[:shots]), measured, estimates, subject)
    return adaptation, X.iloc[shots:].reset_index(drop=True), truth[shots:], knob[shots:]


def _apply(adaptation: ResidualAdaptation, X: pd.DataFrame, subjects: np.ndarray, zero_shot: ZeroShot):
    value = pd.DataFrame({"cycles": np.full(len(X), 100.0), "valid": np.full(len(X), 0.5)})
    low, high = value * 0.5, value * 2
    adaptation.apply(_features(X), subjects, value, low, high, zero_shot, 0.9)
    return value, low, high


def test_measurements_correct_their_subject_and_leave_every_other_untouched():
    adaptation, X, truth, _ = _adapt(20)
    subjects = np.where(np.arange(len(X)) % 2 == 0, "new", "other")
    value, low, high = _apply(adaptation, X, subjects, _zero_shot())
    new, other = subjects == "new", subjects == "other"
    error = np.abs(np.log(value["cycles"][new] / 100) - truth[new])
    assert np.median(error) < 0.1 < np.median(np.abs(truth[new]))  # from off by ~2 in log to near
    assert (value["cycles"][other] == 100.0).all() and (low["cycles"][other] == 50.0).all()
    assert (value["valid"] == 0.5).all()  # no measurement of it: unadapted
    assert adaptation.shots("new") == 20 and adaptation.shots("other") == 0


@pytest.mark.parametrize(
    "corner, counts", [(False, (5, 20, 50)), (True, (20, 30, 50))], ids=["random", "one-corner"]
)
def test_intervals_cover_and_narrow_as_measurements_arrive(corner: bool, counts: tuple[int, ...]):
    zero_shot = _zero_shot()
    widths, coverages = [], []
    for shots in counts:
        adaptation, X, truth, _ = _adapt(shots, corner=corner)
        value, low, high = _apply(adaptation, X, np.full(len(X), "new"), zero_shot)
        inside = (np.log(low["cycles"] / 100) <= truth) & (truth <= np.log(high["cycles"] / 100))
        coverages.append(inside.mean())
        widths.append(np.median(np.log(high["cycles"] / low["cycles"])))
    assert all(c >= 0.8 for c in coverages), coverages
    assert widths[0] > widths[1] > widths[2], widths


def test_simulations_are_cached_per_measurement_count():
    zero_shot = _zero_shot(4)
    first = zero_shot.simulation("cycles", 12)
    assert zero_shot.simulation("cycles", 10) is first  # 10 and 12 both read the simulation at 10
    assert len(first.error) == len(first.spread) > 0 and np.all(first.error >= 0)


def test_estimates_that_rank_a_subjects_rows_at_random_are_ignored():
    """A kernel never seen is often ranked at random: a quantity's correction learns the
    measurements, not the estimates' residuals, and finds the structure they miss."""
    rng = np.random.default_rng(3)
    knob = rng.uniform(0, 4, 200)
    X, truth = pd.DataFrame({"knob": knob, "size": 7.0}), 1 + 0.5 * knob
    estimates = pd.DataFrame({"cycles": np.exp(truth + rng.normal(0, 1.0, len(knob))) * 100})
    shots, subject = 40, np.full(40, "new")
    measured = pd.DataFrame({"cycles": np.exp(truth[:shots]) * 100})
    adaptation = ResidualAdaptation.fit(
        _zero_shot(), _features(X.iloc[:shots]), measured, estimates.iloc[:shots], subject
    )
    value = estimates.iloc[shots:].reset_index(drop=True).assign(valid=0.5)
    low, high = value * 0.5, value * 2
    rest = _features(X.iloc[shots:].reset_index(drop=True))
    adaptation.apply(rest, np.full(len(value), "new"), value, low, high, _zero_shot(), 0.9)
    error = np.abs(np.log(value["cycles"] / 100) - truth[shots:])
    assert np.median(error) < 0.1  # the estimates' own error is ~0.67 in log


def test_two_measurements_never_widen_what_knowing_none_gives():
    """A process fitted to two designs knows its spread poorly: the interval takes one width for
    every row, calibrated by the same simulation, and stays inside the band the zero-shot residuals
    of the training subjects span."""
    zero_shot = _zero_shot()
    adaptation, X, truth, _ = _adapt(2)
    value, low, high = _apply(adaptation, X, np.full(len(X), "new"), zero_shot)
    inside = (np.log(low["cycles"] / 100) <= truth) & (truth <= np.log(high["cycles"] / 100))
    zero_shot_band = 2 * np.quantile(np.abs(zero_shot.residuals["cycles"]), 0.9)
    assert inside.mean() >= 0.8
    assert np.median(np.log(high["cycles"] / low["cycles"])) < zero_shot_band
