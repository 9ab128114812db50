"""State that one API key cannot poison (issue 25): measurements beyond a device's physics, no way back
from a registration, look-alike device names, a registration half-written by a crash, a repeated
request, malformed stored rows, and keys that a 500 or a guess would let through."""

import json

import pytest
from fastapi.testclient import TestClient
from preflight.data.settings import Settings
from preflight.service.app import create_app

from tests.client import KEY, api_client
from tests.samples import LAB_GPU as SPEC
from tests.samples import LARGE_FP16_GEMM as SHAPE

H100 = "nvidia-h100-sxm5-80gb"


def _answer(client: TestClient, device: str, shape: dict = SHAPE) -> dict:
    answer = client.post("/v1/gemm/predict", json={"items": [shape | {"device": device}]})
    assert answer.status_code == 200, answer.text
    return answer.json()["predictions"][0]


def _runtime(client: TestClient, device: str) -> float:
    return _answer(client, device)["runtime_ms"]["value"]


def _shots(client: TestClient, device: str, factor: float = 1.5, n: int = 5) -> list[dict]:
    """``n`` measurements of ``device``, ``factor`` times its estimate (shapes apart, so each counts)."""
    return [
        SHAPE
        | {
            "m": 1024 * (i + 1),
            "runtime_ms": _answer(client, device, SHAPE | {"m": 1024 * (i + 1)})["runtime_ms"]["value"]
            * factor,
        }
        for i in range(n)
    ]


def _limit_ms(client: TestClient, device: str) -> float:
    """The GEMM's physical limit on the device: the roofline with the launch floor (the featurizer's)."""
    import pandas as pd
    from preflight.models.core.task import get_task

    task, catalogue = get_task("gemm"), client.app.state.models.catalogue  # type: ignore[attr-defined]
    rows = task.items_to_rows([task.item.model_validate(SHAPE | {"device": device})])
    return float(task.featurize(pd.DataFrame(rows), catalogue).reference["runtime_ms"].iloc[0])


def _measure(client: TestClient, device: str, rows: list[dict], **headers: str):
    return client.post("/v1/devices", json={"device": device, "measurements": rows}, headers=headers)


class Killed(Exception):
    """The process killed at that point: nothing it was writing gets written after it."""


def _stored(home) -> dict:
    path = home / "measurements.json"
    return json.loads(path.read_text()) if path.exists() else {}


# 1. measurements outside the device's physics


def test_a_runtime_faster_than_the_roofline_is_refused_row_by_row(home):
    with api_client(home) as client:
        roofline = _limit_ms(client, "h100")
        assert _answer(client, "h100")["runtime_ms"]["low"] >= roofline
        rows = [
            SHAPE | {"runtime_ms": roofline * 2},
            SHAPE | {"runtime_ms": 0.00446},  # 31x faster than the chip's peak allows
            SHAPE | {"runtime_ms": roofline * 0.995},  # within the 1% tolerance of the limit
        ]
        refused = _measure(client, "h100", rows)
        assert refused.status_code == 422, refused.text
        errors = refused.json()["detail"]
        assert [e["loc"] for e in errors] == [["body", "measurements", 1, "runtime_ms"]]
        assert "faster than the device can be" in errors[0]["msg"]
        assert not _stored(home)


def test_power_far_above_the_tdp_is_refused_with_the_field(home):
    with api_client(home) as client:
        estimate = _runtime(client, "h100")
        rows = [
            SHAPE | {"runtime_ms": estimate, "power_w": 600.0},
            SHAPE | {"runtime_ms": estimate, "power_w": 250e3},
        ]
        refused = _measure(client, "h100", rows)
        assert refused.status_code == 422, refused.text
        (error,) = refused.json()["detail"]
        assert error["loc"] == ["body", "measurements", 1, "power_w"] and "TDP" in error["msg"]


def test_a_runtime_a_thousand_times_the_estimate_is_refused(home):
    with api_client(home) as client:
        refused = _measure(client, "h100", [SHAPE | {"runtime_ms": _runtime(client, "h100") * 2000}])
        assert refused.status_code == 422
        assert refused.json()["detail"][0]["loc"] == ["body", "measurements", 0, "runtime_ms"]


