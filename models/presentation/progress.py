"""Progress of long loops, drawn only where a command asks for it.

Model code reports its loops (``for fold in progress.track(folds, "calibration folds")``) and slow steps
(``with progress.step("final fit")``); both are no-ops unless the caller runs them inside
``with progress.shown(console):``, as the CLI does. The library, the service and tests stay quiet.
The reporter lives in a context variable: a thread started elsewhere (the service's) never sees it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress, TaskID

T = TypeVar("T")

_shown: ContextVar[Progress | None] = ContextVar("preflight_progress", default=None)


@contextmanager
def shown(console: Console) -> Iterator[None]:
    """Draw the loops and steps reported within the block as rich progress bars on ``console``, where it
    is a terminal (a file or a pipe gets nothing)."""
    from rich.progress import BarColumn, Progress, SpinnerColumn, TimeElapsedColumn

    if not console.is_interactive:
        yield
        return
    columns = (
        SpinnerColumn(),
        "{task.description}",
        BarColumn(),
        "{task.fields[count]}",
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=True) as bars:
        token = _shown.set(bars)
        try:
            yield
        finally:
            _shown.reset(token)


def track(items: Sequence[T], description: str) -> Iterator[T]:
    """The items, one by one, counted (``i/n``) on a bar while shown."""
    bars = _shown.get()
    if bars is None:
        yield from items
        return
    n = len(items)
    with _task(bars, description, n, f"0/{n}") as task:
        for done, item in enumerate(items, 1):
            yield item
            bars.update(task, advance=1, count=f"{done}/{n}", refresh=True)


@contextmanager
def step(description: str) -> Iterator[None]:
    """A block shown as one running step (a spinner and its time) while shown."""
    bars = _shown.get()
    if bars is None:
        yield
        return
    with _task(bars, description, None, ""):
        yield


@contextmanager
def _task(bars: Progress, description: str, total: int | None, count: str) -> Iterator[TaskID]:
    """A row on the bars for the block, removed after it."""
    task = bars.add_task(description, total=total, count=count)
    bars.refresh()
    try:
        yield task
    finally:
        bars.remove_task(task)
