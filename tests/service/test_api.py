import pytest
from fastapi.testclient import TestClient
from preflight.data.settings import Settings
from preflight.service.app import create_app

from tests.client import api_client
from tests.conftest import http

ITEM = {"m": 1024, "n": 1024, "k": 1024, "dtype": "fp32", "device": "NVIDIA H100 PCIe"}


@pytest.fixture
def client(home):
    with api_client(home) as test_client:
        yield test_client


def test_health_and_readiness(client):
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["loaded"] == [
        "fpga",
        "gemm",
        "interference",
        "interference-trace",
        "model-latency",
        "nas-accuracy",
        "nas-curve",
        "nas-latency",
    ]


def test_head_answers_as_get_would_headers_only(client):
    """A monitor's ``HEAD /healthz`` (RFC 9110: a server that answers GET answers HEAD) was a 405."""
    for path in ("/healthz", "/readyz", "/v1/devices", "/v1/devices/Tesla T4", "/metrics"):
        head, get = client.head(path), client.get(path)
        assert head.status_code == get.status_code == 200, (path, head.status_code, get.status_code)
        assert head.content == b"" and head.headers["content-type"] == get.headers["content-type"], path
    assert client.head("/v1/devices/no-such-gpu").status_code == 404


def test_untrained_service_is_not_ready_and_says_how_to_train(tmp_path):
    with api_client(tmp_path / "empty") as client:
        assert client.get("/readyz").status_code == 503
        response = client.post("/v1/gemm/predict", json={"items": [ITEM]})
        assert response.status_code == 503 and "preflight train gemm" in response.json()["detail"]


def test_a_device_name_several_devices_fit_is_a_404_listing_them(tmp_path):
    with api_client(tmp_path / "empty") as client:
        answer = client.get("/v1/devices/a100 pcie")
        named = client.get("/v1/devices/NVIDIA A100-PCIE-40GB")
    assert answer.status_code == 404 and answer.json()["error"] == "AmbiguousDevice"
    assert answer.json()["close_matches"] == ["NVIDIA A100 PCIe 40 GB", "NVIDIA A100 PCIe 80 GB"]
    assert named.status_code == 200 and named.json()["spec"]["id"] == "nvidia-a100-pcie-40gb"


def test_an_estimate_for_a_name_several_devices_fit_says_which_device_it_is_for(client):
    """``H100`` is answered for the SXM5, as the data sets that write it mean; the PCIe card is 30%
    slower, and a user comparing them must see which one answered (``GET /v1/devices/H100`` is a 404
    listing both)."""
    items = [
        ITEM | {"device": "H100"},
        ITEM | {"device": "NVIDIA H100 SXM5 80 GB"},
        ITEM | {"device": "h100"},
    ]
    short, named, lower = client.post("/v1/gemm/predict", json={"items": items}).json()["predictions"]
    assert "ambiguous:H100=nvidia-h100-sxm5-80gb" in short["warnings"]
    assert "ambiguous:h100=nvidia-h100-sxm5-80gb" in lower["warnings"]
    assert not any(w.startswith("ambiguous:") for w in named["warnings"])
    assert short["runtime_ms"] == named["runtime_ms"] and short["ood"] == named["ood"]  # a note, not a reason
    code = "ambiguous:H100=nvidia-h100-sxm5-80gb"
    explained = client.post("/v1/ood-reasons/explain", json={"task": "gemm", "warnings": [code]})
    assert "is for nvidia-h100-sxm5-80gb" in explained.json()[0]["text"], explained.text


def test_serving_starts_at_once_and_trains_missing_champions_meanwhile(first_start):
    """A fresh clone's ``preflight serve`` (a live server): it answers before any model is trained,
    trains every task meanwhile, and then estimates."""
    assert first_start.health_at_once == 200 and "gemm" in first_start.trained_meanwhile
    status, answer = http(f"{first_start.url}/v1/gemm/predict", {"items": [ITEM]})
    assert status == 200 and answer["predictions"][0]["runtime_ms"]["value"] > 0


