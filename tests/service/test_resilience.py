"""The service under faults: damaged side files, artifacts and registries, moved homes, reloads.

Each test damages a private copy of the trained home (the ``home`` fixture) the way an operator or
a full disk would, then checks that the other tasks answer and that every answer tells the truth.
"""

import shutil
import sqlite3
from pathlib import Path

import pytest
from preflight.data.settings import Settings
from preflight.models.registry import tracking

from tests.client import api_client

GEMM = {"m": 1024, "n": 1024, "k": 1024, "dtype": "fp32", "device": "NVIDIA H100 80GB HBM3"}
CURVE = {"dataset": "digits", "curve": [0.3, 0.5, 0.6], "budget": 20}


def _artifacts_of(home: Path, task: str, version: str | None = None) -> Path:
    client = tracking.client(Settings(home=home))
    name = tracking.model_name(task)
    found = (
        client.get_model_version(name, version)
        if version
        else client.get_model_version_by_alias(name, "champion")
    )
    return home / "artifacts" / found.run_id


def _second_version(home: Path, task: str = "nas-curve") -> str:
    """Train another version of a task on its sample data (without promoting it); its number."""
    from preflight.data.catalogue import Catalogue
    from preflight.models.core.task import get_task
    from preflight.models.core.training import train

    from tests.samples import sample_paths

    settings = Settings(home=home, datasets=None)
    paths = sample_paths(task, home.parent / f"{task}-again")
    result = train(get_task(task), settings, Catalogue.load(settings.devices_file), paths=paths, seed=1)
    return result.promotion.info.version


def _assert_no_internals(text: str, home: Path) -> None:
    assert str(home) not in text and "SELECT" not in text and "sqlite" not in text.lower()


def test_a_damaged_measurements_file_is_set_aside_and_devices_still_answer(home, caplog):
    (home / "measurements.json").write_text('{"gemm": [{"m": 1')  # truncated
    with api_client(home) as client:
        assert client.get("/readyz").status_code == 200
        assert client.get("/v1/devices").status_code == 200
        spec = {"id": "lab-gpu", "name": "Lab GPU", "kind": "gpu"}
        assert client.post("/v1/devices", json={"spec": spec}).status_code == 201
    assert [p.name for p in home.glob("measurements.json.damaged-*")]
    assert "measurements.json" in caplog.text


def test_a_damaged_devices_file_does_not_stop_the_service(home):
    (home / "devices.json").write_bytes(b"\x00\xff[{")
    with api_client(home) as client:
        assert client.get("/readyz").status_code == 200
        assert client.post("/v1/gemm/predict", json={"items": [GEMM]}).status_code == 200


def test_a_deleted_artifact_fails_its_task_alone_and_says_so(home):
    shutil.rmtree(_artifacts_of(home, "gemm"))
    with api_client(home) as client:
        ready = client.get("/readyz")
        assert ready.status_code == 200
        tasks = ready.json()["tasks"]
        assert tasks["gemm"]["state"] == "failed" and tasks["nas-curve"]["state"] == "ready"
        _assert_no_internals(ready.text, home)
        answer = client.post("/v1/gemm/predict", json={"items": [GEMM]})
        assert answer.status_code == 503 and "no model that loads" in answer.json()["detail"]
        assert "preflight train" not in answer.json()["detail"]  # it is trained; its files are damaged
        assert client.post("/v1/nas-curve/predict", json={"items": [CURVE]}).status_code == 200


def test_garbage_in_the_registry_database_is_reported_without_sql_or_paths(home):
    (home / "mlflow.db").write_bytes(b"this is not a database" * 100)
    with api_client(home) as client:
        assert client.get("/healthz").status_code == 200
        ready = client.get("/readyz")
        assert ready.status_code == 503 and ready.json()["tasks"]["gemm"]["state"] == "failed"
        _assert_no_internals(ready.text, home)
        answer = client.post("/v1/gemm/predict", json={"items": [GEMM]})
        assert answer.status_code == 503 and "registry could not be read" in answer.json()["detail"]
        assert client.get("/v1/devices").status_code == 200


def test_a_champion_that_cannot_load_falls_back_to_the_last_good_version(home):
    newer = _second_version(home)
    client_ = tracking.client(Settings(home=home))
    client_.set_registered_model_alias("preflight.nas-curve", "champion", newer)
    shutil.rmtree(_artifacts_of(home, "nas-curve", newer) / "artifacts" / "predictor" / "family")
    with api_client(home) as client:
        status = client.get("/readyz").json()["tasks"]["nas-curve"]
        assert (
            status["state"] == "fallback" and status["version"] != newer and f"v{newer}" in status["detail"]
        )
        answer = client.post("/v1/nas-curve/predict", json={"items": [CURVE]})
        assert answer.status_code == 200 and answer.headers["X-Preflight-Model-Version"] == status["version"]
        assert f"champion v{newer}" in answer.headers["X-Preflight-Fallback"]


