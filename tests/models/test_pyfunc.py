"""Every registered version is an MLflow ``python_function`` model: ``mlflow.pyfunc.load_model`` and
``mlflow models serve`` answer as the native predictor does."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pandas as pd
import pytest
from preflight.data import nas as nas_items
from preflight.data.catalogue import Catalogue
from preflight.data.gemm import GemmItem
from preflight.data.settings import Settings
from preflight.models import pyfunc
from preflight.models.core.inference import predict_items
from preflight.models.core.task import all_tasks, get_task
from preflight.models.registry import tracking
from pydantic import ValidationError

from tests.conftest import free_port

CHAMPION = "models:/preflight.gemm@champion"
H100_PCIE = {"m": 4096, "n": 4096, "k": 4096, "dtype": "fp16", "device": "NVIDIA H100 PCIe"}
#: a batched GEMM on the sample's CPU with a kernel: ``b`` is given for one row only (a column with a gap)
ITEMS = [
    H100_PCIE,
    {"m": 512, "n": 256, "k": 1024, "b": 4, "device": "amd-epyc-1-threads", "kernel": {"block_m": 64}},
]
TARGETS = ("runtime_ms", "power_w", "energy_j")


@pytest.fixture
def registry(trained_home, monkeypatch) -> Settings:
    """The trained home as MLflow's tracking and model registry (and the home its devices come from)."""
    settings = Settings(home=trained_home)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", settings.tracking_uri)
    monkeypatch.setenv("PREFLIGHT_HOME", str(trained_home))
    return settings


def test_the_champion_loads_as_pyfunc_and_predicts_as_the_native_predictor(registry):
    model = pyfunc.mlflow_pyfunc().load_model(CHAMPION)
    answered = model.predict(pd.DataFrame(ITEMS))
    predictor, _ = tracking.load_champion(registry, "gemm")
    catalogue = Catalogue.load(registry.devices_file)
    native = predict_items(get_task("gemm"), predictor, catalogue, [GemmItem(**i) for i in ITEMS]).records()
    assert list(answered.columns) == [f"{t}{s}" for t in TARGETS for s in ("", "_low", "_high")] + ["ood"]
    for row, record in zip(answered.to_dict("records"), native, strict=True):
        for target in TARGETS:
            bounds = record[target]
            expected = [
                bounds[k] if bounds[k] is not None else float("nan") for k in ("value", "low", "high")
            ]
            got = [row[target], row[f"{target}_low"], row[f"{target}_high"]]
            assert got == pytest.approx(expected, nan_ok=True)
        assert row["ood"] == record["ood"]
    assert answered["runtime_ms"].gt(0).all()


def test_coverage_is_a_parameter(registry):
    model = pyfunc.mlflow_pyfunc().load_model(CHAMPION)
    wide, narrow = (model.predict(pd.DataFrame([H100_PCIE]), params={"coverage": c}) for c in (0.9, 0.5))
    assert wide["runtime_ms"][0] == narrow["runtime_ms"][0]
    # the low ends may both sit at the roofline, the fastest the chip can be
    assert wide["runtime_ms_low"][0] <= narrow["runtime_ms_low"][0] < narrow["runtime_ms_high"][0]
    assert narrow["runtime_ms_high"][0] < wide["runtime_ms_high"][0]


def test_every_tasks_champion_is_a_pyfunc_model_with_a_signature(registry):
    """Each answers its input example (from its training rows, where one reads as an item)."""
    for task in all_tasks():
        model = pyfunc.mlflow_pyfunc().load_model(f"models:/preflight.{task.name}@champion")
        signature = model.metadata.signature
        assert signature.inputs.input_names() == list(task.item.model_fields), task.name
        example = model.input_example
        if example is not None:
            answered = model.predict(example)
            assert len(answered) == 1 and task.primary_target in answered, task.name


def test_rows_read_as_items_with_gaps_and_whole_floats():
    frame = pd.DataFrame(
        [{"m": 8, "n": 8, "k": 8, "device": "x", "b": 2}, {"m": 8, "n": 8, "k": 8, "device": "x"}]
    )
    assert frame["b"].dtype == float
    first, second = pyfunc.items(get_task("gemm"), frame)
    assert first.b == 2 and second.b == 1  # the gap takes the item's default


def test_a_frame_read_column_by_column_gives_the_rows_of_its_items():
    """Each column's distinct values are validated once and spread back: the rows are those of the
    frame's items, gaps taking the defaults, whole floats read as integers."""
    task = get_task("gemm")
    frame = pd.DataFrame(
        [
            {"m": 8, "n": 16, "k": 8, "dtype": "fp16", "device": "Tesla T4", "b": 2.0, "trans_a": True},
            {"m": 8, "n": 16, "k": 32, "dtype": "bf16", "device": "Tesla T4", "b": None, "trans_a": False},
            {"m": 64, "n": 16, "k": 8, "dtype": None, "device": "NVIDIA L4", "b": 2.0, "trans_a": True},
            {"m": 8, "n": 16, "k": 8, "dtype": "fp16", "device": "Tesla T4", "b": 2.0, "trans_a": True},
        ]
    )
    expected = task.items_to_rows(pyfunc.items(task, frame))
    pd.testing.assert_frame_equal(pyfunc.rows(task, frame), expected)
    assert list(expected["b"]) == [2, 1, 2, 2] and list(expected["dtype"]) == ["fp16", "bf16", "fp32", "fp16"]