def test_tasks_list_schema_targets_and_champion(client):
    tasks = {t["name"]: t for t in client.get("/v1/tasks").json()}
    assert set(tasks) == {"gemm", "model-latency", "nas-accuracy", "nas-latency", "nas-curve", "interference",
                          "interference-trace", "fpga"}  # fmt: skip
    gemm = tasks["gemm"]
    assert gemm["name"] == "gemm" and gemm["targets"]["runtime_ms"] == {
        "unit": "ms",
        "scale": "log",
        "lower": None,
        "upper": None,
        "zero_ok": False,
        "description": "",
    }
    assert tasks["nas-accuracy"]["targets"]["accuracy"]["scale"] == "identity"
    assert {"m", "n", "k", "dtype", "device"} <= set(gemm["input_schema"]["properties"])
    assert gemm["champion"]["family"] == "physics"


def test_predicts_an_unmeasured_device_from_its_spec_sheet_with_intervals(client):
    response = client.post(
        "/v1/gemm/predict", json={"items": [ITEM, ITEM | {"device": "p100", "m": 3}], "coverage": 0.8}
    )
    assert response.status_code == 200
    body = response.json()
    assert (
        body["task"] == "gemm" and body["model"]["name"] == "preflight.gemm" and len(body["predictions"]) == 2
    )
    first = body["predictions"][0]
    runtime = first["runtime_ms"]
    assert 0 < runtime["low"] <= runtime["value"] <= runtime["high"]
    assert first["ood"] is True and any(w.startswith("unseen:device_id=") for w in first["warnings"])


def test_measured_device_in_range_is_not_flagged(client):
    item = {"m": 512, "n": 512, "k": 512, "dtype": "fp32", "device": "amd-epyc-1-threads"}
    prediction = client.post("/v1/gemm/predict", json={"items": [item]}).json()["predictions"][0]
    assert prediction["ood"] is False
    # the sweep's host has no TDP on its sheet: no power estimate, said so, and nothing else
    assert prediction["power_w"]["value"] is None
    assert all(w in ("missing:power_w", "missing:energy_j") for w in prediction["warnings"])


@pytest.mark.parametrize(
    "body, field",
    [
        ({"items": [ITEM | {"m": 0}]}, ["body", "items", 0, "m"]),
        ({"items": [ITEM | {"k": -5}]}, ["body", "items", 0, "k"]),
        ({"items": [ITEM | {"dtype": "fp12"}]}, ["body", "items", 0, "dtype"]),
        ({"items": [ITEM | {"colour": "red"}]}, ["body", "items", 0, "colour"]),
        ({"items": []}, ["body", "items"]),
        ({"items": [ITEM] * 10_001}, ["body", "items"]),
        ({"items": [ITEM], "coverage": 1.5}, ["body", "coverage"]),
    ],
)
def test_bad_items_get_422_naming_the_field(client, body, field):
    response = client.post("/v1/gemm/predict", json=body)
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == field


def test_oversized_request_is_refused_without_echoing_it(client):
    response = client.post("/v1/gemm/predict", json={"items": [ITEM] * 10_001})
    assert response.status_code == 422 and "at most 10000" in response.json()["detail"][0]["msg"]
    assert len(response.content) < 1_000


def test_malformed_json_gets_422(client):
    response = client.post(
        "/v1/gemm/predict", content=b'{"items": [', headers={"content-type": "application/json"}
    )
    assert response.status_code == 422 and response.json()["detail"][0]["type"] == "json_invalid"


def test_unknown_device_and_task_get_404_listing_known_names(client):
    response = client.post("/v1/gemm/predict", json={"items": [ITEM | {"device": "rtx 4070 tii"}]})
    assert response.status_code == 404 and "NVIDIA GeForce RTX 4070" in response.json()["close_matches"]
    response = client.post("/v1/fpga-magic/predict", json={"items": []})
    assert response.status_code == 404 and response.json()["known"] == [
        "fpga",
        "gemm",
        "interference",
        "interference-trace",
        "model-latency",
        "nas-accuracy",
        "nas-curve",
        "nas-latency",
    ]