def test_a_dangling_alias_serves_the_intact_version_and_never_retrains(home):
    import time

    settings = Settings(home=home, datasets=None)
    champion = tracking.champion_version(settings, "gemm")
    newer = _second_version(home, "gemm")
    with sqlite3.connect(home / "mlflow.db") as db:  # the alias now names a version that is gone
        db.execute("UPDATE registered_model_aliases SET version = 99 WHERE name = 'preflight.gemm'")
    with api_client(home, bootstrap=True) as client:
        for _ in range(600):
            if client.get("/readyz").json()["tasks"]["gemm"]["state"] not in ("loading", "training"):
                break
            time.sleep(0.1)
        status = client.get("/readyz").json()["tasks"]["gemm"]
        assert status["state"] == "fallback" and status["version"] == newer != champion
    versions = tracking.client(settings).search_model_versions("name='preflight.gemm'")
    assert len(versions) == 2  # nothing was trained over the existing registry


def test_a_moved_home_serves_and_writes_into_its_own_artifacts(home, tmp_path):
    moved = tmp_path / "elsewhere" / "home"
    shutil.move(home, moved)
    with api_client(moved) as client:
        assert client.post("/v1/gemm/predict", json={"items": [GEMM]}).status_code == 200
    newer = _second_version(moved)
    run = tracking.client(Settings(home=moved)).get_model_version("preflight.nas-curve", newer).run_id
    assert (moved / "artifacts" / run).is_dir() and not home.exists()


