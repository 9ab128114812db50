"""Pure ASGI middleware (no per-request Request objects or streamed copies of the body): request
metrics, and a deadline for answers."""

from __future__ import annotations

import asyncio
import time

from preflight.models.core import budget
from prometheus_client import Counter, Histogram
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class Observed:
    """Count each request by route and status, and time it."""

    def __init__(self, app: ASGIApp, requests: Counter, latency: Histogram) -> None:
        self.app, self.requests, self.latency = app, requests, latency

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status, start = 500, time.perf_counter()

        async def noted(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, noted)
        finally:
            route = scope.get("route")
            path = route.path if route is not None else "unmatched"
            self.latency.labels(path).observe(time.perf_counter() - start)
            self.requests.labels(path, str(status)).inc()


class Deadline:
    """A request not answered within ``seconds`` gets a 504, and its work stops at its next check
    (``budget.check_cancelled``; merged prediction calls drop it between calls); paths under
    ``exempt`` (changes of state) run to the end, so a client is never told 504 about a change that
    then lands."""

    def __init__(self, app: ASGIApp, seconds: float, exempt: tuple[str, ...]) -> None:
        self.app, self.seconds, self.exempt = app, seconds, exempt

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].startswith(self.exempt):
            await self.app(scope, receive, send)
            return
        started = False

        async def noted(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        with budget.cancellable() as cancel:
            try:
                await asyncio.wait_for(self.app(scope, receive, noted), self.seconds)
                return
            except TimeoutError:
                cancel.set()  # the work in worker threads stops at its next check
        if started:  # too late for another status: the connection just ends
            return
        detail = f"no answer within {self.seconds:g} s (PREFLIGHT_REQUEST_TIMEOUT_S); try fewer items"
        await JSONResponse({"detail": detail}, status_code=504)(scope, receive, send)


class HeadAsGet:
    """A HEAD request answers as the GET of its path would, headers only (RFC 9110: a server that
    answers GET answers HEAD; FastAPI routes list GET alone, so a monitor's ``HEAD /healthz`` got
    405). The server sends no body for HEAD."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "HEAD":
            scope = {**scope, "method": "GET"}
        await self.app(scope, receive, send)