@pytest.mark.parametrize("task", all_tasks(), ids=lambda t: t.name)
def test_every_tasks_examples_read_from_a_frame_as_their_items(task):
    """Items whose fields nest go row by row; an architecture is checked against its own row's space."""
    frame = pd.DataFrame(list(task.examples) * 3)
    pd.testing.assert_frame_equal(pyfunc.rows(task, frame), task.items_to_rows(pyfunc.items(task, frame)))


@pytest.mark.parametrize(
    ("column", "values"),
    [("trans_a", [False, 0, True]), ("b", [1, True, 2]), ("device", ["Tesla T4", ["Tesla T4"], "NVIDIA L4"])],
)
def test_values_that_hash_alike_or_not_at_all_are_refused_by_their_row(column, values):
    """``True == 1`` as a key, but a strict field takes one and refuses the other; a list has no hash."""
    frame = pd.DataFrame({"m": [8, 8, 8], "n": 8, "k": 8, "device": "Tesla T4"}).assign(
        **{column: pd.Series(values, dtype=object)}
    )
    with pytest.raises(ValidationError) as raised:
        pyfunc.rows(get_task("gemm"), frame)
    assert [error["loc"][:2] for error in raised.value.errors()] == [(1, column)]


def test_an_invalid_value_read_column_by_column_is_located_by_its_row():
    frame = pd.DataFrame({"m": [8, 8, 0, 8, 0], "n": 8, "k": 8, "device": "Tesla T4"})
    with pytest.raises(ValidationError) as raised:
        pyfunc.rows(get_task("gemm"), frame)
    assert [error["loc"] for error in raised.value.errors()] == [(2, "m"), (4, "m")]


NB201_CELL = get_task("nas-latency").examples[0]["arch"]
FBNET_CHAIN = "|".join(["k3_e1"] * 22)


def test_an_architecture_is_read_with_its_own_rows_space_and_each_distinct_pair_validated_once(monkeypatch):
    """A field validator reads the fields declared before it (the architecture its space): those
    validate together, one distinct combination at a time, never row by row."""
    task = get_task("nas-latency")
    frame = pd.DataFrame(
        {
            "space": ["nb201", "fbnet", "nb201", "fbnet"] * 25,
            "arch": [NB201_CELL, FBNET_CHAIN] * 50,
            "dataset": "cifar10",
            "device": ["Raspberry Pi 5", "Tesla T4"] * 50,
            "batch_size": 1,
        }
    )
    expected = task.items_to_rows(pyfunc.items(task, frame))
    checked: list[str] = []
    original = nas_items.checked_notation
    monkeypatch.setattr(
        nas_items, "checked_notation", lambda space, value: checked.append(space) or original(space, value)
    )
    monkeypatch.setattr(pyfunc, "items", lambda task, frame: pytest.fail("validated row by row"))
    pd.testing.assert_frame_equal(pyfunc.rows(task, frame), expected)
    assert sorted(checked) == ["fbnet", "nb201"]


def test_an_architecture_valid_only_in_another_rows_space_is_refused_by_its_row():
    frame = pd.DataFrame(
        {
            "space": ["nb201", "fbnet", "fbnet"],
            "arch": [NB201_CELL, FBNET_CHAIN, NB201_CELL],
            "dataset": "cifar10",
        }
    )
    with pytest.raises(ValidationError) as raised:
        pyfunc.rows(get_task("nas-accuracy"), frame)
    assert [error["loc"][:2] for error in raised.value.errors()] == [(2, "arch")]


def test_mlflow_models_serve_answers_invocations(registry, tmp_path):
    port = free_port()
    binary = Path(sys.executable).parent
    env = os.environ | {"PATH": f"{binary}{os.pathsep}{os.environ['PATH']}"}
    command = [str(binary / "mlflow"), "models", "serve", "-m", CHAMPION, "--env-manager", "local"]
    command += ["-p", str(port), "--host", "127.0.0.1", "-w", "1"]
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            command, env=env, cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
    try:
        _wait_up(server, port, log)
        answer = _post(port, "/invocations", {"dataframe_records": [H100_PCIE]})
    finally:
        _stop(server)
    (prediction,) = answer["predictions"]
    assert prediction["runtime_ms"] > 0 and prediction["runtime_ms_low"] <= prediction["runtime_ms"]
    assert prediction["ood"] is True  # fp16 on a device the sample never measured


def _wait_up(server: subprocess.Popen, port: int, log: Path, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(f"mlflow models serve exited {server.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/ping", timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    pytest.fail(f"mlflow models serve did not answer /ping in {timeout:.0f} s:\n{log.read_text()[-3000:]}")


def _post(port: int, path: str, body: dict) -> dict:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as answer:
        return json.load(answer)


def _stop(server: subprocess.Popen) -> None:
    """SIGTERM to the server's process group, SIGKILL when it lingers."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(server.pid, sig)
            server.wait(timeout=10)
            return
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            continue


def test_a_file_column_with_one_bad_cell_is_refused_at_that_cell_only():
    """A CSV column with one fraction is read as floats, and one with a word as text: the other cells
    are still the integers they spell, and only the bad cell's row is named."""
    task = get_task("gemm")
    fractions = pd.DataFrame({"m": [8.0, 700.5, 16.0], "n": 8, "k": 8, "device": "Tesla T4"})
    words = pd.DataFrame({"m": ["8", "10x24", "16"], "n": 8, "k": 8, "device": "Tesla T4"})
    for frame in (fractions, words):
        with pytest.raises(ValidationError) as raised:
            pyfunc.rows(task, frame)
        assert [error["loc"] for error in raised.value.errors()] == [(1, "m")]
    assert list(pyfunc.rows(task, words.drop(index=1))["m"]) == [8, 16]
