"""The envelope's reason codes: the vectorised reasons say what the row-by-row text they replaced said,
on the GEMM sample data and on inputs outside it; every kind is documented and reads back in full."""

import numpy as np
import pandas as pd
import pytest
from preflight.data.settings import Settings
from preflight.models.core.datasets import task_data
from preflight.models.core.envelope import TOLERANCE, Envelope
from preflight.models.core.predictor import CODES
from preflight.models.core.task import get_task

from tests.samples import sample_paths

GEMM = get_task("gemm")


def text_reasons(envelope: Envelope, X: pd.DataFrame, meta: pd.DataFrame) -> list[list[str]]:
    """``Envelope.reasons`` before codes: full text, row by row (kept as the reference)."""
    out: list[list[str]] = [[] for _ in range(len(X))]
    for column, seen in envelope.seen_.items():
        values = meta[column].astype(str).to_numpy()
        for i in np.flatnonzero(~np.isin(values, seen) & (values != "")).tolist():
            out[i].append(f"{column}={values[i]} has no measurements in the training data")
    low = np.array([envelope.low_.get(c, np.nan) for c in X.columns], dtype=float)
    high = np.array([envelope.high_.get(c, np.nan) for c in X.columns], dtype=float)
    slack = TOLERANCE * np.maximum(np.maximum(high - low, np.abs(high)), 1e-9)
    values = X.to_numpy(dtype=float, na_value=np.nan)
    with np.errstate(invalid="ignore"):
        outside = (values < low - slack) | (values > high + slack)
    fitted = np.array([c in envelope.low_ for c in X.columns])
    never_seen = fitted & np.isnan(low) & ~np.isnan(values)
    outside |= never_seen
    names = list(X.columns)
    ranges = [f"[{lo:.3g}, {hi:.3g}]" for lo, hi in zip(low, high)]
    rows, cols = np.nonzero(outside)
    for i, j, value in zip(rows.tolist(), cols.tolist(), values[rows, cols].tolist()):
        where = (
            "never present in the training data"
            if never_seen[i, j]
            else f"outside the training range {ranges[j]}"
        )
        out[i].append(f"{names[j]}={value:.3g} {where}")
    return out


def as_code(text: str) -> str:
    """The code a text reason became."""
    if text.endswith(" has no measurements in the training data"):
        return "unseen:" + text.removesuffix(" has no measurements in the training data")
    kind = "absent" if text.endswith("never present in the training data") else "range"
    return f"{kind}:{text.split('=', 1)[0]}"


@pytest.fixture(scope="module")
def sample(catalogue, tmp_path_factory):
    """The GEMM sample rows (a cut of each shipped sweep), and an envelope fitted on its smaller half of
    shapes."""
    folder = tmp_path_factory.mktemp("gemm")
    rows = task_data(GEMM, Settings(home=folder / "home"), catalogue, sample_paths("gemm", folder)).rows
    training = rows[rows["m"] <= rows["m"].median()].reset_index(drop=True)
    features = GEMM.featurize(training, catalogue)
    return rows, Envelope(GEMM.envelope_columns).fit(features.X, features.meta)


def outside_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """Sample rows pushed outside: huge and thin shapes, devices never measured, a kernel configuration."""
    head = rows.head(40).reset_index(drop=True)
    return pd.concat(
        [
            head.assign(m=head["m"] * 4096),
            head.assign(n=1, k=head["k"] * 64),
            head.assign(device="NVIDIA H100 PCIe", dtype="fp16"),
            head.assign(block_m=128.0, block_n=64.0, threads_m=16.0, threads_n=16.0),
        ],
        ignore_index=True,
    )


def test_codes_say_what_the_row_by_row_text_said(sample, catalogue):
    rows, envelope = sample
    for part in (rows, outside_rows(rows), rows.head(1)):
        features = GEMM.featurize(part, catalogue)
        codes = envelope.reasons(features.X, features.meta)
        text = text_reasons(envelope, features.X, features.meta)
        assert codes == [[as_code(t) for t in row] for row in text]


def test_every_kind_shows_up_and_is_documented(sample, catalogue):
    rows, envelope = sample
    features = GEMM.featurize(outside_rows(rows), catalogue)
    kinds = {code.partition(":")[0] for row in envelope.reasons(features.X, features.meta) for code in row}
    assert kinds == {"unseen", "range", "absent"} and kinds <= set(CODES)


def test_codes_read_back_in_full(sample, catalogue):
    rows, envelope = sample
    features = GEMM.featurize(outside_rows(rows), catalogue)
    reasons = envelope.reasons(features.X, features.meta)
    codes = sorted({code for row in reasons for code in row})
    low, high = envelope.low_["m_log2"], envelope.high_["m_log2"]
    assert envelope.explain("range:m_log2") == f"m_log2 outside the training range [{low:.3g}, {high:.3g}]"
    assert envelope.explain("absent:kernel_block_m") == "kernel_block_m never present in the training data"
    unseen = next(code for code in codes if code.startswith("unseen:"))
    assert (
        envelope.explain(unseen)
        == unseen.removeprefix("unseen:") + " has no measurements in the training data"
    )
    assert all(envelope.explain(code) for code in codes)
    assert envelope.explain("missing:power_w") is None  # not the envelope's


def test_rows_inside_have_no_reasons(sample, catalogue):
    rows, envelope = sample
    features = GEMM.featurize(rows[rows["m"] <= rows["m"].median()], catalogue)
    assert envelope.reasons(features.X, features.meta) == [[] for _ in range(len(features.X))]