def test_devices_list_and_resolve_any_name(client):
    devices = client.get("/v1/devices").json()
    assert len(devices) >= 30
    one = client.get("/v1/devices/Tesla V100-SXM2-16GB").json()
    assert one["spec"]["id"] == "nvidia-tesla-v100-sxm2-16gb"
    assert client.get("/v1/devices/amd-epyc-1-threads").json()["spec"]["kind"] == "cpu"
    missing = client.get("/v1/devices/warp-drive")
    assert missing.status_code == 404 and "unknown device" in missing.json()["detail"]


def test_register_a_device_then_adapt_it_with_measurements(client):
    spec = {
        "id": "lab-cpu",
        "name": "Lab CPU",
        "kind": "cpu",
        "memory_bandwidth_gbs": 20.0,
        "compute_units": 1,
        "peak_tflops": {"fp32": 0.08, "fp64": 0.04},
    }
    assert client.post("/v1/devices", json={"spec": spec}).status_code == 201
    item = {"m": 512, "n": 512, "k": 512, "device": "lab-cpu"}
    before = client.post("/v1/gemm/predict", json={"items": [item]}).json()["predictions"][0]
    measurements = [
        {"m": s, "n": s, "k": s, "runtime_ms": 4 * before["runtime_ms"]["value"] * (s / 512) ** 3}
        for s in (256, 384, 512, 640, 768)
    ]
    registered = client.post("/v1/devices", json={"device": "lab-cpu", "measurements": measurements})
    assert registered.status_code == 201 and registered.json()["measurements"] == {"gemm": 5}
    after = client.post("/v1/gemm/predict", json={"items": [item]}).json()["predictions"][0]
    assert after["runtime_ms"]["value"] > 2 * before["runtime_ms"]["value"]
    assert not any(w.startswith(("unseen:", "unmeasured:")) for w in after["warnings"])


def test_bad_registrations_are_refused_clearly(client):
    bad_measurement = client.post(
        "/v1/devices", json={"device": "p100", "measurements": [{"m": 0, "n": 1, "k": 1, "runtime_ms": 1}]}
    )
    assert bad_measurement.status_code == 422 and bad_measurement.json()["detail"][0]["loc"] == [
        "body",
        "measurements",
        0,
        "m",
    ]
    no_target = client.post(
        "/v1/devices", json={"device": "p100", "measurements": [{"m": 8, "n": 8, "k": 8}]}
    )
    assert no_target.status_code == 422 and "runtime_ms" in no_target.json()["detail"][0]["msg"]
    shipped = client.post(
        "/v1/devices",
        json={
            "spec": {
                "id": "nvidia-tesla-p100-pcie-16gb",
                "name": "x",
                "kind": "gpu",
                "memory_bandwidth_gbs": 1,
                "peak_tflops": {"fp32": 1},
            }
        },
    )
    assert shipped.status_code == 409
    takeover = client.post(
        "/v1/devices",
        json={
            "spec": {
                "id": "mine",
                "name": "x",
                "kind": "gpu",
                "aliases": ["NV_P100"],
                "memory_bandwidth_gbs": 1,
                "peak_tflops": {"fp32": 1},
            }
        },
    )
    assert takeover.status_code == 409 and "NV_P100" in takeover.json()["detail"]
    assert client.post("/v1/devices", json={}).status_code == 422
    for value in ("1e400", "true", "-1"):  # 1e400 is valid JSON that parses to infinity
        body = f'{{"device": "p100", "measurements": [{{"m": 8, "n": 8, "k": 8, "runtime_ms": {value}}}]}}'
        response = client.post("/v1/devices", content=body, headers={"content-type": "application/json"})
        assert response.status_code == 422, value
    refused = client.post(
        "/v1/devices",
        json={
            "spec": {
                "id": "half-done",
                "name": "Half",
                "kind": "gpu",
                "memory_bandwidth_gbs": 1,
                "peak_tflops": {"fp32": 1},
            },
            "measurements": [{"m": 0, "n": 8, "k": 8, "runtime_ms": 1}],
        },
    )
    assert refused.status_code == 422 and client.get("/v1/devices/half-done").status_code == 404


