"""``ast.parse`` one thread at a time where CPython's AST constructor races (python/cpython gh-106905),
from importing preflight on."""

import ast
import threading

import numpy as np
import preflight  # noqa: F401  (importing it serialises parsing)
import pytest
from preflight.data import threads

pytestmark = pytest.mark.skipif(not threads.RACY_PARSING, reason="this CPython parses safely in threads")


def test_a_parse_waits_while_another_thread_parses(tmp_path):
    """numpy reads a ``.npy`` header with ``ast.literal_eval``, as a served model's load does: while
    another parse holds the lock it waits, and it goes through once the lock is free."""
    np.save(tmp_path / "a.npy", np.arange(3.0))
    loading, loaded = threading.Event(), []

    def load() -> None:
        loading.set()
        loaded.append(np.load(tmp_path / "a.npy"))

    reader = threading.Thread(target=load)
    with threads.PARSING:
        reader.start()
        assert loading.wait(timeout=10)
        reader.join(timeout=0.5)
        assert reader.is_alive() and not loaded
    reader.join(timeout=10)
    assert not reader.is_alive() and loaded[0].tolist() == [0.0, 1.0, 2.0]


def test_parsing_is_wrapped_once_and_still_parses():
    wrapped = ast.parse
    threads.serialise_parsing()
    assert ast.parse is wrapped and ast.parse._serialised  # type: ignore[attr-defined]
    assert ast.literal_eval("(1, 2.5)") == (1, 2.5)
    assert isinstance(ast.parse("x + 1", mode="eval").body, ast.BinOp)