# 2. the way back


def test_measurements_of_a_catalogue_device_can_be_taken_back(home):
    with api_client(home) as client:
        before = _answer(client, "h100")
        assert _measure(client, "h100", _shots(client, "h100")).status_code == 201
        assert _answer(client, "h100") != before
        assert client.delete("/v1/devices/H100").status_code == 409  # the device itself stays
        taken = client.delete("/v1/devices/H100/measurements", params={"task": "gemm"})
        assert taken.status_code == 200, taken.text
        assert taken.json()["spec"]["id"] == H100 and taken.json()["measurements"] == {}
        assert _answer(client, "h100") == before  # bit for bit: the model as trained
        assert not _stored(home)
    with api_client(home) as restarted:
        assert _answer(restarted, "h100") == before


def test_taking_measurements_back_needs_the_key_and_known_names(home):
    with api_client(home) as client:
        assert _measure(client, "h100", _shots(client, "h100")).status_code == 201
        assert (
            client.delete("/v1/devices/h100/measurements", headers={"X-API-Key": "x" * 20}).status_code == 401
        )
        unknown = client.delete("/v1/devices/h10O0/measurements")
        assert unknown.status_code == 404 and unknown.json()["close_matches"]
        task = client.delete("/v1/devices/h100/measurements", params={"task": "gemmm"})
        assert task.status_code == 404 and "gemm" in task.json()["known"]
        other = client.delete("/v1/devices/h100/measurements", params={"task": "nas-latency"})
        assert other.status_code == 200 and other.json()["measurements"] == {"gemm": 5}
        assert client.delete("/v1/devices/h100/measurements").json()["measurements"] == {}


# 3. look-alike names


@pytest.mark.parametrize(
    "name", ["Н100", "Η100", "Ｈ１００", "H¹⁰⁰", "NVİDİA H100 80GB HBM3", "H1OO", "h1oo sxm"]
)
def test_a_name_that_looks_like_a_catalogue_device_is_refused(home, name):
    with api_client(home) as client:
        for spec in (SPEC | {"name": name}, SPEC | {"aliases": [name]}):
            refused = client.post("/v1/devices", json={"spec": spec})
            assert refused.status_code == 409, (name, refused.text)
            assert "H100" in refused.json()["detail"]
        assert client.get("/v1/devices/lab-gpu").status_code == 404


def test_the_host_cpu_cannot_be_impersonated(home):
    with api_client(home) as client:
        host = client.get("/v1/devices/cpu").json()["spec"]
        fake = SPEC | {"id": host["id"], "name": "Fake accelerator"}
        refused = client.post("/v1/devices", json={"spec": fake})
        assert refused.status_code == 409 and host["name"] in refused.json()["detail"]
        refused = client.post("/v1/devices", json={"spec": SPEC | {"aliases": ["HOST"]}})
        assert refused.status_code == 409
        assert client.get("/v1/devices/host").json()["spec"] == host
        assert client.get("/v1/devices/cpu").json()["spec"]["kind"] == "cpu"


def test_a_name_that_looks_like_a_registered_device_is_refused(home):
    with api_client(home) as client:
        assert client.post("/v1/devices", json={"spec": SPEC}).status_code == 201
        for name in ("LAB GPU 7", "Lаb GPU 7", "Ｌａｂ ＧＰＵ ７", "lab-gpu"):  # Latin, Cyrillic а, fullwidth
            copy = SPEC | {"id": "lab-gpu-copy", "name": name}
            refused = client.post("/v1/devices", json={"spec": copy})
            assert refused.status_code == 409 and "'lab-gpu'" in refused.json()["detail"], name
        assert (
            client.post("/v1/devices", json={"spec": SPEC | {"tdp_w": 450.0}}).status_code == 201
        )  # its own


def test_a_device_a_champion_was_trained_on_cannot_be_deleted(home):
    with api_client(home) as client:
        before = _answer(client, "amd-epyc-1-threads")
        refused = client.delete("/v1/devices/amd-epyc-1-threads")
        assert refused.status_code == 409, refused.text
        assert "gemm champion" in refused.json()["detail"]
        assert _answer(client, "amd-epyc-1-threads") == before


