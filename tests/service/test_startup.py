"""Start-up answers task by task: a task answers once its own model loads, while the others still
train; the lead task (GEMM) trains first; ``/readyz`` says which tasks answer and which train."""

import threading
import time
from pathlib import Path

import pytest
from preflight.data.catalogue import Catalogue
from preflight.data.errors import NotReadyYet
from preflight.data.settings import Settings
from preflight.models.core import training
from preflight.models.core.task import get_task
from preflight.service import served
from preflight.service.served import LEAD_TASK, RETRY_AFTER_S, ServedModels

from tests.client import api_client
from tests.samples import sample_paths

LOADED, TRAINING = "nas-curve", "interference"
CURVE = {"dataset": "digits", "curve": [0.3, 0.5, 0.6], "budget": 20}


def _poll(client, until, seconds: float = 120):
    """/readyz until ``until(answer)`` holds (or the time runs out)."""
    deadline = time.monotonic() + seconds
    while not until(answer := client.get("/readyz")) and time.monotonic() < deadline:
        time.sleep(0.05)
    return answer


@pytest.fixture
def gated(tmp_path, monkeypatch) -> tuple[Path, threading.Event]:
    """A home where ``LOADED`` has a champion and only ``TRAINING`` has data, whose training waits
    for the event before it runs."""
    home, gate = tmp_path / "home", threading.Event()
    settings = Settings(home=home, datasets=None, api_keys=[])
    training.train(
        get_task(LOADED), settings, Catalogue.load(), paths=sample_paths(LOADED, tmp_path / LOADED)
    )
    paths = sample_paths(TRAINING, tmp_path / TRAINING)
    monkeypatch.setattr(served, "available_sources", lambda task, _: paths if task.name == TRAINING else {})
    real = training.train

    def train(*args, **kwargs):
        assert gate.wait(60), "the test never let training run"
        return real(*args, **kwargs)

    monkeypatch.setattr(training, "train", train)
    return home, gate


def test_a_task_answers_while_another_still_trains(gated):
    home, gate = gated
    with api_client(home, bootstrap=True) as client:
        ready = _poll(client, lambda r: TRAINING in r.json()["training"] and r.status_code == 200)
        body = ready.json()
        assert ready.status_code == 200 and body["status"] == "training", body
        assert body["loaded"] == [LOADED] and body["training"] == [TRAINING]
        assert body["tasks"][LOADED]["state"] == "ready" and body["tasks"][TRAINING]["state"] == "training"
        assert client.post(f"/v1/{LOADED}/predict", json={"items": [CURVE]}).status_code == 200
        waiting = client.post(f"/v1/{TRAINING}/predict", json={"items": [{}]})
        assert waiting.status_code == 503 and waiting.headers["Retry-After"] == str(RETRY_AFTER_S)
        assert waiting.json()["error"] == "NotReadyYet"
        assert f"task {TRAINING!r} is not ready yet: training its first version" in waiting.json()["detail"]
        gate.set()
        done = _poll(client, lambda r: r.json()["status"] != "training")
        assert done.status_code == 200 and done.json()["status"] == "ready" and done.json()["training"] == []
        assert sorted(done.json()["loaded"]) == sorted([LOADED, TRAINING])


def test_the_lead_task_trains_first_and_the_others_say_they_wait_their_turn(tmp_path, monkeypatch):
    models = ServedModels.create(Settings(home=tmp_path / "home"))
    with pytest.raises(NotReadyYet, match="loading its model"):  # before start-up has loaded it
        models.champion(LEAD_TASK)
    monkeypatch.setattr(served, "available_sources", lambda task, _: {"sample": tmp_path})
    order: list[tuple[str, str]] = []

    def train(task, *args, **kwargs):  # each task in turn, its status; and a queued one, during the first
        order.append((task.name, models.tasks[task.name].detail))
        if len(order) == 1:
            with pytest.raises(NotReadyYet, match=r"queued to train its first version \(2 of"):
                models.champion(next(name for name, s in models.tasks.items() if "(2 of" in s.detail))

    monkeypatch.setattr(training, "train", train)
    models.start(bootstrap=True)
    assert order[0][0] == LEAD_TASK and order[0][1].startswith(
        "training its first version from the data at hand (1 of"
    )
    assert len(order) == len(models.tasks) and models.training() == []
