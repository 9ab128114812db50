"""Which designs to synthesize next: fast and likely to fit first, resource limits as probabilities,
and a batch spread over the space rather than one neighbourhood."""

import numpy as np
import pandas as pd
from preflight.models.core.predictor import Estimates
from preflight.models.tools.explore import next_batch


def _estimates(cycles, valid, lut=None, spread: float = 1.5) -> Estimates:
    lut = np.full(len(cycles), 0.1) if lut is None else np.asarray(lut, float)
    value = pd.DataFrame({"cycles": np.asarray(cycles, float), "valid": np.asarray(valid, float), "lut": lut})
    low = value.assign(cycles=value["cycles"] / spread, lut=value["lut"] / spread)
    high = value.assign(cycles=value["cycles"] * spread, lut=value["lut"] * spread)
    return Estimates(value, low, high, [[] for _ in cycles])


def test_the_first_pick_is_fast_and_likely_to_fit():
    estimates = _estimates(cycles=[1_000, 100, 100, 10_000], valid=[0.9, 0.9, 0.02, 0.9])
    x = np.eye(4) * 10  # far apart
    assert next_batch(estimates, x, 1) == [1]


def test_a_resource_over_its_limit_counts_as_unlikely_to_fit():
    estimates = _estimates(cycles=[100, 120], valid=[0.9, 0.9], lut=[0.9, 0.1])
    assert next_batch(estimates, np.eye(2) * 10, 1, limits={"lut": 0.5}) == [1]
    assert next_batch(estimates, np.eye(2) * 10, 1) == [0]  # no limit: the faster one


def test_a_batch_spreads_over_the_space():
    estimates = _estimates(cycles=[100, 100, 150], valid=[0.9, 0.9, 0.9])
    x = np.array([[0.0, 0.0], [0.0, 0.0], [10.0, 10.0]])  # the first two are the same design's neighbours
    first, second = next_batch(estimates, x, 2)
    assert first in (0, 1) and second == 2


def test_no_candidate_is_picked_twice_and_the_batch_is_at_most_the_space():
    estimates = _estimates(cycles=[100, 200, 300], valid=[0.5, 0.5, 0.5])
    chosen = next_batch(estimates, np.zeros((3, 2)), 5)
    assert sorted(chosen) == [0, 1, 2]


def test_improvement_is_over_the_best_synthesized():
    # a design predicted at the incumbent's cycles, but certain, cannot improve; an uncertain one can
    estimates = _estimates(cycles=[100, 100], valid=[0.9, 0.9])
    estimates.low.loc[0, "cycles"], estimates.high.loc[0, "cycles"] = 99.9, 100.1
    estimates.low.loc[1, "cycles"], estimates.high.loc[1, "cycles"] = 10, 1_000
    assert next_batch(estimates, np.eye(2) * 10, 1, incumbent=100.0) == [1]


def test_part_of_a_batch_learns_where_designs_stop_fitting():
    # nine fast designs likely to fit and a slow one whose fit is a coin toss: a batch of four takes
    # three fast ones by improvement and the coin toss, which teaches the most about validity
    estimates = _estimates(cycles=[100] * 9 + [10_000], valid=[0.95] * 9 + [0.5])
    chosen = next_batch(estimates, np.eye(10) * 10, 4)
    assert chosen[-1] == 9 and all(pick < 9 for pick in chosen[:-1])
