"""Threads and the interpreter: torch's thread count for the length of a block, and ``ast.parse`` one
thread at a time on the CPython releases whose AST constructor fails when two threads parse at once."""

from __future__ import annotations

import ast
import functools
import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

#: Held while ``ast.parse`` runs, once ``serialise_parsing`` has wrapped it.
PARSING = threading.RLock()
#: Whether this interpreter's AST constructor shares its recursion depth between threads (python/cpython
#: gh-106905: fixed in 3.11.8 and 3.12.2).
RACY_PARSING = sys.version_info < (3, 11, 8) or (3, 12) <= sys.version_info < (3, 12, 2)


@contextmanager
def torch_threads(threads: int | None) -> Iterator[None]:
    """Run the block on ``threads`` torch threads (None: leave the count as it is). One thread makes
    small models' arithmetic the same on every machine and avoids a second thread's stalls when the
    other core is busy."""
    import torch

    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def serialise_parsing() -> None:
    """Where ``RACY_PARSING``, make ``ast.parse`` (and so ``ast.literal_eval``) one thread at a time, once
    per process. There two threads parsing at once can fail with ``SystemError: AST constructor
    recursion depth mismatch``. numpy parses every ``.npy`` header that way when a served model loads,
    and the FPGA featurizer parses C literals: a reload beside a request, or beside an in-process test
    client, failed so. Code that calls ``compile`` for an AST itself, or imported ``parse`` from
    ``ast`` before this ran, is not serialised."""
    if not RACY_PARSING or getattr(ast.parse, "_serialised", False):
        return
    ast.parse = _serialised(ast.parse)
    os.register_at_fork(after_in_child=_new_lock)  # a child must not inherit a lock held by a thread


def _serialised(parse: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(parse)
    def parse_alone(*args: Any, **kwargs: Any) -> Any:
        with PARSING:
            return parse(*args, **kwargs)

    parse_alone._serialised = True  # type: ignore[attr-defined]
    return parse_alone


def _new_lock() -> None:
    global PARSING
    PARSING = threading.RLock()
