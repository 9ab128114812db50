"""Several state files changed as one: a crash leaves all of them changed or none."""

import json

import pytest
from preflight.data import store


class Killed(Exception):
    pass


def _files(folder):
    return {p.name: p.read_text() for p in sorted(folder.iterdir())}


def test_files_written_together(tmp_path):
    store.write_together(tmp_path, {"a.json": b"1", "b.json": b"2"})
    assert _files(tmp_path) == {"a.json": "1", "b.json": "2"}


def test_a_crash_after_the_journal_is_completed_at_the_next_start(tmp_path, monkeypatch):
    store.write_together(tmp_path, {"a.json": b"old", "b.json": b"old"})
    real = store.atomic_write_bytes

    def killed_at_b(path, payload):
        if path.name == "b.json":
            raise Killed
        real(path, payload)

    monkeypatch.setattr(store, "atomic_write_bytes", killed_at_b)
    with pytest.raises(Killed):
        store.write_together(tmp_path, {"a.json": b"new", "b.json": b"new"})
    monkeypatch.undo()
    assert (tmp_path / "a.json").read_text() == "new" and (tmp_path / "b.json").read_text() == "old"
    assert store.finish_journal(tmp_path) == ["a.json", "b.json"]
    assert _files(tmp_path) == {"a.json": "new", "b.json": "new"}
    assert store.finish_journal(tmp_path) == []


def test_a_crash_before_the_journal_changes_nothing(tmp_path, monkeypatch):
    store.write_together(tmp_path, {"a.json": b"old", "b.json": b"old"})
    monkeypatch.setattr(store.os, "replace", lambda *_: (_ for _ in ()).throw(Killed()))
    with pytest.raises(Killed):
        store.write_together(tmp_path, {"a.json": b"new", "b.json": b"new"})
    monkeypatch.undo()
    assert store.finish_journal(tmp_path) == []
    assert {k: v for k, v in _files(tmp_path).items() if not k.startswith(".")} == {
        "a.json": "old",
        "b.json": "old",
    }


@pytest.mark.parametrize("journal", ['{"../escape.json": "x"}', '{"a.json": 1}', "[1, 2]", '{"a.json": "x'])
def test_a_damaged_journal_is_set_aside_and_changes_nothing(tmp_path, journal):
    (tmp_path / "a.json").write_text("old")
    (tmp_path / store.JOURNAL).write_text(journal)
    assert store.finish_journal(tmp_path) == []
    assert (tmp_path / "a.json").read_text() == "old" and not (tmp_path.parent / "escape.json").exists()
    assert not (tmp_path / store.JOURNAL).exists() and list(tmp_path.glob(".journal.json.damaged-*"))


def test_entries_set_aside_keep_every_entry(tmp_path):
    path = tmp_path / "measurements.json"
    first = store.set_aside_entries(path, [{"row": 1}])
    second = store.set_aside_entries(path, [{"row": 2}])
    assert first != second
    assert [json.loads((tmp_path / name).read_text()) for name in (first, second)] == [
        [{"row": 1}],
        [{"row": 2}],
    ]
