"""The service's HTTP protocol on a live uvicorn (127.0.0.1): a connection that keeps it waiting for a
request is closed, and a request head over its limit refused; one that sends its requests in time,
or waits for a slow answer, is served."""

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from typing import BinaryIO

import pytest
import uvicorn
from preflight.service.protocol import MAX_HEAD_BYTES, ArrivalLimits

from tests.conftest import free_port

DEADLINE_S = 0.5
#: How long a test waits for what should happen well within it.
PATIENCE_S = 10.0


class ShortDeadline(ArrivalLimits):
    arrival_timeout_s = DEADLINE_S


async def echo(scope, receive, send) -> None:
    """Answers each request with its body's length, after ``?sleep`` seconds; with ``?unread`` at once,
    its body unread (as a 404 or a 413 answers)."""
    if scope["type"] != "http":
        return
    length, more = 0, scope["query_string"] != b"unread"
    while more:
        message = await receive()
        length += len(message.get("body", b""))
        more = message.get("more_body", False)
    query = scope["query_string"].decode()
    if query.startswith("sleep="):
        await asyncio.sleep(float(query.removeprefix("sleep=")))
    body = str(length).encode()
    await send(
        {"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"%d" % len(body))]}
    )
    await send({"type": "http.response.body", "body": body})


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    free = free_port()
    server = uvicorn.Server(
        uvicorn.Config(echo, host="127.0.0.1", port=free, http=ShortDeadline, log_level="error")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + PATIENCE_S
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.01)
    yield free
    server.should_exit = True
    thread.join(PATIENCE_S)


def connect(port: int) -> socket.socket:
    connection = socket.create_connection(("127.0.0.1", port))
    connection.settimeout(PATIENCE_S)
    return connection


def closed_within(connection: socket.socket) -> float:
    """Seconds until the server closes the connection (reads what it sends meanwhile)."""
    start = time.monotonic()
    while connection.recv(4096):
        pass
    return time.monotonic() - start


def request(body: bytes = b"", query: str = "") -> bytes:
    target = f"/?{query}" if query else "/"
    return f"POST {target} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body


def answer(reader: BinaryIO) -> bytes:
    """One response's body, read from the connection's file (``socket.makefile("rb")``)."""
    length = 0
    while (line := reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.partition(b":")
        if name.lower() == b"content-length":
            length = int(value)
    return reader.read(length)


HEAD = b"POST / HTTP/1.1\r\nHost: x\r\n"


@pytest.mark.parametrize(
    "sent",
    [
        [],
        [HEAD],
        [request(b"0123456789")[:-4]],
        [request(b"hello", query="unread")[:-5], b"hello", b"GET / HT"],
        [request(query=f"sleep={DEADLINE_S / 2}") + request(b"hello")[:-3]],
    ],
    ids=[
        "nothing",
        "part of a head",
        "part of a body",
        "a body answered before it came, then part of a head",
        "a pipelined request's part of a body",
    ],
)
def test_a_connection_that_sends_no_whole_request_in_time_is_closed(port, sent):
    """uvicorn held such a connection for good: a few bytes each held the process's descriptors."""
    with connect(port) as connection:
        for part in sent:
            connection.sendall(part)
            time.sleep(DEADLINE_S / 5)
        assert closed_within(connection) < PATIENCE_S / 2


def test_requests_sent_in_time_are_answered_and_the_connection_is_kept_between_them(port):
    with connect(port) as connection:
        reader = connection.makefile("rb")
        for part in (HEAD, b"Content-Length: 3\r\n\r\n", b"abc"):
            connection.sendall(part)
            time.sleep(DEADLINE_S / 4)  # slow, but the whole request arrives within the deadline
        assert answer(reader) == b"3"
        time.sleep(DEADLINE_S / 2)
        connection.sendall(request(b"abcde"))  # the next request's wait started with the last answer
        assert answer(reader) == b"5"
        assert closed_within(connection) < PATIENCE_S / 2  # then, idle, it is closed


def test_an_answer_slower_than_the_deadline_is_not_cut_off_nor_are_requests_pipelined_behind_it(port):
    """The deadline bounds a request's arrival only; its answer is the request deadline's business."""
    with connect(port) as connection:
        slow = request(b"ab", query=f"sleep={3 * DEADLINE_S}")
        connection.sendall(slow + slow + request(b"abc"))
        reader = connection.makefile("rb")
        assert [answer(reader) for _ in range(3)] == [b"2", b"2", b"3"]


@pytest.mark.parametrize(
    "head",
    [b"X-A: b\r\n" * (MAX_HEAD_BYTES // 8 + 1), b"X-Big: " + b"b" * MAX_HEAD_BYTES + b"\r\n"],
    ids=["many small headers", "one large header"],
)
def test_a_request_head_over_the_limit_is_refused_with_a_431(port, head):
    """uvicorn bounded neither: small headers grew the server by 15 bytes a byte sent (3 GB in 7 s)."""
    with connect(port) as connection:
        try:
            connection.sendall(HEAD + head + b"Content-Length: 0\r\n\r\n")
        except ConnectionResetError:  # closed while the rest was still being sent
            pass
        refusal = connection.recv(4096)
    assert refusal.startswith(b"HTTP/1.1 431 ") and b"at most 64 KiB" in refusal


def test_a_head_within_the_limit_is_served_with_a_body_of_any_size(port):
    """A head and a large body in the same reads are not counted together."""
    with connect(port) as connection:
        reader = connection.makefile("rb")
        padding = b"X-Pad: " + b"p" * (MAX_HEAD_BYTES - 1024) + b"\r\n"
        body = b"b" * (4 * MAX_HEAD_BYTES)
        connection.sendall(HEAD + padding + b"Content-Length: %d\r\n\r\n" % len(body) + body)
        assert answer(reader) == str(len(body)).encode()
        connection.sendall(request(b"abc"))  # and the next request's head counts from nothing
        assert answer(reader) == b"3"


def test_preflight_serve_runs_this_protocol(monkeypatch, tmp_path):
    import preflight
    from preflight.service import app

    served = {}
    monkeypatch.setattr(uvicorn, "run", lambda application, **options: served.update(options))
    monkeypatch.setattr(app, "create_app", lambda *args, **kwargs: None)
    preflight.serve(home=tmp_path)
    assert served["http"] is ArrivalLimits
