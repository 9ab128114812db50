"""Concurrent prediction requests of one task merged into one model call.

A scheduler sends many one-item requests at once; each costs a fixed few milliseconds of
featurizing and calibration, while a batch of hundreds costs little more than one. Requests that
arrive while a batch is computing wait for it to finish and then go together, so an idle service
adds no delay and a busy one answers many requests per model call. A request a merged call fails
on (an unknown device in one of them) is answered on its own, so its error names its own items.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any

from fastapi.concurrency import run_in_threadpool
from preflight.data.errors import PreflightError

#: Requests are merged while their items total at most this many.
MAX_MERGED_ITEMS = 2_000

Predict = Callable[[Any, list[Any], float], list[dict]]


@dataclass
class _Request:
    model: Any
    items: list[Any]
    coverage: float
    answer: asyncio.Future


@dataclass
class Batcher:
    """``await batcher.predict(model, items, coverage)``: the records of ``predict(model, items,
    coverage)``, computed together with the requests waiting beside it."""

    predict_records: Predict
    pending: list[_Request] = field(default_factory=list)
    busy: bool = False

    async def predict(self, model: Any, items: list[Any], coverage: float) -> list[dict]:
        answer = asyncio.get_running_loop().create_future()
        self.pending.append(_Request(model, items, coverage, answer))
        if not self.busy:
            self.busy = True
            asyncio.create_task(self._drain())
        return await answer

    async def _drain(self) -> None:
        try:
            while self.pending:
                waiting, self.pending = self.pending, []
                for batch in _batches(waiting):
                    await self._run(batch)
        finally:
            self.busy = False

    async def _run(self, batch: list[_Request]) -> None:
        first = batch[0]
        try:
            records = await run_in_threadpool(
                self.predict_records, first.model, [i for r in batch for i in r.items], first.coverage
            )
        except PreflightError as error:
            if len(batch) == 1:
                _settle(first.answer, error=error)
                return
            for request in batch:  # one request's bad input must not fail the others
                await self._run([request])
            return
        except Exception as error:  # handed to each request, whose handler reports it
            for request in batch:
                _settle(request.answer, error=error)
            return
        ends = list(accumulate(len(r.items) for r in batch))
        for request, end in zip(batch, ends):
            _settle(request.answer, result=records[end - len(request.items) : end])


def _batches(requests: list[_Request]) -> list[list[_Request]]:
    """The waiting requests in merged batches: the same model and coverage, items up to the cap."""
    batches: list[list[_Request]] = []
    for request in requests:
        last = batches[-1] if batches else None
        fits = last is not None and sum(len(r.items) for r in last) + len(request.items) <= MAX_MERGED_ITEMS
        if (
            last is not None
            and fits
            and last[0].model is request.model
            and last[0].coverage == request.coverage
        ):
            last.append(request)
        else:
            batches.append([request])
    return batches


def _settle(answer: asyncio.Future, result: Any = None, error: BaseException | None = None) -> None:
    """Answer a request unless its client has gone (the future cancelled)."""
    if answer.done():
        return
    if error is not None:
        answer.set_exception(error)
    else:
        answer.set_result(result)