# 4. one change, once


def test_a_crash_midway_leaves_the_spec_and_its_rows_together(home, monkeypatch):
    from preflight.data import store

    written = []

    def crash_after_the_first_file(folder, files):  # a kill -9 after the journal and one file
        name, payload = next(iter(files.items()))
        store.atomic_write_bytes(folder / name, payload)
        written.append(name)
        raise Killed

    with api_client(home) as client:
        assert client.post("/v1/devices", json={"spec": SPEC}).status_code == 201
        rows = _shots(client, "lab-gpu", n=4) * 50
        assert client.delete("/v1/devices/lab-gpu").status_code == 200
        monkeypatch.setattr(store, "_replace_all", crash_after_the_first_file)
        with pytest.raises(Killed):
            client.post("/v1/devices", json={"spec": SPEC, "measurements": rows})
        monkeypatch.undo()
        assert written == ["devices.json"] and (home / ".journal.json").exists()
    with api_client(home) as restarted:  # start-up completes the change
        device = restarted.get("/v1/devices/lab-gpu").json()
        assert device["measurements"] == {"gemm": 200}
    assert not (home / ".journal.json").exists()


def test_a_failed_write_of_the_journal_changes_nothing(home, monkeypatch):
    from preflight.data import store

    real = store.atomic_write_bytes

    def disk_full_at_the_journal(path, payload):
        if path.name == store.JOURNAL:
            raise OSError(28, "No space left on device")
        real(path, payload)

    with api_client(home) as client:
        rows = _shots(client, "h100")
        monkeypatch.setattr(store, "atomic_write_bytes", disk_full_at_the_journal)
        with pytest.raises(OSError):
            client.post("/v1/devices", json={"spec": SPEC})
        with pytest.raises(OSError):
            _measure(client, "h100", rows)
        monkeypatch.undo()
        assert client.get("/v1/devices/lab-gpu").status_code == 404  # undone in memory too
        assert client.get("/v1/devices/H100 SXM5").json()["measurements"] == {}
    with api_client(home) as restarted:
        assert restarted.get("/v1/devices/lab-gpu").status_code == 404
        assert restarted.get("/v1/devices/H100 SXM5").json()["measurements"] == {}


def test_a_repeated_request_with_its_idempotency_key_changes_nothing_twice(home):
    with api_client(home) as client:
        rows = _shots(client, "h100")
        first = _measure(client, "h100", rows, **{"Idempotency-Key": "retry-1"})
        assert first.status_code == 201 and first.json()["measurements"] == {"gemm": 5}
        again = _measure(client, "h100", rows, **{"Idempotency-Key": "retry-1"})
        assert again.status_code == 201 and again.json() == first.json()
        assert len(_stored(home)["gemm"]) == 5
        other = _measure(client, "h100", rows[:2], **{"Idempotency-Key": "retry-1"})
        assert other.status_code == 422, other.text
        assert other.json()["detail"][0]["loc"] == ["header", "idempotency-key"]
    with api_client(home) as restarted:  # the keys live in the home
        again = _measure(restarted, "h100", rows, **{"Idempotency-Key": "retry-1"})
        assert again.json() == first.json() and len(_stored(home)["gemm"]) == 5
        assert _measure(restarted, "h100", rows, **{"Idempotency-Key": "retry-2"}).json()["measurements"] == {
            "gemm": 10
        }


def test_a_repeat_of_a_registration_whose_device_was_deleted_is_a_409_not_a_stale_201(home):
    """The replayed answer would name a device that no longer exists (schemathesis's stateful phase
    found it: POST, DELETE, the same POST again, then a DELETE of what the 201 said it created)."""
    headers = {"Idempotency-Key": "register-once"}
    with api_client(home) as client:
        assert client.post("/v1/devices", json={"spec": SPEC}, headers=headers).status_code == 201
        assert client.delete(f"/v1/devices/{SPEC['id']}").status_code == 200
        again = client.post("/v1/devices", json={"spec": SPEC}, headers=headers)
        assert again.status_code == 409 and "deleted" in again.json()["detail"], again.text
        assert client.get(f"/v1/devices/{SPEC['id']}").status_code == 404  # nothing registered twice


