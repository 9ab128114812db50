"""Hermetic tests: no PREFLIGHT_* or MLflow variables leak in; state lives under tmp_path."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from preflight.data.catalogue import Catalogue
from preflight.data.settings import Settings

#: Where integration tests find the public datasets (captured before the environment is cleaned).
SHARED_DATASETS = Path(
    os.environ.get("PREFLIGHT_DATASETS") or Path(__file__).resolve().parents[2] / "shared" / "datasets"
)

#: How long a fresh clone's first start may take to train every task before a test gives up on it.
FIRST_START_S = 900


#: Modules whose tests share a fresh clone's first start (``first_start``, minutes to build): under
#: pytest-xdist they run on one worker, so it is built once. Every other module runs on one worker too
#: (``--dist loadfile``), so a module's fixtures are built once.
FIRST_START_MODULES = frozenset({"test_api.py", "test_readme_examples.py", "test_notebooks.py"})
FIRST_START_FIXTURES = frozenset({"first_start", "fresh_clone_home"})


def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """``--dist loadfile``, with the modules of ``FIRST_START_MODULES`` as one file."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class FirstStartOnOneWorker(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = super()._split_scope(nodeid)
            return "first-start" if Path(module).name in FIRST_START_MODULES else module

    return FirstStartOnOneWorker(config, log)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test of another module that needs the first start would build it on a second worker."""
    for item in items:
        needs = FIRST_START_FIXTURES & set(getattr(item, "fixturenames", ()))
        if needs and item.path.name not in FIRST_START_MODULES:
            raise pytest.UsageError(
                f"{item.nodeid} uses {', '.join(sorted(needs))}: add {item.path.name} to FIRST_START_MODULES"
            )


@pytest.fixture(autouse=True)
def clean_environ(monkeypatch):
    for name in list(os.environ):
        if name.startswith("PREFLIGHT_") or name == "MLFLOW_TRACKING_URI":
            monkeypatch.delenv(name)
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")


@pytest.fixture
def settings(tmp_path) -> Settings:
    return Settings(home=tmp_path / "home")


@pytest.fixture(scope="session")
def catalogue() -> Catalogue:
    return Catalogue.load()


def write(folder: Path, name: str, lines: list[str]) -> Path:
    """A text file of these lines (a CSV: header first) in ``folder``."""
    path = folder / name
    path.write_text("\n".join(lines) + "\n")
    return path


def shared_file(relative: str) -> Path:
    """A public dataset file, or skip the test saying why."""
    path = SHARED_DATASETS / relative
    if not path.is_file():
        pytest.skip(f"{relative} not found under {SHARED_DATASETS} (set PREFLIGHT_DATASETS)")
    return path


DEVICES = ("NV_P100", "NV_1080Ti", "AMD_MI25", "NV_M40", "Tesla V100-SXM2-16GB", "NVIDIA GeForce RTX 4070")


def synthetic_gemm(
    n: int, seed: int = 0, devices: tuple[str, ...] = DEVICES, catalogue: Catalogue | None = None
) -> pd.DataFrame:
    """GEMM rows whose runtime follows each device's roofline at a shape-dependent efficiency after a
    launch floor, with noise."""
    catalogue = catalogue or Catalogue.load()
    rng = np.random.default_rng(seed)
    dims = np.array([64, 128, 256, 512, 1024, 2048, 4096])
    m, n_, k = (rng.choice(dims, n) for _ in range(3))
    device = rng.choice(devices, n)
    specs = [catalogue.resolve(d) for d in device]
    peak = np.array([s.peak_tflops["fp32"] for s in specs]) * 1e12
    bandwidth = np.array([s.memory_bandwidth_gbs for s in specs]) * 1e9
    flops, traffic = 2.0 * m * n_ * k, 4.0 * (m * k + k * n_ + m * n_)
    efficiency = 0.8 * (1 - np.exp(-flops / 2e9)) + 0.05
    launch_ms = 5e-3  # no GPU kernel runs in less than a few microseconds
    roofline_ms = np.maximum(flops / peak, traffic / bandwidth) * 1e3
    runtime_ms = (launch_ms + roofline_ms / efficiency) * rng.lognormal(0, 0.05, n)
    power_w = np.array([s.tdp_w for s in specs]) * (0.4 + 0.5 * efficiency) * rng.lognormal(0, 0.03, n)
    return pd.DataFrame(
        {
            "m": m,
            "n": n_,
            "k": k,
            "dtype": "fp32",
            "math_dtype": "fp32",
            "trans_a": rng.random(n) < 0.5,
            "trans_b": False,
            "device": device,
            "kernel": None,
            "runtime_ms": runtime_ms,
            "power_w": power_w,
            "energy_j": runtime_ms * power_w / 1e3,
        }
    )


@pytest.fixture(scope="session")
def trained_home(tmp_path_factory) -> Path:
    """A PREFLIGHT_HOME with a champion of every registered task, trained on that task's sample data
    (``tests/samples.py``: gemm on the shipped local-gemm sweep, real data; the others on small files
    the tests make)."""
    from preflight.models.core.task import all_tasks
    from preflight.models.core.training import train

    from tests.samples import sample_paths

    home = tmp_path_factory.mktemp("trained") / "home"
    settings = Settings(home=home, datasets=None, api_keys=[])
    catalogue = Catalogue.load(settings.devices_file)
    for task in all_tasks():
        train(task, settings, catalogue, paths=sample_paths(task.name, home.parent / task.name))
    return home


@pytest.fixture
def home(trained_home, tmp_path) -> Path:
    """A private copy of the trained home, for tests that register devices or measurements."""
    import shutil

    copy = tmp_path / "home"
    shutil.copytree(trained_home, copy)
    return copy


@dataclass(frozen=True)
class FirstStart:
    """A fresh clone's ``preflight serve``: its address, its home once every task was ready, and what
    it answered before its first models were trained."""

    url: str
    home: Path
    health_at_once: int  # /healthz's first status
    trained_meanwhile: tuple[str, ...]  # the tasks /readyz listed as training while it answered


@pytest.fixture(scope="session")
def first_start(tmp_path_factory) -> Iterator[FirstStart]:
    """``preflight serve`` started as on a fresh clone: a process of its own, a new home and the embedded
    default (no ``PREFLIGHT_DATASETS``), so that its champions are those whose figures the README
    quotes; yielded (still serving) once ``/readyz`` says every task is ready, stopped at the end."""
    home = tmp_path_factory.mktemp("first-start")
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("PREFLIGHT_") and k != "MLFLOW_TRACKING_URI"
    }
    port = free_port()
    command = [sys.executable, "-m", "preflight.service.cli", "serve", "--port", str(port)]
    with open(home.parent / "first-start.log", "wb") as log:
        server = subprocess.Popen(command, env=env | {"PREFLIGHT_HOME": str(home)}, stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    try:
        health, trained = _answer(server, f"{url}/healthz", deadline_s=120), set()
        deadline = time.monotonic() + FIRST_START_S
        while (readiness := _answer_json(server, f"{url}/readyz")).get("status") != "ready":
            assert time.monotonic() < deadline, f"not every task was ready in {FIRST_START_S} s"
            trained |= set(readiness.get("training", []))
            time.sleep(1)
        yield FirstStart(url, home, health, tuple(sorted(trained)))
    finally:
        server.terminate()
        server.wait(timeout=60)


@pytest.fixture
def fresh_clone_home(first_start, tmp_path) -> Path:
    """A private copy of a fresh clone's home once its first start trained every task (``first_start``),
    for tests that register devices or train more versions."""
    import shutil

    copy = tmp_path / "fresh-clone-home"
    shutil.copytree(first_start.home, copy)
    return copy


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def http(url: str, body: dict | None = None) -> tuple[int, dict]:
    """The status and JSON answer of a GET (a POST with ``body``) to a live server."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data, {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read())


def _answer(server: subprocess.Popen, url: str, deadline_s: float) -> int:
    """The status of ``url`` once the server answers at all."""
    deadline = time.monotonic() + deadline_s
    while True:
        assert server.poll() is None, "preflight serve exited"
        try:
            return http(url)[0]
        except urllib.error.URLError:
            assert time.monotonic() < deadline, f"{url}: no answer in {deadline_s} s"
            time.sleep(0.5)


def _answer_json(server: subprocess.Popen, url: str) -> dict:
    assert server.poll() is None, "preflight serve exited"
    return http(url)[1]
