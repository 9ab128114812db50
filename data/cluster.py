"""The Ray cluster work fans out to, when ``RAY_ADDRESS`` names one (Ray's own convention: ``auto`` for the
cluster this machine belongs to, ``ray://HOST:10001`` for a remote one); without it Ray is never imported.

``fleet`` is how a collector spreads over a cluster: long-lived workers, one per GPU or node, each fed its
calls one at a time by this process, which alone writes what they return (``models/core/parallel`` fans
out the stateless work of evaluations and scoring).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from types import ModuleType
from typing import Any, Protocol

from preflight.data.errors import UsageError

#: How many times a Ray task or worker that died (a node lost, a process killed) is run again.
RETRIES = 3
_DRAINED = object()


class Worker(Protocol):
    """A fleet's worker: says what it runs on, then runs calls."""

    def describe(self) -> Any: ...

    def run(self, call: Any) -> Any: ...


def cluster() -> str | None:
    """The Ray cluster work fans out to, if any (``RAY_ADDRESS``)."""
    return os.environ.get("RAY_ADDRESS") or None


def connected(address: str) -> ModuleType:
    """Ray, connected to the cluster at ``address``."""
    try:
        import ray
    except ImportError:
        raise UsageError(
            f"RAY_ADDRESS={address}, but Ray is not installed: pip install 'preflight[ray]'"
        ) from None
    ray.init(address=address, ignore_reinit_error=True, log_to_driver=False)
    return ray


def fleet_size(asked: int | None, resource: str) -> int:
    """How many workers a fleet starts: one without a cluster; on one, ``asked`` or one per ``resource``
    the cluster holds (``CPU``, ``GPU``, or ``node`` for the nodes alive)."""
    address = cluster()
    if address is None:
        return 1
    ray = connected(address)
    if resource == "node":
        held = sum(1 for node in ray.nodes() if node["Alive"])
    else:
        held = int(ray.cluster_resources().get(resource, 0))
    if held < 1:
        raise UsageError(f"the Ray cluster at {address} holds no {resource}")
    return asked or held


def fleet(
    worker: Callable[..., Worker],
    arguments: tuple,
    count: int,
    options: Mapping[str, Any],
    calls_for: Callable[[int, Any], Iterable[Any]],
) -> Iterator[tuple[int, Any, Any]]:
    """Start ``count`` workers ``worker(*arguments)``, ask each to ``describe`` itself, and feed worker
    ``i`` the calls of ``calls_for(i, description)`` one at a time; yield ``(i, call, result)`` as each
    comes back. Without a cluster the workers run here, one after the other. On a cluster each is a Ray
    actor placed by ``options`` (``num_gpus=1``, ``scheduling_strategy="SPREAD"``...); one whose process
    dies is started again and its call run again, so every call's result is yielded exactly once."""
    address = cluster()
    if address is None:
        for i in range(count):
            here = worker(*arguments)
            for call in calls_for(i, here.describe()):
                yield i, call, here.run(call)
        return
    ray = connected(address)
    actor = ray.remote(max_restarts=RETRIES, max_task_retries=RETRIES, **options)(worker)
    handles = [actor.remote(*arguments) for _ in range(count)]
    queues = [iter(calls_for(i, d)) for i, d in enumerate(ray.get([h.describe.remote() for h in handles]))]
    in_flight: dict[Any, tuple[int, Any]] = {}

    def feed(i: int) -> None:
        call = next(queues[i], _DRAINED)
        if call is not _DRAINED:
            in_flight[handles[i].run.remote(call)] = (i, call)

    try:
        for i in range(count):
            feed(i)
        while in_flight:
            [ready], _ = ray.wait(list(in_flight), num_returns=1)
            i, call = in_flight.pop(ready)
            result = ray.get(ready)
            feed(i)  # the worker's next call goes out before this result is written
            yield i, call, result
    finally:
        for handle in handles:
            ray.kill(handle)
