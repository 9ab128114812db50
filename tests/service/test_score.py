"""``preflight score``: a file of items of any size estimated batch by batch into Parquet, through the
same prediction path as ``Model.predict``, its own columns carried through; a bad row names itself
and leaves no output behind."""

import gc

import numpy as np
import pandas as pd
import preflight
import pytest
from preflight.data.errors import DataError, UsageError
from preflight.service.cli import app
from typer.testing import CliRunner

ROWS = 23


def gemm_items() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame(
        {
            "id": [f"job-{i}" for i in range(ROWS)],
            "m": 2 ** rng.integers(5, 13, ROWS),
            "n": 2 ** rng.integers(5, 13, ROWS),
            "k": 2 ** rng.integers(5, 13, ROWS),
            "dtype": rng.choice(["fp32", "fp16"], ROWS),
            "device": rng.choice(["Tesla T4", "NVIDIA H100 80GB HBM3"], ROWS),
        }
    )


@pytest.mark.parametrize("suffix", ["parquet", "csv"])
def test_a_file_is_scored_in_batches_as_model_predict_answers(home, tmp_path, suffix):
    items = gemm_items()
    source = tmp_path / f"items.{suffix}"
    items.to_parquet(source) if suffix == "parquet" else items.to_csv(source, index=False)
    scored = preflight.score("gemm", source, tmp_path / "out.parquet", batch_rows=7, home=home)
    assert scored.rows == ROWS and scored.model.name == "preflight.gemm"
    found = pd.read_parquet(scored.output)
    expected = preflight.load("gemm", home=home).predict(items.drop(columns="id"))
    assert list(found["id"]) == list(items["id"])  # carried through, in order
    assert list(found.columns) == [*items.columns, *expected.columns]
    pd.testing.assert_frame_equal(
        found[expected.columns.drop("warnings")], expected.drop(columns="warnings"), check_dtype=False
    )
    assert [list(w) for w in found["warnings"]] == list(expected["warnings"])


def test_a_bad_row_is_named_and_nothing_is_written(home, tmp_path):
    items = gemm_items()
    items.loc[13, "m"] = -4
    items.to_parquet(tmp_path / "items.parquet")
    with pytest.raises(DataError, match=r"row 13: .*greater than 0"):
        preflight.score("gemm", tmp_path / "items.parquet", tmp_path / "out.parquet", batch_rows=5, home=home)
    assert not list(tmp_path.glob("out.parquet*"))


def test_scoring_leaves_the_garbage_collector_as_it_found_it(home, tmp_path):
    """Scoring keeps the objects alive before it out of the collector's scans only while it runs."""
    gemm_items().to_parquet(tmp_path / "items.parquet")
    preflight.score("gemm", tmp_path / "items.parquet", tmp_path / "out.parquet", home=home)
    assert gc.get_freeze_count() == 0
    gc.freeze()  # a caller's own freeze is kept (its objects freed meanwhile leave it)
    try:
        preflight.score("gemm", tmp_path / "items.parquet", tmp_path / "out.parquet", home=home)
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()


def test_scoring_through_the_cli(home, tmp_path, monkeypatch):
    monkeypatch.setenv("PREFLIGHT_HOME", str(home))
    gemm_items().to_parquet(tmp_path / "items.parquet")
    args = [
        "score",
        "gemm",
        "--input",
        str(tmp_path / "items.parquet"),
        "--output",
        str(tmp_path / "o.parquet"),
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert f"{ROWS} rows" in result.stdout and len(pd.read_parquet(tmp_path / "o.parquet")) == ROWS
    refused = CliRunner().invoke(app, ["score", "gemm", "--input", str(tmp_path / "x.json"), "--output", "o"])
    assert refused.exit_code == 2 and "no such file" in refused.stderr


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "Empty CSV file"),
        ("m,n,k,device\n8,8,8,Tesla T4\n8,8\n", "Expected 4 columns, got 2"),
        ("m,n,k,device,m\n8,8,8,Tesla T4,8\n", "columns named more than once: m"),
    ],
)
def test_a_file_arrow_cannot_read_as_items_is_a_data_error_naming_it(home, tmp_path, text, why):
    (tmp_path / "items.csv").write_text(text)
    with pytest.raises(DataError, match=f"items.csv: .*{why}"):
        preflight.score("gemm", tmp_path / "items.csv", tmp_path / "out.parquet", home=home)
    assert not list(tmp_path.glob("out.parquet*"))


def test_an_output_over_the_input_or_outside_a_folder_is_refused_before_scoring(home, tmp_path):
    items = tmp_path / "items.csv"
    gemm_items().to_csv(items, index=False)
    before = items.read_bytes()
    for output, why in (
        (items, "would overwrite an input"),
        (tmp_path, "Is a directory"),
        (tmp_path / "no" / "o.parquet", "No such file"),
    ):
        with pytest.raises(UsageError, match=why):
            preflight.score("gemm", items, output, home=home)
    assert items.read_bytes() == before and not list(tmp_path.glob("*.partial"))
