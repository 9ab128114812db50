"""Threads and the interpreter: torch's thread count for the length of a block, and parsing serialised on
CPython before 3.11.8, whose AST constructor fails when two threads parse at once."""

from __future__ import annotations

import ast
import functools
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

#: Held while ``ast.parse`` runs, once ``serialise_parsing`` has wrapped it.
PARSING = threading.RLock()
#: The first CPython whose AST constructor counts its recursion per call (gh-106905's 3.11 backport).
FIXED_PARSING = (3, 11, 8)


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
    """Before CPython 3.11.8, make ``ast.parse`` (and so ``ast.literal_eval``) one thread at a time, once
    per process. Until then the AST constructor kept its recursion depth in state every thread shares,
    so two threads parsing at once could fail with ``SystemError: AST constructor recursion depth
    mismatch`` (python/cpython gh-106905). numpy parses every ``.npy`` header that way when a served
    model loads, and the FPGA featurizer parses C literals: a reload beside a request, or beside an
    in-process test client, failed so."""
    if sys.version_info >= FIXED_PARSING or getattr(ast.parse, "__wrapped__", None) is not None:
        return
    ast.parse = _serialised(ast.parse)


def _serialised(parse: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(parse)
    def parse_alone(*args: Any, **kwargs: Any) -> Any:
        with PARSING:
            return parse(*args, **kwargs)

    return parse_alone
