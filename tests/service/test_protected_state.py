"""Served state a client cannot falsify: absurd measurements, hijacked names, bad spec values,
deletion, and a changed spec sheet that refits what it adapted."""

import pytest

from tests.client import api_client
from tests.samples import LAB_GPU as SPEC
from tests.samples import LARGE_FP16_GEMM as SHAPE


def _runtime(client, device: str) -> float:
    answer = client.post("/v1/gemm/predict", json={"items": [SHAPE | {"device": device}]})
    assert answer.status_code == 200, answer.text
    return answer.json()["predictions"][0]["runtime_ms"]["value"]


def _register_lab_gpu_with_shots(client) -> None:
    """SPEC registered, then five measurements twice its estimate."""
    assert client.post("/v1/devices", json={"spec": SPEC}).status_code == 201
    shots = [SHAPE | {"runtime_ms": _runtime(client, "lab-gpu") * 2}] * 5
    assert client.post("/v1/devices", json={"device": "lab-gpu", "measurements": shots}).status_code == 201


def test_absurd_measurements_are_refused_with_the_reason_and_change_nothing(home):
    with api_client(home) as client:
        before = _runtime(client, "h100")
        absurd = [SHAPE | {"runtime_ms": 1e6}] * 20
        refused = client.post("/v1/devices", json={"device": "h100", "measurements": absurd})
        assert refused.status_code == 422, refused.text
        error = refused.json()["detail"][0]
        assert error["loc"] == ["body", "measurements", 0, "runtime_ms"] and "roofline" in refused.text
        assert _runtime(client, "h100") == before
        assert not (home / "measurements.json").exists()


def test_plausible_measurements_still_adapt(home):
    with api_client(home) as client:
        estimate = _runtime(client, "h100")
        shots = [SHAPE | {"runtime_ms": estimate * 1.5}] * 5
        assert client.post("/v1/devices", json={"device": "h100", "measurements": shots}).status_code == 201
        assert _runtime(client, "h100") != estimate


@pytest.mark.parametrize(
    "name", ["nvidia h100 sxm5 80gb", "NVIDIA H100 80GB HBM3", "h100 sxm", "Tesla P100-PCIE-16GB"]
)
def test_a_user_name_never_shadows_a_catalogue_device(home, name):
    with api_client(home) as client:
        before = client.get("/v1/devices/nvidia h100 sxm5 80gb").json()["spec"]["id"]
        answer = client.post("/v1/devices", json={"spec": SPEC | {"name": name}})
        assert answer.status_code == 409, answer.text
        assert client.get("/v1/devices/nvidia h100 sxm5 80gb").json()["spec"]["id"] == before


@pytest.mark.parametrize(
    "field, value",
    [
        ("memory_bandwidth_gbs", float("nan")),
        ("memory_bandwidth_gbs", float("inf")),
        ("memory_bandwidth_gbs", 1e-300),
        ("id", "x" * 1_000_000),
        ("name", "y" * 10_000),
    ],
)
def test_spec_values_must_be_finite_and_bounded(home, field, value):
    import json

    body = json.dumps({"spec": SPEC | {field: value}}, allow_nan=True)  # NaN as a client may send it
    with api_client(home) as client:
        answer = client.post("/v1/devices", content=body, headers={"content-type": "application/json"})
        assert answer.status_code == 422 and answer.json()["detail"][0]["loc"][:3] == ["body", "spec", field]
        assert len(answer.content) < 5_000


def test_a_registered_device_can_be_deleted_with_its_measurements(home):
    with api_client(home) as client:
        _register_lab_gpu_with_shots(client)
        deleted = client.delete("/v1/devices/lab-gpu")
        assert deleted.status_code == 200 and deleted.json()["spec"]["id"] == "lab-gpu"
        assert client.get("/v1/devices/lab-gpu").status_code == 404
        assert client.app.state.devices.measurements == {}  # type: ignore[attr-defined]
        assert client.delete("/v1/devices/h100").status_code == 409  # a catalogue entry stays
        assert client.delete("/v1/devices/warp-drive").status_code == 404


def test_a_changed_spec_refits_as_a_restart_would(home):
    with api_client(home) as client:
        _register_lab_gpu_with_shots(client)
        changed = SPEC | {"memory_bandwidth_gbs": 900.0, "peak_tflops": {"fp32": 30.0, "fp16": 200.0}}
        assert client.post("/v1/devices", json={"spec": changed}).status_code == 201
        live = _runtime(client, "lab-gpu")
    with api_client(home) as restarted:
        assert _runtime(restarted, "lab-gpu") == pytest.approx(live, rel=1e-9)


def test_a_refused_measurement_registers_no_new_device(home):
    with api_client(home) as client:
        absurd = [SHAPE | {"runtime_ms": 1e9}] * 3
        answer = client.post("/v1/devices", json={"spec": SPEC, "measurements": absurd})
        assert answer.status_code == 422
        assert client.get("/v1/devices/lab-gpu").status_code == 404


