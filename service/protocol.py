"""The HTTP protocol the service runs: uvicorn's (httptools), with limits on how a request arrives.

uvicorn times a connection out only while it idles after a response, and stops that timer at the
first byte: a client that opened a connection and sent nothing, or part of a request, held it for
good, and enough of them (a few bytes each) held every file descriptor the process may open. Nor
does it bound a request's head: headers of a few bytes each grew the process by 15 bytes for every
byte sent (3 GB in 7 s from one connection). Here a connection is closed when it has not delivered a
whole request, head and body, within ``ARRIVAL_TIMEOUT_S`` of starting to wait for one (its opening,
or the end of its last response), and a request head (its line and headers) over ``MAX_HEAD_BYTES``
is refused with a 431. Once a request has arrived, the request deadline (``middleware.Deadline``)
bounds its answer, and ``PREFLIGHT_MAX_BODY_BYTES`` its body.
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
#: Bytes a request's head may take (nginx: 4 buffers of 8 KiB; Node and h11: 16 KiB). The longest the
#: API needs is a device name of 128 characters in a path and an API key.
MAX_HEAD_BYTES = 64 * 1024


class ArrivalLimits(HttpToolsProtocol):
    """uvicorn's httptools protocol; a connection that keeps the service waiting for a request longer
    than ``arrival_timeout_s`` is closed, and a request head over ``MAX_HEAD_BYTES`` refused (431)."""

    arrival_timeout_s: ClassVar[float] = ARRIVAL_TIMEOUT_S
    _waiting: asyncio.TimerHandle | None = None
    _reading_head: bool = True  # between requests, or before a request's headers are complete
    _received: int = 0  # bytes received since the head began: all of it head while it is incomplete
    _parsed: int = 0  # bytes of the URL and headers the parser has given
    _head_too_large: bool = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._await_request()

    def data_received(self, data: bytes) -> None:
        if self._reading_head:
            self._received += len(data)
        super().data_received(data)
        if self._reading_head and self._received > MAX_HEAD_BYTES and not self.transport.is_closing():
            self._refuse_head()  # a head still incomplete: the parser holds what it has read of it

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._parsed = 0

    def on_url(self, url: bytes) -> None:
        super().on_url(url)
        self._count_head(len(url))

    def on_header(self, name: bytes, value: bytes) -> None:
        super().on_header(name, value)
        self._count_head(len(name) + len(value) + 4)  # as sent: ": " and the line's end

    def _count_head(self, size: int) -> None:
        """Stop the parser (uvicorn answers its error with ``send_400_response``) at a head too large,
        though it arrived whole within one read."""
        self._parsed += size
        if self._parsed > MAX_HEAD_BYTES:
            self._head_too_large = True
            raise ValueError("request head too large")

    def send_400_response(self, msg: str) -> None:
        if self._head_too_large:
            self._refuse_head()
        else:
            super().send_400_response(msg)

    def on_headers_complete(self) -> None:
        self._reading_head, self._received = False, 0
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        answered = self.cycle is not None and self.cycle.response_complete  # the rest of a refused body
        super().on_message_complete()
        self._reading_head = True
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
            log.warning(
                "closed %s's connection: no whole request within %g s", self._peer(), self.arrival_timeout_s
            )
            self.transport.close()

    def _refuse_head(self) -> None:
        """A 431 and the end of the connection (only the end where an answer is still being sent)."""
        log.warning("refused %s's request: its head is over %d bytes", self._peer(), MAX_HEAD_BYTES)
        if self.cycle is None or self.cycle.response_complete:
            detail = f"a request's line and headers take at most {MAX_HEAD_BYTES // 1024} KiB".encode()
            self.transport.write(
                b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: text/plain; charset=utf-8\r\n"
                b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(detail), detail)
            )
        self.transport.close()

    def _peer(self) -> str:
        return "{}:{}".format(*self.client) if self.client else "a client"
