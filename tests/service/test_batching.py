"""Concurrent requests merged into one model call, each answered with its own records or error."""

import asyncio
import time

import pytest
from preflight.data.errors import UnknownDevice
from preflight.service.batching import Batcher

MODEL = object()


def slow_echo(calls: list):
    """A model call that takes a while and answers each item with itself; ``bad`` is an unknown device."""

    def predict(model, items, coverage):
        calls.append((list(items), coverage))
        time.sleep(0.05)
        if "bad" in items:
            raise UnknownDevice("bad", [])
        return [{"item": item, "coverage": coverage} for item in items]

    return predict


def run(*requests):
    async def main():
        batcher = Batcher(slow_echo(calls))
        return await asyncio.gather(
            *(batcher.predict(model, items, coverage) for model, items, coverage in requests),
            return_exceptions=True,
        )

    calls: list = []
    return asyncio.run(main()), calls


def test_requests_waiting_for_a_batch_go_together_and_each_gets_its_own_records():
    answers, calls = run((MODEL, ["a"], 0.9), (MODEL, ["b", "c"], 0.9), (MODEL, ["d"], 0.9))
    assert [[r["item"] for r in answer] for answer in answers] == [["a"], ["b", "c"], ["d"]]
    assert [items for items, _ in calls] == [["a", "b", "c", "d"]]  # arrived together: one call


def test_requests_arriving_during_a_call_wait_for_it_then_go_together():
    async def main():
        batcher = Batcher(slow_echo(calls))
        first = asyncio.create_task(batcher.predict(MODEL, ["a"], 0.9))
        await asyncio.sleep(0.01)  # the first call is running
        later = [batcher.predict(MODEL, [item], 0.9) for item in "bcd"]
        return await asyncio.gather(first, *later)

    calls: list = []
    answers = asyncio.run(main())
    assert [answer[0]["item"] for answer in answers] == ["a", "b", "c", "d"]
    assert [items for items, _ in calls] == [["a"], ["b", "c", "d"]]


def test_one_bad_request_fails_alone():
    answers, calls = run((MODEL, ["a"], 0.9), (MODEL, ["b"], 0.9), (MODEL, ["bad"], 0.9), (MODEL, ["c"], 0.9))
    assert isinstance(answers[2], UnknownDevice)
    assert [answer[0]["item"] for i, answer in enumerate(answers) if i != 2] == ["a", "b", "c"]


@pytest.mark.parametrize("other", [(MODEL, ["b"], 0.5), (object(), ["b"], 0.9)])
def test_other_coverages_or_models_are_never_merged(other):
    answers, calls = run((MODEL, ["a"], 0.9), (MODEL, ["x"], 0.9), other)
    assert answers[2][0]["coverage"] == other[2] and [items for items, _ in calls] == [["a", "x"], ["b"]]