def test_metrics_endpoint_counts_requests(client):
    client.post("/v1/gemm/predict", json={"items": [ITEM]})
    text = client.get("/metrics").text
    assert 'preflight_requests_total{route="/v1/gemm/predict",status="200"}' in text


def test_routes_that_change_state_need_the_generated_key_by_default(home):
    spec = {"spec": {"id": "lab-gpu", "name": "Lab GPU", "kind": "gpu"}}
    with TestClient(create_app(Settings(home=home, reload_interval_s=0))) as client:
        assert client.post("/v1/gemm/predict", json={"items": [ITEM]}).status_code == 200  # reads are open
        refused = client.post("/v1/devices", json=spec)
        assert refused.status_code == 401 and "api-key" in refused.json()["detail"]
        assert client.delete("/v1/devices/lab-gpu").status_code == 401
        assert client.post("/v1/admin/reload").status_code == 401
        key_file = home / "api-key"
        assert key_file.stat().st_mode & 0o077 == 0  # readable by its owner only
        key = {"X-API-Key": key_file.read_text().strip()}
        assert client.post("/v1/devices", json=spec, headers=key).status_code == 201


def test_protected_reads_need_a_configured_key(home):
    settings = Settings(home=home, api_keys=["s3cret-0123456789ab"], protect_reads=True, reload_interval_s=0)
    with TestClient(create_app(settings)) as client:
        assert client.get("/v1/tasks").status_code == 401
        assert client.get("/v1/tasks", headers={"X-API-Key": "s3cret-0123456789ab"}).status_code == 200
        assert client.get("/healthz").status_code == 200


def test_an_untrained_task_without_its_data_says_where_to_point_the_datasets(tmp_path):
    # MARLA has no licence: it never ships, so the datasets are needed
    with api_client(tmp_path / "empty") as client:
        detail = client.post("/v1/interference-trace/predict", json={"items": [{}]}).json()["detail"]
    assert (
        "preflight train interference-trace" in detail
        and "set PREFLIGHT_DATASETS to their folder" in detail
        and "Data" in detail
    )
    assert "marla" in detail


def test_a_registration_moves_only_the_measured_device_and_names_its_adaptation(client):
    """Answers for every other device stay bit-identical over HTTP; the adapted answers carry a label of
    the measurements they are adapted to, in the body and in a header."""
    others = [ITEM | {"device": d} for d in ("T4", "A100 80GB PCIe", "H200", "cpu")]
    p100 = {"m": 2048, "n": 2048, "k": 2048, "dtype": "fp32", "device": "NV_P100"}
    before = client.post("/v1/gemm/predict", json={"items": [p100, *others]})
    assert before.json()["model"]["adaptation"] is None and "X-Preflight-Adaptation" not in before.headers
    estimate = before.json()["predictions"][0]["runtime_ms"]["value"]
    measurements = [
        p100 | {"m": s, "n": s, "k": s, "runtime_ms": 1.5 * estimate * (s / 2048) ** 3}
        for s in (1024, 2048, 4096)
    ]
    registered = client.post("/v1/devices", json={"device": "NV_P100", "measurements": measurements})
    assert registered.status_code == 201, registered.json()
    after = client.post("/v1/gemm/predict", json={"items": [p100, *others]})
    assert after.json()["predictions"][1:] == before.json()["predictions"][1:]
    assert after.json()["predictions"][0]["runtime_ms"]["value"] > 1.2 * estimate
    label = after.json()["model"]["adaptation"]
    assert label and label.startswith("shots:3:") and after.headers["X-Preflight-Adaptation"] == label
