"""Concurrent prediction requests of one task merged into model calls of bounded work.

A scheduler sends many one-item requests at once; each costs a fixed few milliseconds of
featurizing and calibration, while a call of hundreds of items costs little more than one. Requests
that arrive while a call is computing wait for it to finish and then go together, so an idle service
adds no delay and a busy one answers many requests per model call.

A call takes at most :data:`CALL_COST` units of work (``models/core/budget.py``), so a large request is
answered over several calls. Between calls, a request whose client has gone (its deadline passed)
drops what it has left, and requests not yet started go before one already under way: a large
request delays a small one by one call at most. A request a merged call fails on (an unknown device
in one of them) is answered on its own, so its error names its own items.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fastapi.concurrency import run_in_threadpool
from preflight.data.errors import PreflightError

#: Items of one model call, at most.
MAX_MERGED_ITEMS = 2_000
#: Work units of one model call, at most (about a tenth of a second of one core); a call holds at
#: least one item whatever it costs.
CALL_COST = 3_000.0

Predict = Callable[[Any, list[Any], float], list[dict]]


@dataclass
class _Request:
    model: Any
    items: list[Any]
    coverage: float
    costs: list[float]
    answer: asyncio.Future
    records: list[dict] = field(default_factory=list)

    @property
    def started(self) -> bool:
        return bool(self.records)


@dataclass
class _Slice:
    """The next ``count`` items of a request, in one call."""

    request: _Request
    count: int

    @property
    def items(self) -> list[Any]:
        done = len(self.request.records)
        return self.request.items[done : done + self.count]


@dataclass
class Batcher:
    """``await batcher.predict(model, items, coverage, costs)``: the records of ``predict(model,
    items, coverage)``, computed in calls of bounded work together with the requests beside it."""

    predict_records: Predict
    pending: list[_Request] = field(default_factory=list)
    busy: bool = False

    async def predict(
        self, model: Any, items: list[Any], coverage: float, costs: list[float] | None = None
    ) -> list[dict]:
        answer = asyncio.get_running_loop().create_future()
        costs = costs if costs is not None else [1.0] * len(items)
        self.pending.append(_Request(model, items, coverage, costs, answer))
        if not self.busy:
            self.busy = True
            # its own context: the calls serve many requests, none of whose deadlines is theirs
            asyncio.create_task(self._drain(), context=contextvars.Context())
        return await answer

    async def _drain(self) -> None:
        try:
            while True:
                self.pending = [r for r in self.pending if not r.answer.done()]  # gone: drop the rest
                if not self.pending:
                    return
                await self._run(_next_call(self.pending))
        finally:
            self.busy = False

    async def _run(self, call: list[_Slice]) -> None:
        first = call[0].request
        try:
            records = await run_in_threadpool(
                self.predict_records, first.model, [i for s in call for i in s.items], first.coverage
            )
        except PreflightError as error:
            if len(call) == 1:
                _settle(first.answer, error=error)
                return
            for piece in call:  # one request's bad input must not fail the others
                await self._run([piece])
            return
        except Exception as error:  # handed to each request, whose handler reports it
            for piece in call:
                _settle(piece.request.answer, error=error)
            return
        start = 0
        for piece in call:
            piece.request.records += records[start : start + piece.count]
            start += piece.count
            if len(piece.request.records) == len(piece.request.items):
                _settle(piece.request.answer, result=piece.request.records)


def _next_call(pending: list[_Request]) -> list[_Slice]:
    """Slices of the waiting requests that share the first one's model and coverage, requests not yet
    started first (in order of arrival), up to :data:`CALL_COST` and :data:`MAX_MERGED_ITEMS`."""
    head = pending[0]
    same = [r for r in pending if r.model is head.model and r.coverage == head.coverage]
    call, cost, items = [], 0.0, 0
    for request in sorted(same, key=lambda r: r.started):  # stable: arrival order otherwise
        done, count = len(request.records), 0
        while done + count < len(request.items) and items < MAX_MERGED_ITEMS:
            if (cost or count) and cost + request.costs[done + count] > CALL_COST:
                break
            cost += request.costs[done + count]
            count, items = count + 1, items + 1
        if count:
            call.append(_Slice(request, count))
        if cost >= CALL_COST or items >= MAX_MERGED_ITEMS or done + count < len(request.items):
            break
    return call


def _settle(answer: asyncio.Future, result: Any = None, error: BaseException | None = None) -> None:
    """Answer a request unless its client has gone (the future cancelled)."""
    if answer.done():
        return
    if error is not None:
        answer.set_exception(error)
    else:
        answer.set_result(result)