def test_workers_sharing_a_home_never_lose_each_others_registrations(home):
    with api_client(home) as first, api_client(home) as second:
        assert first.post("/v1/devices", json={"spec": SPEC}).status_code == 201
        second.app.state.devices.sync()  # type: ignore[attr-defined]  # what its watcher does
        assert second.get("/v1/devices/lab-gpu").status_code == 200
        estimate = _runtime(second, "lab-gpu")
        shots = [SHAPE | {"runtime_ms": estimate * 2}] * 5
        assert (
            second.post("/v1/devices", json={"device": "lab-gpu", "measurements": shots}).status_code == 201
        )
        other = SPEC | {"id": "lab-gpu-2", "name": "Lab GPU 8"}
        assert first.post("/v1/devices", json={"spec": other}).status_code == 201  # reads the file first
        assert first.get("/v1/devices/lab-gpu").json()["measurements"] == {"gemm": 5}
        assert _runtime(first, "lab-gpu") == _runtime(second, "lab-gpu")


@pytest.mark.parametrize(
    "body",
    [
        {"device": "h100", "measurements": [SHAPE | {"runtime_ms": 10**400}]},  # overflows a float
        {"device": "h100", "measurements": [SHAPE | {"k" * 1_000_000: 1, "runtime_ms": 1.0}]},
        {"spec": SPEC, "x" * 1_000_000: 1},
    ],
)
def test_registration_refusals_are_small_422s(home, body):
    with api_client(home) as client:
        answer = client.post("/v1/devices", json=body)
        assert answer.status_code == 422 and len(answer.content) < 5_000


def test_a_device_name_of_a_megabyte_is_a_small_422_naming_its_field(home):
    with api_client(home) as client:
        answer = client.post("/v1/gemm/predict", json={"items": [SHAPE | {"device": "z" * 1_000_000}]})
        assert answer.status_code == 422 and len(answer.content) < 5_000
        assert answer.json()["detail"][0]["loc"] == ["body", "items", 0, "device"]


def test_deletion_takes_an_exact_name_only(home):
    with api_client(home) as client:
        assert client.post("/v1/devices", json={"spec": SPEC}).status_code == 201
        assert client.delete("/v1/devices/lab gpu 7 80gb sxm").status_code == 404
        assert client.delete("/v1/devices/Lab GPU 7").status_code == 200


def test_stored_measurements_that_no_longer_apply_leave_the_task_serving(home):
    import json

    (home / "measurements.json").write_text(json.dumps({"gemm": [{"device_id": "h100", "runtime_ms": 1}]}))
    with api_client(home) as client:
        assert client.get("/readyz").json()["tasks"]["gemm"]["state"] == "ready"
        assert _runtime(client, "h100") > 0


def test_a_stored_row_without_a_device_is_set_aside_alone(home):
    (home / "measurements.json").write_text('{"gemm": [{"runtime_ms": 1}], "nas-latency": []}')
    with api_client(home) as client:
        assert client.get("/v1/devices").status_code == 200
        assert "set aside" in client.get("/readyz").json()["tasks"]["gemm"]["detail"]
    assert list(home.glob("measurements.json.set-aside-*")) and not list(home.glob("*.damaged-*"))


def test_a_measurements_file_of_another_shape_is_set_aside_whole(home):
    (home / "measurements.json").write_text('{"gemm": {"runtime_ms": 1}}')
    with api_client(home) as client:
        assert client.get("/v1/devices").status_code == 200
    assert list(home.glob("measurements.json.damaged-*"))


LONG = ("k" * 16, "m" * 40)


@pytest.mark.parametrize(
    "value, keys", [("", []), (",".join(LONG), list(LONG)), (f'["{LONG[0]}"]', [LONG[0]])]
)
def test_api_keys_read_from_the_environment(monkeypatch, value, keys):
    from preflight.data.settings import Settings

    monkeypatch.setenv("PREFLIGHT_API_KEYS", value)
    assert Settings().api_keys == keys


@pytest.mark.parametrize(
    "value, why, secret",
    [
        ("tiny-secret", "at least 16", "tiny-secret"),
        (f"{LONG[0]},tiny-secret", "key 2 of 2", "tiny-secret"),
        ("ключ" * 5, "ASCII", "ключ"),
    ],
)
def test_a_weak_api_key_is_refused_at_settings_load_without_echoing_it(monkeypatch, value, why, secret):
    from preflight.data.settings import Settings
    from pydantic import ValidationError

    monkeypatch.setenv("PREFLIGHT_API_KEYS", value)
    with pytest.raises(ValidationError, match="PREFLIGHT_API_KEYS") as refused:
        Settings()
    assert why in str(refused.value) and secret not in str(refused.value)
