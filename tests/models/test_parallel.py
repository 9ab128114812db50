"""``fan_out`` without a cluster: calls that allow it run side by side on a pool of threads, one per CPU
(``OMP_NUM_THREADS`` where set), in order and with the answers of one call after another; a call on a
pool's thread fans out in turn one call at a time, and a library's warnings filters on one thread do not
turn a warning it silences into an error on another."""

import threading
import warnings
from collections.abc import Iterator

import pandas as pd
import pytest
from preflight.models.core import parallel, predictor
from preflight.models.core.predictor import Predictor
from preflight.models.core.task import get_task

from tests.conftest import synthetic_gemm

TASK = get_task("gemm")


def _where(i: int, barrier: threading.Barrier | None = None) -> tuple[int, str]:
    if barrier is not None:
        barrier.wait()  # breaks (after its timeout) unless another call runs meanwhile
    return i, threading.current_thread().name


def test_calls_run_side_by_side_on_threads_and_answer_in_order(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    barrier = threading.Barrier(2, timeout=30)
    found = parallel.fan_out(_where, [(i,) for i in range(4)], "calls", {"barrier": barrier}, local=True)
    assert [i for i, _ in found] == [0, 1, 2, 3]
    assert len({name for _, name in found}) == 2
    assert threading.current_thread().name not in {name for _, name in found}


@pytest.mark.parametrize(("cpus", "local"), [("1", True), ("2", False)])
def test_calls_run_here_one_after_another_on_one_cpu_or_where_they_do_not_allow_threads(
    cpus, local, monkeypatch
):
    monkeypatch.setenv("OMP_NUM_THREADS", cpus)
    found = parallel.fan_out(_where, [(i,) for i in range(3)], "calls", local=local)
    assert found == [(i, threading.current_thread().name) for i in range(3)]


def _nested(i: int) -> tuple[str, int, list[tuple[int, str]]]:
    inner = parallel.fan_out(_where, [(0,), (1,)], "inner", local=True)
    return threading.current_thread().name, parallel.local_cpus(), inner


def test_a_call_on_a_pools_thread_fans_out_one_call_at_a_time(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    for outer, cpus, inner in parallel.fan_out(_nested, [(0,), (1,)], "outer", local=True):
        assert cpus == 1 and {name for _, name in inner} == {outer}


@pytest.mark.parametrize("family", ["physics", "tree"])
def test_a_predictor_calibrated_on_threads_answers_as_one_calibrated_call_by_call(
    family, catalogue, monkeypatch
):
    monkeypatch.setattr(predictor, "LOCAL_POOL_MIN_ROWS", 100)
    rows = TASK.rows(synthetic_gemm(200, seed=4, catalogue=catalogue))
    features, Y = TASK.featurize(rows, catalogue), TASK.target_frame(rows)

    threads: set[str] = set()
    on_pool = parallel._on_pool

    def counted(*args):
        threads.add(threading.current_thread().name)
        return on_pool(*args)

    monkeypatch.setattr(parallel, "_on_pool", counted)

    def fitted(cpus: str) -> pd.DataFrame:
        monkeypatch.setenv("OMP_NUM_THREADS", cpus)
        model = Predictor(TASK, family).fit(features, Y, TASK.group_values(features.meta, "shape"))
        estimates = model.predict(features)
        return pd.concat([estimates.value, estimates.low.add_suffix("_low"), model.oof_], axis=1)

    one_by_one = fitted("1")
    assert not threads
    pd.testing.assert_frame_equal(fitted("2"), one_by_one, check_exact=True)
    assert len(threads) == 2


def _fails_first(i: int, started: list[int]) -> int:
    started.append(i)
    if i == 0:
        raise ValueError("the first call fails")
    threading.Event().wait(1)  # the others end after it
    return i


def test_a_failing_call_leaves_the_calls_not_yet_started_unstarted(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    started: list[int] = []
    with pytest.raises(ValueError, match="first call"):
        parallel.fan_out(_fails_first, [(i,) for i in range(8)], "calls", {"started": started}, local=True)
    assert sorted(started) == [0, 1]


def _silenced(i: int, steps: list[threading.Event]) -> int:
    """As pandas silences NumPy's "All-NaN slice" in ``median``: call 0 enters its filters first and
    leaves them (restoring those it found) while call 1 still runs under its own."""
    if i == 1:
        steps[0].wait(30)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "silenced here", RuntimeWarning)
        steps[i].set()
        if i == 0:
            steps[1].wait(30)
        else:
            steps[2].wait(30)
            warnings.warn("silenced here", RuntimeWarning, stacklevel=1)
    if i == 0:
        steps[2].set()
    return i


def test_a_warning_silenced_on_one_thread_stays_silent_while_another_leaves_its_filters(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    steps = [threading.Event() for _ in range(3)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert parallel.fan_out(_silenced, [(0,), (1,)], "calls", {"steps": steps}, local=True) == [0, 1]
        with pytest.raises(RuntimeWarning):  # the filters as they were before the pool
            warnings.warn("silenced here", RuntimeWarning, stacklevel=1)


def _counted(calls: int, taken: list[int], *extra: object) -> Iterator[tuple]:
    """Calls ``(i, *extra)``, each noted in ``taken`` as the stream takes it."""
    for i in range(calls):
        taken.append(i)
        yield (i, *extra)


def test_a_stream_of_calls_runs_side_by_side_in_order_with_few_in_memory(monkeypatch):
    """``stream_local`` takes the calls as they come: two at a time run and one more waits to be taken."""
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    taken: list[int] = []
    barrier = threading.Barrier(2, timeout=30)
    stream = parallel.stream_local(_where, _counted(6, taken, barrier), most=4)
    assert next(stream)[0] == 0 and len(taken) == 3  # the first answer waits for at most three calls
    rest = list(stream)
    assert [i for i, _ in rest] == [1, 2, 3, 4, 5]
    assert threading.current_thread().name not in {name for _, name in rest}


def _fails_at_two(i: int) -> int:
    if i == 2:
        raise ValueError("call 2 fails")
    return i


def test_a_failing_call_in_a_stream_stops_it(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    taken: list[int] = []
    answers: list[int] = []
    with pytest.raises(ValueError, match="call 2 fails"):
        answers.extend(parallel.stream_local(_fails_at_two, _counted(100, taken), most=4))
    assert answers == [0, 1] and len(taken) <= 5


def test_a_stream_runs_no_wider_than_asked(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    found = list(parallel.stream_local(_where, [(i,) for i in range(3)], most=1))
    assert found == [(i, threading.current_thread().name) for i in range(3)]
