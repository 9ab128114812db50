import numpy as np
import pandas as pd
from preflight.features import (
    FEW_ROWS,
    LABELS_FROM_ROWS,
    among,
    distinct_rows,
    float_frame,
    labels,
    rows_of_each,
)


def test_rows_of_each_value_in_order_of_first_appearance_missing_values_one_group():
    found = rows_of_each(np.array(["b", "a", None, "b", None, "a"], dtype=object))
    assert list(found) == ["b", "a", None]
    assert [rows.tolist() for rows in found.values()] == [[0, 3], [1, 5], [2, 4]]


def test_rows_of_each_combination_keyed_by_a_tuple_as_a_groupby_finds_them():
    sides = np.array(["seen", "unseen", "seen", "seen", "unseen"], dtype=object)
    strata = np.array(["gpu", "gpu", "cpu", "gpu", np.nan], dtype=object)
    found = rows_of_each(sides, strata)
    expected = pd.DataFrame({"s": sides, "t": strata}).groupby(["s", "t"], sort=False, dropna=False).indices
    assert len(found) == len(expected) == 4
    assert [rows.tolist() for rows in found.values()] == [[0, 3], [1], [2], [4]]
    assert list(found)[:3] == [("seen", "gpu"), ("unseen", "gpu"), ("seen", "cpu")]
    assert rows_of_each(np.array([], dtype=object)) == {}


def test_distinct_rows_codes_combinations_and_among_matches_by_hash():
    index, first = distinct_rows(np.array([1, 2, 1, 2]), np.array(["x", "y", "x", "x"], dtype=object))
    assert index.tolist() == [0, 1, 0, 2] and first.tolist() == [0, 1, 3]
    assert among(np.array(["a", "b", "c"], dtype=object), ["c", "a"]).tolist() == [True, False, True]


def test_labels_are_the_column_a_frame_of_the_values_holds_for_few_rows_and_many():
    for rows in (3, LABELS_FROM_ROWS + 1):
        index = np.arange(rows) % 3
        for values in (
            np.array(["gpu", "cpu", "tpu"], dtype=object),
            np.array(["fp16", "fp32", "bf16"]),  # NumPy's own strings
            np.array(["a", None, "b"], dtype=object),
        ):
            expected = pd.DataFrame({"v": values[index]})["v"]
            for found in (labels(values, index), labels(values[index])):
                pd.testing.assert_series_equal(pd.DataFrame({"v": found})["v"], expected)
    assert isinstance(
        labels(np.array(["a"] * LABELS_FROM_ROWS, dtype=object)), pd.api.extensions.ExtensionArray
    )


def test_a_float_frame_holds_the_columns_as_a_frame_built_from_them_would():
    columns = {
        "a": np.array([1.5, np.nan, 3.0]),
        "codes": np.array([2, 0, 7]),
        "b": np.array([0.0, -1.0, 1e300]),
    }
    frame = float_frame(columns)
    expected = pd.DataFrame(columns).astype(float)
    pd.testing.assert_frame_equal(frame, expected)
    columns["a"][0] = 9.0
    assert frame["a"][0] == 1.5  # the frame owns its values


def test_distinct_rows_of_a_few_rows_are_those_of_the_same_rows_among_many():
    rng = np.random.default_rng(0)
    for _ in range(50):
        rows = int(rng.integers(0, FEW_ROWS))
        words = pd.Series(pd.array(rng.choice(["a", "b", None], size=rows), dtype="str"))
        numbers = rng.choice([0.0, -0.0, 1.5, np.nan], size=rows)
        codes = rng.integers(0, 3, size=rows)
        columns = (words, numbers, codes)
        padding = FEW_ROWS  # as many rows again, all one new combination, take the hashing path
        many = (
            pd.concat([words, pd.Series(["z"] * padding, dtype="str")], ignore_index=True),
            np.concatenate([numbers, np.full(padding, 7.0)]),
            np.concatenate([codes, np.full(padding, 9)]),
        )
        few_index, few_first = distinct_rows(*columns)
        many_index, many_first = distinct_rows(*many)
        assert few_index.tolist() == many_index[:rows].tolist()
        assert few_first.tolist() == many_first[many_first < rows].tolist()
