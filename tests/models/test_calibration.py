"""Which calibrator an interval takes: a stratum never measured is never narrower than a measured one."""

import numpy as np
import pandas as pd
from preflight.models.core.calibration import COMPARED_COVERAGE, Calibration
from preflight.models.core.task import get_task

TARGETS = get_task("model-latency").targets


def _calibration(seen_spread: float, unseen_spread: float) -> Calibration:
    """Whole models measured in fp32 only, their out-of-fold errors of a given log-scale spread."""
    rng = np.random.default_rng(0)
    y = pd.DataFrame({"latency_ms": np.full(200, 10.0)})
    strata = np.full(200, "model.fp32")
    calibration = Calibration(TARGETS)
    for side, spread in (("seen", seen_spread), ("unseen", unseen_spread)):
        oof = pd.DataFrame({"latency_ms": 10.0 * np.exp(rng.normal(0.0, spread, 200))})
        calibration.add(side, y, oof, strata)
    return calibration


def _half_width(calibration: Calibration, side: str, stratum: str) -> float:
    return calibration.calibrator("latency_ms", side, stratum).quantile(COMPARED_COVERAGE)


def test_a_dtype_no_trace_measured_is_never_narrower_than_a_measured_one_nor_than_a_new_device():
    # a seen device's calibration wider than a new device's (its folds held devices out several at once)
    wide_seen = _calibration(seen_spread=0.4, unseen_spread=0.2)
    assert _half_width(wide_seen, "seen", "model.fp16") == _half_width(wide_seen, "seen", "model.fp32")
    assert _half_width(wide_seen, "seen", "model.fp16") > _half_width(wide_seen, "unseen", "model.fp32")
    # and the usual way round: the unmeasured dtype takes a new device's spread
    wide_unseen = _calibration(seen_spread=0.2, unseen_spread=0.4)
    assert _half_width(wide_unseen, "seen", "model.fp16") == _half_width(wide_unseen, "unseen", "model.fp32")
    # a measured stratum keeps its side's own calibrator
    assert _half_width(wide_unseen, "seen", "model.fp32") < _half_width(wide_unseen, "unseen", "model.fp32")
