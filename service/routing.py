"""The route class of every API router: a JSON body must be Unicode text (UTF-8), of bounded size.

JSON may escape a lone surrogate (``"\\ud800"``), which decodes to a Python string that no UTF-8
encoder accepts: echoed in an error or an answer it turned a bad request into a 500. Such a body is
refused as invalid JSON (422) naming the field, before any route sees it; so is one of more values
than the service decodes while other requests wait (``MAX_JSON_VALUES``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine, Iterator
from typing import Any

from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.responses import Response

#: Most JSON values (numbers, strings, lists, objects) a body may hold: 10,000 GEMM items with every
#: field given hold about 100,000.
MAX_JSON_VALUES = 200_000


class UnicodeRequest(Request):
    """A request whose JSON body is refused (``json.JSONDecodeError``) if it is not UTF-8 text or a
    string of it holds a lone surrogate; checked only when the body has an escape at all (a raw
    surrogate is not UTF-8)."""

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            body = await self.body()
            _refuse_too_many_values(body)
            text = _text(body)
            value = json.loads(text)
            if "\\u" in text:
                _refuse_lone_surrogates(value, text)
            self._json = value
        return self._json


class UnicodeRoute(APIRoute):
    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def route(request: Request) -> Response:
            return await handler(UnicodeRequest(request.scope, request.receive))

        return route


def _text(body: bytes) -> str:
    """The body as UTF-8 text (JSON's encoding, RFC 8259; a byte order mark is ignored), or a
    JSONDecodeError at its first byte that is not."""
    try:
        return body.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        raise json.JSONDecodeError(
            f"the body is not UTF-8 text: byte 0x{body[exc.start]:02x} at position {exc.start}", "", exc.start
        ) from None


def _refuse_too_many_values(body: bytes) -> None:
    """Refuse a body of more than :data:`MAX_JSON_VALUES` values before parsing it: decoding holds the
    interpreter for its whole length (a quarter of a second for 4 MB of two-element lists), and
    nothing else runs meanwhile. Separators and openings bound the count from above, in one pass."""
    values = body.count(b",") + body.count(b"[") + body.count(b"{")
    if values > MAX_JSON_VALUES:
        raise json.JSONDecodeError(
            f"the body holds about {values:,} JSON values; a request holds at most {MAX_JSON_VALUES:,}: "
            "split it",
            "",
            0,
        )


def _refuse_lone_surrogates(value: Any, document: str) -> None:
    found = lone_surrogate(value)
    if found is not None:
        where, unit = found
        raise json.JSONDecodeError(
            f"{where} holds a lone surrogate ({unit}), which is not Unicode text",
            document,
            max(document.lower().find(unit), 0),
        )


def lone_surrogate(value: Any) -> tuple[str, str] | None:
    """Where a decoded JSON value first holds a lone surrogate (``items.0.device``) and its escape
    (``\\ud800``), or None."""
    for where, text in _strings(value):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            return ".".join(map(str, _path(where))) or "the value", f"\\u{ord(text[exc.start]):04x}"
    return None


#: Where a value sits: its key or index and where its parent sits (None: the root). Linked, not a
#: tuple per value: copying each path took depth × breadth (seconds for a 382 KB body).
_Where = tuple[str | int, "_Where"] | None


def _strings(value: Any) -> Iterator[tuple[_Where, str]]:
    """Every string of a decoded JSON value, keys included, with where it sits (iteratively: a body
    may nest deeper than Python recurses)."""
    stack: list[tuple[_Where, Any]] = [(None, value)]
    while stack:
        where, node = stack.pop()
        if isinstance(node, str):
            yield where, node
        elif isinstance(node, dict):
            for key, child in node.items():
                here = (key, where)
                yield here, key
                stack.append((here, child))
        elif isinstance(node, list):
            stack.extend(((i, where), child) for i, child in enumerate(node))


def _path(where: _Where) -> list[str | int]:
    """The keys and indexes from the root down to ``where``."""
    keys: list[str | int] = []
    while where is not None:
        key, where = where
        keys.append(key)
    return keys[::-1]
