"""Work that fans out: run here (one call after another, or side by side on this machine's CPUs where the
calls allow it), or as Ray tasks on the cluster ``RAY_ADDRESS`` names (``data/cluster``). Without it Ray is
never imported. Either way the same function runs on the same arguments, so the answers are the same;
only where they are computed differs."""

from __future__ import annotations

import itertools
import os
import threading
import warnings
from collections import deque
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from preflight.data.cluster import RETRIES, cluster, connected
from preflight.models.presentation import progress

T = TypeVar("T")
#: The size Ray Data's blocks of a scored file are cut to (bytes).
BLOCK_BYTES = 4 * 2**20
_pool = threading.local()  # ``inside``: this thread runs the calls of a local pool


def fan_out(
    function: Callable[..., T],
    calls: Sequence[tuple],
    description: str,
    shared: dict[str, Any] | None = None,
    local: bool = False,
) -> list[T]:
    """``function(*call, **shared)`` for each call, in order. On a cluster each call is a Ray task of
    one CPU, and ``shared`` (large arguments every call reads) goes to the cluster's object store once;
    a call whose worker dies (a node lost, a process killed) runs again, up to ``RETRIES`` times. Where
    the calls leave CPUs of the cluster idle, each task fans out in turn (an outer fold's calibration
    folds): its worker sees the cluster as ``auto``, and Ray lends a waiting task's CPU to others.

    Without a cluster the calls run here, one after another; with ``local`` (calls that share no mutable
    state and spend much of their time where the GIL is released, as LightGBM's fits do) on threads,
    one per CPU this process may use (``local_cpus``); a call on one of them fans out one call at a
    time."""
    shared = shared or {}
    address = cluster()
    if address is None:
        width = min(len(calls), local_cpus()) if local else 1
        if width <= 1:
            return [function(*call, **shared) for call in progress.track(calls, description)]
        return _on_threads(function, calls, shared, width, description)
    ray = connected(address)
    idle = ray.cluster_resources().get("CPU", 0) > len(calls)  # else nesting costs more than it lends
    nested = {"env_vars": {"RAY_ADDRESS": "auto"}} if idle else None
    remote = ray.remote(num_cpus=1, max_retries=RETRIES, runtime_env=nested)(function)
    stored = {name: ray.put(value) for name, value in shared.items()}
    with progress.step(f"{description} ({len(calls)} Ray tasks on {address})"):
        return ray.get([remote.remote(*call, **stored) for call in calls])


def local_cpus() -> int:
    """The CPUs a call running here may keep busy: one on a local pool's thread; else ``OMP_NUM_THREADS``
    where set (as Ray sets it for a task of one CPU), else the CPUs this process may run on."""
    if getattr(_pool, "inside", False):
        return 1
    if (asked := os.environ.get("OMP_NUM_THREADS", "")).isdigit() and int(asked) > 0:
        return int(asked)
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _on_threads(
    function: Callable[..., T], calls: Sequence[tuple], shared: dict[str, Any], width: int, description: str
) -> list[T]:
    """The calls on ``width`` threads, a new one started as one ends, so that no more than ``width`` wait
    to finish when the process exits or a call fails. Python's warnings are off meanwhile: their filters
    are global to the process, and a library's ``catch_warnings`` (pandas' ``median``) on one thread
    restores the filters under another's, turning a warning it silences into one shown (an error under
    ``-W error``). The price: other threads' warnings are off meanwhile too, and another thread's
    ``catch_warnings`` block that spans the pool's end restores the filters with them off."""
    results: dict[int, T] = {}
    waiting = iter(enumerate(calls))
    running: dict[Future[T], int] = {}
    with _quiet_pool(width) as pool:
        for _ in progress.track(range(len(calls)), description):
            for i, call in itertools.islice(waiting, width - len(running)):
                running[pool.submit(_on_pool, function, call, shared)] = i
            ended = next(as_completed(running))
            results[running.pop(ended)] = ended.result()
    return [results[i] for i in range(len(calls))]


def stream_local(function: Callable[..., T], calls: Iterable[tuple], most: int) -> Generator[T]:
    """``function(*call)`` for each call as the calls come (a file's batches), in order, side by side on
    this machine's CPUs (``local_cpus``, at most ``most``; one after another where that is one): as many
    run and one more waits to be taken, so memory follows them, not the calls. A failed call, or the
    stream closed early, cancels the calls not yet started. Warnings are off meanwhile, as in
    ``_on_threads``."""
    width = min(local_cpus(), most)
    if width <= 1:
        yield from (function(*call) for call in calls)
        return
    with _quiet_pool(width) as pool:
        pending: deque[Future[T]] = deque()
        try:
            for call in calls:
                pending.append(pool.submit(_on_pool, function, call, {}))
                if len(pending) > width:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            for future in pending:
                future.cancel()


@contextmanager
def _quiet_pool(width: int) -> Iterator[ThreadPoolExecutor]:
    """A pool of ``width`` threads, with Python's warnings off until it has shut down (``_on_threads``
    says why)."""
    with warnings.catch_warnings(), ThreadPoolExecutor(width, thread_name_prefix="preflight") as pool:
        warnings.simplefilter("ignore")
        yield pool


def _on_pool(function: Callable[..., T], call: tuple, shared: dict[str, Any]) -> T:
    _pool.inside = True
    return function(*call, **shared)


def map_file(
    path: Path, batch_rows: int, make_transform: Callable[[], Callable[[Any], Any]], address: str
) -> Generator[Any]:
    """The Parquet or CSV file's rows in Arrow tables of at most ``batch_rows`` rows, each through the
    transform ``make_transform()`` builds once per Ray worker (one CPU each, as many as the cluster
    holds), in the file's order: Ray Data streams the file, so memory follows the batches in flight."""
    ray = connected(address)
    from ray import data

    context = data.DataContext.get_current()
    context.execution_options.preserve_order = True
    context.target_max_block_size = BLOCK_BYTES  # blocks small enough to spread over every worker
    read = data.read_parquet if path.suffix == ".parquet" else data.read_csv
    workers = max(1, int(ray.cluster_resources().get("CPU", 1)))
    transformed = read(str(path), num_cpus=0).map_batches(  # reading is I/O: the CPUs are the workers'
        _Transform,
        fn_constructor_args=(make_transform,),
        batch_size=batch_rows,
        batch_format="pyarrow",
        num_cpus=1,
        concurrency=(1, workers),  # one to start: listing the file takes a CPU first
    )  # a worker that dies is restarted and its batch retried (Ray Data's default for actors)
    yield from transformed.iter_batches(batch_size=None, batch_format="pyarrow")


class _Transform:
    """A Ray Data worker's transform, built once when the worker starts."""

    def __init__(self, make_transform: Callable[[], Callable[[Any], Any]]) -> None:
        self.transform = make_transform()

    def __call__(self, batch: Any) -> Any:
        return self.transform(batch)