def test_a_copied_home_never_writes_into_the_original(home, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(home, copy)
    before = {p.name for p in (home / "artifacts").iterdir()}
    _second_version(copy)
    assert {p.name for p in (home / "artifacts").iterdir()} == before


def test_hot_reload_swaps_a_promoted_version_in(home):
    with api_client(home) as client:
        served = client.post("/v1/nas-curve/predict", json={"items": [CURVE]}).headers[
            "X-Preflight-Model-Version"
        ]
        newer = _second_version(home)
        tracking.client(Settings(home=home)).set_registered_model_alias(
            "preflight.nas-curve", "champion", newer
        )
        assert client.post("/v1/admin/reload", headers={"X-API-Key": "wrong"}).status_code == 401
        reloaded = client.post("/v1/admin/reload")
        assert reloaded.status_code == 200 and reloaded.json()["reloaded"] == ["nas-curve"]
        answer = client.post("/v1/nas-curve/predict", json={"items": [CURVE]})
        assert answer.headers["X-Preflight-Model-Version"] == newer != served


def test_the_watcher_notices_a_moved_alias(home):
    import time

    with api_client(home) as client:
        client.app.state.models.settings.reload_interval_s = 0.05  # type: ignore[attr-defined]
        newer = _second_version(home)
        tracking.client(Settings(home=home)).set_registered_model_alias(
            "preflight.nas-curve", "champion", newer
        )
        models = client.app.state.models  # type: ignore[attr-defined]
        import threading

        stop = threading.Event()
        watcher = threading.Thread(target=models.watch, args=(stop,), daemon=True)
        watcher.start()
        deadline = time.monotonic() + 30
        while models.tasks["nas-curve"].version != newer and time.monotonic() < deadline:
            time.sleep(0.05)
        stop.set()
        assert models.tasks["nas-curve"].version == newer


@pytest.mark.parametrize("size", [60 * 2**20])
def test_a_body_over_the_limit_is_refused_before_it_is_read(home, size):
    with api_client(home) as client:
        answer = client.post(
            "/v1/gemm/predict", content=b"[" * size, headers={"content-type": "application/json"}
        )
        assert answer.status_code == 413


def test_a_chunked_body_over_the_limit_is_refused(home):
    def chunks():
        for _ in range(64):
            yield b" " * 2**20

    with api_client(home, max_body_bytes=2**20) as client:
        answer = client.post(
            "/v1/gemm/predict", content=chunks(), headers={"content-type": "application/json"}
        )
        assert answer.status_code == 413


def test_validation_errors_echo_only_a_bounded_excerpt(home):
    items = [{"m": "x" * 1000, "n": 1, "k": 1, "dtype": "fp32", "device": "h100"}] * 2000
    with api_client(home) as client:
        answer = client.post("/v1/gemm/predict", json={"items": items})
    assert answer.status_code == 422 and len(answer.content) < 20_000
    assert answer.json()["more_errors"] > 0 and "x" * 300 not in answer.text


def test_a_huge_nb101_adjacency_is_refused_at_once(home):
    import time

    adjacency = [[0] * 1000 for _ in range(1000)]
    item = {"space": "nb101", "arch": {"adjacency": adjacency, "ops": ["conv3x3-bn-relu"] * 1000}}
    with api_client(home) as client:
        start = time.perf_counter()
        answer = client.post("/v1/nas-accuracy/predict", json={"items": [item | {"dataset": "cifar10"}]})
        assert answer.status_code == 422 and time.perf_counter() - start < 5
    assert "at most" in answer.text


def test_a_huge_nb101_adjacency_as_a_string_is_refused_too(home):
    import json

    arch = json.dumps({"adjacency": [[0] * 1000 for _ in range(1000)], "ops": ["conv3x3-bn-relu"] * 1000})
    item = {"space": "nb101", "arch": arch, "dataset": "cifar10"}
    with api_client(home) as client:
        answer = client.post("/v1/nas-accuracy/predict", json={"items": [item]})
    assert answer.status_code == 422 and "at most" in answer.text


def test_an_answer_past_the_deadline_is_a_504_and_changes_of_state_are_exempt(home):
    items = [GEMM | {"m": 64 * (i + 1)} for i in range(500)]
    with api_client(home, request_timeout_s=1e-4) as client:
        answer = client.post("/v1/gemm/predict", json={"items": items})
        assert answer.status_code == 504 and "PREFLIGHT_REQUEST_TIMEOUT_S" in answer.json()["detail"]
        spec = {"id": "lab-gpu", "name": "Lab GPU", "kind": "gpu"}
        assert client.post("/v1/devices", json={"spec": spec}).status_code == 201


@pytest.mark.parametrize("damage", ["truncated", "deleted"])
def test_a_lost_registry_beside_artifacts_is_refused_never_trained_over(home, damage):
    import time

    runs = sorted(p.name for p in (home / "artifacts").iterdir())
    if damage == "truncated":
        (home / "mlflow.db").write_bytes(b"")
    else:
        (home / "mlflow.db").unlink()
    with api_client(home, bootstrap=True) as client:
        for _ in range(600):
            if client.get("/readyz").json()["status"] != "starting":
                break
            time.sleep(0.1)
        ready = client.get("/readyz")
        assert ready.status_code == 503
        for status in ready.json()["tasks"].values():
            assert status["state"] == "failed", status
            assert (
                f"{len(runs)} artifact folder(s)" in status["detail"]
                and "restore mlflow.db" in status["detail"]
            )
        _assert_no_internals(ready.text, home)
        answer = client.post("/v1/gemm/predict", json={"items": [GEMM]})
        assert answer.status_code == 503 and "registry" in answer.json()["detail"]
    assert sorted(p.name for p in (home / "artifacts").iterdir()) == runs  # nothing was trained


def test_training_over_a_lost_registry_is_refused_and_says_how_to_fix(home):
    from preflight.data.catalogue import Catalogue
    from preflight.models.core.task import get_task
    from preflight.models.core.training import train
    from preflight.models.registry.tracking import RegistryLost

    from tests.samples import sample_paths

    (home / "mlflow.db").write_bytes(b"")
    settings = Settings(home=home, datasets=None)
    with pytest.raises(RegistryLost, match="remove the artifacts folder to start over"):
        train(
            get_task("nas-curve"),
            settings,
            Catalogue.load(),
            paths=sample_paths("nas-curve", home.parent / "c"),
        )


def test_a_damaged_registry_database_is_refused_saying_how_to_fix(home):
    """A truncated ``mlflow.db`` (a disk full, a copy cut short) was SQLite's traceback at every command."""
    damaged = shutil.copytree(home, home.parent / "damaged")
    whole = (home / "mlflow.db").read_bytes()
    (damaged / "mlflow.db").write_bytes(whole[: len(whole) // 2])
    with pytest.raises(tracking.RegistryLost, match="registry could not be read .*restore it from a backup"):
        tracking.client(Settings(home=damaged))


def test_a_home_given_as_a_relative_path_is_checked_like_any_other(home, monkeypatch):
    """The default home is ``.preflight``, relative: the lost-registry check opened it as a file URI,
    which a relative path cannot be, and every first start failed (found by ``make serve``)."""
    monkeypatch.chdir(home.parent)
    lost = shutil.copytree(home, home.parent / "lost")
    assert tracking.client(Settings(home=Path(home.name))).search_registered_models()  # as it is: found
    (lost / "mlflow.db").write_bytes(b"")
    with pytest.raises(tracking.RegistryLost):
        tracking.client(Settings(home=Path(lost.name)))
