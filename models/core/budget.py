"""What one request may ask of the service, counted before any work is done for it.

Each task prices an item from its raw fields in O(1) (``Task.cost``: a whole model's kernels, a
graph's nodes and edges; 1 by default), and a request's items are summed against a budget before
any of them is validated, so that a few hundred bytes cannot buy minutes of work. A what-if pays for
every item on every device. :func:`check_cancelled` is the other half: work that its caller stopped
waiting for (a request past its deadline) stops at its next check.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from preflight.data.errors import Cancelled, OverBudget
from preflight.models.core.task import Task

#: Work units one request may ask for: one unit is about one GEMM estimate (~30 µs of one core), so
#: a budget is a few seconds of work.
MAX_REQUEST_COST = 100_000

_cancel: ContextVar[threading.Event | None] = ContextVar("preflight_cancel", default=None)


def check(task: Task, items: Sequence[Any], per_item: int = 1, where: str = "items") -> list[float]:
    """Each raw item's cost; refuses ``items`` (raw, before validation) whose summed cost ×
    ``per_item`` (devices of a what-if) passes :data:`MAX_REQUEST_COST`, naming the item where it ran
    out and by how much."""
    total, costs = 0.0, []
    for i, item in enumerate(items):
        costs.append(task.item_cost(item))
        total += costs[-1] * per_item
        if total > MAX_REQUEST_COST:
            times = f" ({per_item} devices each)" if per_item > 1 else ""
            raise OverBudget(
                f"{where}[{i}]: with this item the request asks for {total:,.0f} units of work{times}, "
                f"more than the {MAX_REQUEST_COST:,} one request may ({task.name} counts "
                f"{task.cost_unit}): send fewer or smaller items, or split the request",
                ["body", *where.split("."), i],
            )
    return costs


@contextmanager
def cancellable() -> Iterator[threading.Event]:
    """A scope whose work stops at its next :func:`check_cancelled` once the event is set (worker
    threads started inside it see the same event)."""
    event = threading.Event()
    token = _cancel.set(event)
    try:
        yield event
    finally:
        _cancel.reset(token)


def check_cancelled() -> None:
    """Raise ``Cancelled`` if the work's caller stopped waiting for it."""
    event = _cancel.get()
    if event is not None and event.is_set():
        raise Cancelled("the request's deadline passed: its work was stopped")