def test_idempotency_keys_are_bounded_oldest_first(home, monkeypatch):
    from preflight.models.registry import devices

    monkeypatch.setattr(devices, "MAX_IDEMPOTENCY_KEYS", 2)
    with api_client(home) as client:
        for key in ("k1", "k2", "k3"):
            spec = SPEC | {"id": f"lab-{key}", "name": f"Lab {key}"}
            assert (
                client.post("/v1/devices", json={"spec": spec}, headers={"Idempotency-Key": key}).status_code
                == 201
            )
    assert list(json.loads((home / "idempotency.json").read_text())) == ["k2", "k3"]


@pytest.mark.parametrize("key", ["", "x" * 200, "two words"])
def test_a_malformed_idempotency_key_is_a_422_naming_the_header(home, key):
    with api_client(home) as client:
        answer = client.post("/v1/devices", json={"spec": SPEC}, headers={"Idempotency-Key": key})
        assert answer.status_code == 422 and answer.json()["detail"][0]["loc"] == [
            "header",
            "idempotency-key",
        ]


# 5. stored rows that no longer apply


def test_a_malformed_stored_row_is_set_aside_and_the_others_keep_adapting(home):
    with api_client(home) as client:
        assert client.post("/v1/devices", json={"spec": SPEC}).status_code == 201
        assert _measure(client, "h100", _shots(client, "h100")).status_code == 201
        assert _measure(client, "lab-gpu", _shots(client, "lab-gpu", 2.0)).status_code == 201
        adapted = _answer(client, "h100")
    stored = _stored(home)
    stored["gemm"][7]["m"] = "x"  # a lab-gpu row
    (home / "measurements.json").write_text(json.dumps(stored))
    with api_client(home) as client:
        status = client.get("/readyz").json()["tasks"]["gemm"]
        assert status["state"] == "ready" and "set aside" in status["detail"] and "row 7" in status["detail"]
        assert _answer(client, "h100") == adapted
        assert client.get("/v1/devices/lab-gpu").json()["measurements"] == {"gemm": 4}
        more = _measure(client, "lab-gpu", _shots(client, "lab-gpu", 2.0, n=2))
        assert more.status_code == 201, more.text
    (aside,) = home.glob("measurements.json.set-aside-*")
    (entry,) = json.loads(aside.read_text())
    assert entry["task"] == "gemm" and entry["measurement"]["m"] == "x" and entry["why"].startswith("m:")


def test_rows_of_a_device_that_is_gone_are_set_aside(home):
    with api_client(home) as client:
        assert client.post("/v1/devices", json={"spec": SPEC}).status_code == 201
        assert _measure(client, "lab-gpu", _shots(client, "lab-gpu", 2.0)).status_code == 201
        assert _measure(client, "h100", _shots(client, "h100")).status_code == 201
        adapted = _answer(client, "h100")
    (home / "devices.json").write_text("[{")  # damaged: set aside with its devices
    with api_client(home) as client:
        assert "5 stored measurement(s) set aside" in client.get("/readyz").json()["tasks"]["gemm"]["detail"]
        assert _answer(client, "h100") == adapted
        assert client.post("/v1/devices", json={"spec": SPEC}).status_code == 201
        again = _measure(client, "lab-gpu", _shots(client, "lab-gpu", 2.0))
        assert again.status_code == 201, again.text
    assert list(home.glob("devices.json.damaged-*")) and list(home.glob("measurements.json.set-aside-*"))


# 7. keys


@pytest.mark.parametrize("protect_reads", [False, True])
def test_a_non_ascii_key_is_a_401_not_a_500(home, protect_reads):
    settings = Settings(home=home, api_keys=[KEY], protect_reads=protect_reads, reload_interval_s=0)
    with TestClient(create_app(settings)) as client:
        headers = {"X-API-Key": "ключ-ключ-ключ-ключ".encode()}
        assert client.post("/v1/devices", json={"spec": SPEC}, headers=headers).status_code == 401
        assert client.get("/v1/tasks", headers=headers).status_code == (401 if protect_reads else 200)
