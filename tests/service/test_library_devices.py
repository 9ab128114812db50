"""Devices and measurements through ``import preflight`` and through ``/v1/devices`` are one registry: what
either registers in a home, the other reads from it and answers with."""

import preflight
import pytest
from preflight.data.errors import DeviceConflict, UnknownDevice
from preflight.models.registry.devices import ImplausibleMeasurements, InvalidRegistration

from tests.client import api_client
from tests.samples import LAB_GPU as SPEC
from tests.samples import LARGE_FP16_GEMM as SHAPE

OTHERS = [SHAPE | {"device": device} for device in ("H100 SXM5", "T4", "cpu")]


def _shots(model: preflight.Model, device: str, factor: float = 2.0, n: int = 5) -> list[dict]:
    """``n`` measurements of ``device``, ``factor`` times the model's estimate (shapes apart)."""
    shapes = [SHAPE | {"m": 1024 * (i + 1)} for i in range(n)]
    estimates = model.records([shape | {"device": device} for shape in shapes])
    return [shape | {"runtime_ms": factor * e["runtime_ms"]["value"]} for shape, e in zip(shapes, estimates)]


def _predict(client, items: list[dict]) -> dict:
    answer = client.post("/v1/gemm/predict", json={"items": items})
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_a_device_registered_in_python_is_answered_by_the_service(home):
    before = preflight.load("gemm", home=home)
    assert preflight.register_device(SPEC, home=home).measurements == {}
    shots = _shots(preflight.load("gemm", home=home), "lab-gpu")
    assert preflight.measure("lab-gpu", "gemm", shots, home=home).measurements == {"gemm": 5}
    model = preflight.load("gemm", home=home)
    assert model.info.adaptation is not None and model.info.adaptation.startswith("shots:5:")
    items = [SHAPE | {"device": "Lab GPU 7"}, *OTHERS]
    with api_client(home) as client:
        assert client.get("/v1/devices/lab-gpu").json()["measurements"] == {"gemm": 5}
        answer = _predict(client, items)
    assert answer["model"]["adaptation"] == model.info.adaptation
    assert answer["predictions"] == model.records(items)
    assert model.records(OTHERS) == before.records(OTHERS)  # only the measured device moved


def test_a_device_registered_over_http_is_seen_and_adapted_in_python(home):
    with api_client(home) as client:
        assert client.post("/v1/devices", json={"spec": SPEC}).status_code == 201
        shots = _shots(preflight.load("gemm", home=home), "lab-gpu")
        registered = client.post("/v1/devices", json={"device": "lab-gpu", "measurements": shots})
        assert registered.status_code == 201, registered.text
        answer = _predict(client, [SHAPE | {"device": "lab-gpu"}, *OTHERS])
    (spec,) = preflight.devices("lab-gpu", home=home)
    assert spec.name == SPEC["name"]
    model = preflight.load("gemm", home=home)
    assert model.info.adaptation == answer["model"]["adaptation"]
    assert model.records([SHAPE | {"device": "lab-gpu"}, *OTHERS]) == answer["predictions"]


def test_measurements_from_python_are_checked_as_the_service_checks_them(home):
    with pytest.raises(InvalidRegistration) as invalid:
        preflight.measure("H100 SXM5", "gemm", [SHAPE | {"m": -1, "runtime_ms": 1.0}], home=home)
    assert invalid.value.errors[0]["loc"] == ("measurements", 0, "m")
    with pytest.raises(ImplausibleMeasurements, match="roofline"):
        preflight.measure("H100 SXM5", "gemm", [SHAPE | {"runtime_ms": 1e-9}] * 3, home=home)
    with pytest.raises(ImplausibleMeasurements):  # a new spec with refused measurements registers nothing
        preflight.register_device(SPEC, [SHAPE | {"runtime_ms": 1e9}] * 3, home=home)
    assert not (home / "measurements.json").exists()
    with pytest.raises(UnknownDevice):
        preflight.devices("lab-gpu", home=home)


def test_devices_and_measurements_are_taken_back_from_python(home):
    preflight.register_device(SPEC, home=home)
    with api_client(home) as client:
        shots = _shots(preflight.load("gemm", home=home), "H100 SXM5", factor=1.5)
        assert (
            client.post("/v1/devices", json={"device": "H100 SXM5", "measurements": shots}).status_code == 201
        )
    assert preflight.remove_measurements("H100 SXM5", "gemm", home=home).measurements == {}
    assert preflight.remove_device("lab-gpu", home=home).id == "lab-gpu"
    assert preflight.load("gemm", home=home).info.adaptation is None
    with pytest.raises(DeviceConflict, match="gemm champion"):  # trained on: its answers need the spec
        preflight.remove_device("amd-epyc-1-threads", home=home)
    with api_client(home) as client:
        assert client.get("/v1/devices/lab-gpu").status_code == 404
        assert client.get("/v1/devices/H100 SXM5").json()["measurements"] == {}
