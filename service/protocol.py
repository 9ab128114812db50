"""The HTTP protocol the service runs: uvicorn's (httptools), with a deadline for each request to arrive.

uvicorn times a connection out only while it idles after a response, and stops that timer at the
first byte: a client that opened a connection and sent nothing, or part of a request's head, held it
for good, and enough of them (a few bytes each) held every file descriptor the process may open.
Here a connection that has not delivered a whole request, head and body, within
``ARRIVAL_TIMEOUT_S`` of starting to wait for one (its opening, or the end of its last response) is
closed. Once a request has arrived, the request deadline (``middleware.Deadline``) bounds its answer.
"""

from __future__ import annotations

import asyncio
import logging
from typing import ClassVar

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

log = logging.getLogger("preflight.service")

#: Seconds a connection may take to send a whole request (nginx allows 60 for the head alone, Apache
#: 20-40): ample for a 4 MB body on a slow link, short enough that held connections do not pile up.
ARRIVAL_TIMEOUT_S = 20.0


class ArrivalDeadline(HttpToolsProtocol):
    """uvicorn's httptools protocol; a connection that keeps the service waiting for a request longer
    than ``arrival_timeout_s`` is closed."""

    arrival_timeout_s: ClassVar[float] = ARRIVAL_TIMEOUT_S
    _waiting: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._await_request()

    def on_message_complete(self) -> None:
        answered = self.cycle is not None and self.cycle.response_complete  # the rest of a refused body
        super().on_message_complete()
        if not answered:
            self._stop_waiting()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        latest = self.cycle  # the last request parsed: a pipelined one may have started now
        if not self.transport.is_closing() and (latest.response_complete or latest.more_body):
            self._await_request()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_waiting()
        super().connection_lost(exc)

    def _await_request(self) -> None:
        self._stop_waiting()
        self._waiting = self.loop.call_later(self.arrival_timeout_s, self._close_slow_connection)

    def _stop_waiting(self) -> None:
        if self._waiting is not None:
            self._waiting.cancel()
            self._waiting = None

    def _close_slow_connection(self) -> None:
        self._waiting = None
        if not self.transport.is_closing():
            client = "{}:{}".format(*self.client) if self.client else "a client"
            log.warning(
                "closed %s's connection: no whole request within %g s", client, self.arrival_timeout_s
            )
            self.transport.close()
