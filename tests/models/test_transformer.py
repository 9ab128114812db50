"""The transformer family learns from metric windows: seeded, saved and loaded exactly, masks respected,
windows of another length aligned to the fitted one."""

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from preflight.data.errors import UsageError
from preflight.features import Features, Sequences
from preflight.models.core.targets import Target
from preflight.models.families.transformer import TransformerFamily

TARGETS = {"ratio": Target("x")}
FAST = {"epochs": 15, "d_model": 16, "head_hidden": 32}
STEPS, CHANNELS, TRAIN = 24, 4, 300


def windows(n: int, seed: int) -> tuple[Features, pd.DataFrame]:
    """Rows whose ratio falls with channel 0's level over the measured steps and rises with the load; a
    third of the windows are shorter, padded with junk the model must not read."""
    rng = np.random.default_rng(seed)
    level, load = rng.normal(0, 1, n), rng.uniform(0, 1, n)
    values = rng.normal(0, 1, (n, STEPS, CHANNELS))
    values[:, :, 0] = level[:, None] + rng.normal(0, 0.3, (n, STEPS))
    values[:, :, 1] = np.sin(np.arange(STEPS) / 3)[None, :] + rng.normal(0, 0.1, (n, STEPS))
    length = np.where(rng.uniform(size=n) < 1 / 3, rng.integers(8, STEPS, n), STEPS)
    mask = np.arange(STEPS)[None, :] < length[:, None]
    values[~mask] = 99.0
    measured = np.where(mask, values[:, :, 0], 0).sum(1) / length
    frame = pd.DataFrame({"ctx_load": load, "noise": rng.normal(0, 1, n)})
    features = Features(
        frame,
        pd.DataFrame({"ratio": np.nan}, index=frame.index),
        frame[[]],
        sequences=Sequences(values, mask),
    )
    return features, pd.DataFrame({"ratio": np.exp(-0.8 * measured + 0.5 * load)})


@pytest.fixture(scope="module")
def data() -> tuple[Features, pd.DataFrame]:
    return windows(400, seed=0)


@pytest.fixture(scope="module")
def fitted(data) -> TransformerFamily:
    features, Y = data
    train = np.arange(TRAIN)
    return TransformerFamily(targets=TARGETS, seed=1, **FAST).fit(
        features.take(train), Y.iloc[train].reset_index(drop=True)
    )


def test_it_learns_the_target_from_the_windows(data, fitted):
    features, Y = data
    test = np.arange(TRAIN, len(Y))
    predicted = fitted.predict(features.take(test))["ratio"].to_numpy()
    measured = Y["ratio"].iloc[test].to_numpy()
    error = np.abs(np.log(predicted / measured)).mean()
    baseline = np.abs(np.log(measured) - np.log(Y["ratio"].iloc[:TRAIN]).mean()).mean()
    assert error < baseline / 3


def test_windows_of_another_length_are_aligned_to_the_fitted_one(data, fitted):
    features, _ = data
    sequences = features.sequences
    assert sequences is not None
    full = np.flatnonzero(sequences.mask.all(axis=1))[:50]
    rows = features.take(full)
    expected = fitted.predict(rows)
    older = np.random.default_rng(2).normal(0, 1, (len(full), 6, CHANNELS))  # measured before the window
    rows.sequences = Sequences(
        np.concatenate([older, sequences.values[full]], axis=1),
        np.concatenate([np.ones((len(full), 6), bool), sequences.mask[full]], axis=1),
    )
    np.testing.assert_allclose(fitted.predict(rows), expected, rtol=1e-5)
    short = np.flatnonzero(sequences.mask.sum(axis=1) <= 16)[:50]
    assert len(short) > 10
    rows = features.take(short)
    expected = fitted.predict(rows)
    rows.sequences = Sequences(sequences.values[short, :16], sequences.mask[short, :16])
    np.testing.assert_allclose(fitted.predict(rows), expected, rtol=1e-5)


def test_features_without_sequences_or_with_other_channels_are_refused(data, fitted):
    features, Y = data
    flat = Features(features.X, features.reference, features.meta)
    with pytest.raises(UsageError, match="needs sequences"):
        TransformerFamily(targets=TARGETS, epochs=1).fit(flat, Y)
    with pytest.raises(UsageError, match="needs sequences"):
        fitted.predict(flat)
    assert features.sequences is not None
    narrow = Features(
        features.X, features.reference, features.meta,
        sequences=Sequences(features.sequences.values[:, :, :3], features.sequences.mask),
    )  # fmt: skip
    with pytest.raises(UsageError, match="4 channels; these have 3"):
        fitted.predict(narrow)


def test_a_target_missing_on_some_rows_trains_on_the_rest(data):
    features, Y = data
    Y = Y.assign(slowdown=Y["ratio"] + 1.0)
    Y.loc[::2, "slowdown"] = np.nan
    targets = TARGETS | {"slowdown": Target("x")}
    features = replace(features, reference=features.reference.assign(slowdown=np.nan))
    predicted = TransformerFamily(targets=targets, **FAST | {"epochs": 2}).fit(features, Y).predict(features)
    assert list(predicted.columns) == ["ratio", "slowdown"]
    assert np.isfinite(predicted.to_numpy()).all() and (predicted.to_numpy() > 0).all()
