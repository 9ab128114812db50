"""Adaptation by a device fingerprint: a device's few measured architectures read as a mix of the
training devices' estimates, answering for that device only."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from preflight.data import sources
from preflight.data.catalogue import Catalogue
from preflight.models.core.datasets import register_measured_devices
from preflight.models.core.evaluate import target_metrics, train_test
from preflight.models.core.fingerprint import Mix, References, most_informative, prior
from preflight.models.core.predictor import Predictor
from preflight.models.core.task import get_task

from tests.nas import write_help_csv

TASK = get_task("nas-latency")


def test_a_mix_recovers_a_device_made_of_others():
    """Shots of a device that runs like 0.7 of one reference and 0.3 of another (plus a constant) give
    those weights back, and its unmeasured rows follow."""
    rng = np.random.default_rng(0)
    basis = rng.normal(0, 1, (200, 5))
    z = 0.7 * basis[:, 1] + 0.3 * basis[:, 3] + 2.0
    mix = Mix.fit(basis[:12], z[:12])
    assert (mix.weights >= 0).all()
    assert np.argsort(mix.weights)[-2:].tolist() == [3, 1]
    assert np.abs(mix(basis[12:]) - z[12:]).max() < 0.15
    assert mix.shots == 12 and mix.spread > 0


def test_the_recommended_shots_spread_over_what_tells_devices_apart():
    """Three clusters of candidates, each pulling the references apart another way: the three most
    informative rows come one from each, never the same row twice."""
    rng = np.random.default_rng(1)
    centres = np.array([[3.0, 0, 0], [0, 3.0, 0], [0, 0, 3.0]])
    basis = np.vstack([c + rng.normal(0, 0.1, (50, 3)) for c in centres])
    chosen = most_informative(basis, 3)
    assert len(set(chosen)) == 3 and sorted(i // 50 for i in chosen) == [0, 1, 2]
    assert len(set(most_informative(basis, 20))) == 20


@pytest.fixture(scope="module")
def help_rows(tmp_path_factory) -> pd.DataFrame:
    path = write_help_csv(tmp_path_factory.mktemp("help") / "help.csv", n=150)
    return TASK.rows(sources.load("help-nb201", path).rows)


def _metrics(rows: pd.DataFrame, unlisted: pd.DataFrame, shots: int, informative: bool = False) -> dict:
    outcome = train_test(
        TASK, rows, unlisted, Catalogue.load(), "tree", "device", 0, shots, informative=informative
    )
    return target_metrics(TASK, outcome, outcome.model)["latency_ms"]


def test_ten_shots_describe_a_device_without_a_spec_sheet(help_rows):
    """A phone no catalogue knows (the Pixel 3's latencies under another name): ten measured
    architectures rank the rest of the space better than none, and put it at its own speed."""
    phone = help_rows["device"] == "pixel3"
    unlisted = help_rows[phone].assign(device="lab-phone")
    zero, ten = _metrics(help_rows[~phone], unlisted, 0), _metrics(help_rows[~phone], unlisted, 10)
    assert ten["spearman"] > max(zero["spearman"], 0.97)
    assert ten["median_ape"] < zero["median_ape"] / 2
    assert ten["coverage"] > 0.7
    recommended = _metrics(help_rows[~phone], unlisted, 10, informative=True)
    assert recommended["spearman"] > 0.97 and recommended["median_ape"] < zero["median_ape"] / 2


def test_a_fingerprint_changes_no_other_devices_answers(help_rows):
    """Answers for every device but the measured one stay bit for bit; the measured device's change and
    carry the adaptation's label."""
    catalogue = Catalogue.load()
    phone = help_rows["device"] == "pixel3"
    train = help_rows[~phone]
    unlisted = help_rows[phone].assign(device="lab-phone").reset_index(drop=True)
    register_measured_devices(TASK, unlisted, catalogue, persist=False)
    features, Y = TASK.featurize(train, catalogue), TASK.target_frame(train)
    predictor = Predictor(TASK, "tree").fit(features, Y, TASK.group_values(features.meta, "arch"))
    shots = unlisted.iloc[:10]
    adapted = predictor.adapted(TASK.featurize(shots, catalogue), TASK.target_frame(shots))
    others, phone_rows = TASK.featurize(train.iloc[:60], catalogue), TASK.featurize(unlisted, catalogue)
    before, after = predictor.predict(others), adapted.predict(others)
    for frame in ("value", "low", "high"):
        pd.testing.assert_frame_equal(getattr(before, frame), getattr(after, frame))
    assert not np.allclose(
        predictor.predict(phone_rows).value["latency_ms"], adapted.predict(phone_rows).value["latency_ms"]
    )
    assert predictor.adaptation is None and adapted.adaptation.startswith("shots:10:")
    assert not any("unseen:device_id" in " ".join(r) for r in adapted.predict(phone_rows).reasons)


def test_references_survive_a_save_and_a_load(help_rows, tmp_path):
    """A loaded predictor's references give the same intervals as the fitted one's."""
    from preflight.models.core import fingerprint

    catalogue = Catalogue.load()
    features, Y = TASK.featurize(help_rows, catalogue), TASK.target_frame(help_rows)
    predictor = Predictor(TASK, "tree").fit(features, Y, TASK.group_values(features.meta, "arch"))
    references = predictor.references_
    assert references is not None and references.scores["latency_ms"]["spec"]
    fingerprint.save(references, tmp_path)
    loaded = fingerprint.load(tmp_path)
    assert loaded is not None
    pd.testing.assert_frame_equal(loaded.contexts, references.contexts)
    weights = np.r_[np.arange(len(references.contexts)), 1.0]
    mix = Mix(weights, np.zeros(len(weights)), 0.0, 0.1, 10)
    for stratum in fingerprint.STRATA:
        np.testing.assert_array_equal(
            loaded.by_reference["latency_ms"][stratum][10], references.by_reference["latency_ms"][stratum][10]
        )
        assert loaded.half_width("latency_ms", TASK.targets["latency_ms"], stratum, mix, 0.9) == (
            references.half_width("latency_ms", TASK.targets["latency_ms"], stratum, mix, 0.9)
        )
    assert fingerprint.load(tmp_path / "nothing") is None


def test_a_devices_prior_spread_is_that_of_the_references_its_mix_leans_on():
    """Weighted as the mix weighs them; the weight on its own estimate, or no weight at all, reads the
    typical spread."""
    by_reference, typical = np.array([1.0, 5.0, 2.0]), 10.0
    assert prior(np.array([1.0, 0.0, 3.0, 0.0]), by_reference, typical) == 1.75
    assert prior(np.array([0.0, 0.0, 0.0, 2.0]), by_reference, typical) == typical
    assert prior(np.zeros(4), by_reference, typical) == typical


def test_a_device_like_the_references_that_were_hard_to_predict_gets_the_wider_interval():
    """Two devices whose ten shots fit alike: the one whose mix leans on a reference that erred widely
    when held out gets the wider interval; a mix saved before priors by mix reads the typical spread."""
    references = References([], pd.DataFrame(index=["steady", "erratic"]), pd.Series(["a", "b"]))
    scores = np.abs(np.random.default_rng(0).normal(0, 1, 500))
    references.scores["latency_ms"] = {"no-spec": {10: scores}}
    references.typical["latency_ms"] = {"no-spec": {10: 0.2}}
    references.by_reference["latency_ms"] = {"no-spec": {10: np.array([0.05, 0.5])}}
    target = TASK.targets["latency_ms"]

    def half_width(weights: list[float]) -> float:
        mix = Mix(np.array(weights), np.zeros(len(weights)), 0.0, 0.1, 10)
        return references.half_width("latency_ms", target, "no-spec", mix, 0.9)

    steady, erratic, own = (
        half_width([1.0, 0.0, 0.0]),
        half_width([0.0, 1.0, 0.0]),
        half_width([0.0, 0.0, 1.0]),
    )
    assert steady < own < erratic
    assert half_width([1.0, 0.0]) == own  # weights that do not match the references: the typical prior
