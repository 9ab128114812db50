"""The collectors' append-only CSV: the files ``open_log`` takes as the collector's own, and the rest."""

import pytest
from preflight.data.collect.csvlog import check_same, open_log
from preflight.data.errors import UsageError

COLUMNS = ["run", "seed", "value"]
HEADER = b"run,seed,value\n"


def test_a_new_or_empty_file_gets_the_header(tmp_path):
    new, empty = tmp_path / "new" / "log.csv", tmp_path / "empty.csv"
    empty.touch()
    for out in (new, empty):
        assert open_log(out, COLUMNS, "test") == []
        assert out.read_bytes() == HEADER


def test_a_torn_last_line_is_cut_and_a_torn_header_rewritten(tmp_path):
    out = tmp_path / "log.csv"
    out.write_bytes(HEADER + b"0,1,2.5\n1,1,3")
    assert open_log(out, COLUMNS, "test") == [{"run": "0", "seed": "1", "value": "2.5"}]
    assert out.read_bytes() == HEADER + b"0,1,2.5\n"
    out.write_bytes(HEADER[:5])
    assert open_log(out, COLUMNS, "test") == [] and out.read_bytes() == HEADER


@pytest.mark.parametrize(
    "content, why",
    [
        (b'{"run": 0}', "first line is not the collector's header"),  # no newline: once cut to nothing
        (b'{"run": 0}\n', "first line is not the collector's header"),
        (b"\x89PNG\r\n\x1a\n\x00\xff", "first line is not the collector's header"),  # binary
        (b"run,seed\n0,1\n", "first line is not the collector's header"),  # another collector's columns
        (HEADER + b"0,1\n", "row 1 does not have one cell per column"),
        (HEADER + b"0,1,2,3\n", "row 1 does not have one cell per column"),
        (HEADER + b"0,1,\xff\n", "can't decode"),
        (HEADER + b"0,1,2\n\xff\n\x89\x00", "can't decode"),  # garbage after the rows, its tail torn too
    ],
)
def test_a_file_that_is_not_the_collectors_own_is_refused_untouched(tmp_path, content, why):
    out = tmp_path / "foreign.csv"
    out.write_bytes(content)
    with pytest.raises(UsageError, match=f"foreign.csv is not a test CSV .*{why}"):
        open_log(out, COLUMNS, "test")
    assert out.read_bytes() == content


def test_an_unwritable_out_is_a_usage_error_naming_it(tmp_path):
    (tmp_path / "a-file").touch()
    for out, why in ((tmp_path, "Is a directory"), (tmp_path / "a-file" / "log.csv", "a-file")):
        with pytest.raises(UsageError, match=f"cannot write {out}: .*{why}"):
            open_log(out, COLUMNS, "test")


def test_rows_of_other_settings_are_refused(tmp_path):
    out = tmp_path / "log.csv"
    check_same(out, {"seed": (1, ["1", "1"]), "device": ("cpu", [])})
    with pytest.raises(
        UsageError, match=r"log.csv holds rows of seed 0, 2, not 1; collect into another file"
    ):
        check_same(out, {"seed": (1, ["1", "2", "0", "2"])})
