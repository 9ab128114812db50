"""Work that fans out: run here, one call after another, or as Ray tasks on a cluster when
``RAY_ADDRESS`` names one (Ray's own convention: ``auto`` for the cluster this machine belongs to,
``ray://HOST:10001`` for a remote one). Without it Ray is never imported. Either way the same function
runs on the same arguments, so the answers are the same; only where they are computed differs."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from preflight.data.errors import UsageError
from preflight.models.presentation import progress

T = TypeVar("T")


def cluster() -> str | None:
    """The Ray cluster work fans out to, if any (``RAY_ADDRESS``)."""
    return os.environ.get("RAY_ADDRESS") or None


def fan_out(
    function: Callable[..., T], calls: Sequence[tuple], description: str, shared: dict[str, Any] | None = None
) -> list[T]:
    """``function(*call, **shared)`` for each call, in order. On a cluster each call is a Ray task of
    one CPU, and ``shared`` (large arguments every call reads) goes to the cluster's object store once."""
    shared = shared or {}
    address = cluster()
    if address is None:
        return [function(*call, **shared) for call in progress.track(calls, description)]
    try:
        import ray
    except ImportError:
        raise UsageError(
            f"RAY_ADDRESS={address}, but Ray is not installed: pip install 'preflight[ray]'"
        ) from None
    ray.init(address=address, ignore_reinit_error=True, log_to_driver=False)
    remote = ray.remote(num_cpus=1)(function)
    stored = {name: ray.put(value) for name, value in shared.items()}
    with progress.step(f"{description} ({len(calls)} Ray tasks on {address})"):
        return ray.get([remote.remote(*call, **stored) for call in calls])
