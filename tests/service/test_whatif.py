"""``POST /v1/whatif`` over real HTTP: one workload on candidate devices, ranked."""

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tests.client import api_client

ROOT = Path(__file__).resolve().parents[2]
#: The workload file of the README's ``preflight whatif --workload`` example.
WORKLOAD_FILE = "docs/whatif-workload.json"

ITEMS = [
    {"m": 4096, "n": 4096, "k": 4096, "dtype": "fp16"},
    {"m": 1024, "n": 512, "k": 2048, "dtype": "fp32", "trans_a": True},
    {"m": 64, "n": 64, "k": 64},
]
WORKLOAD = {"task": "gemm", "items": ITEMS}
DEVICES = ["p100", "Tesla V100-SXM2-16GB", "NVIDIA GeForce RTX 4070", "nvidia-h100-sxm5-80gb"]


@pytest.fixture(scope="module")
def client(trained_home):
    """Champions of every task, read only."""
    with api_client(trained_home) as test_client:
        yield test_client


def whatif(client: TestClient, **body):
    return client.post("/v1/whatif", json={"workload": WORKLOAD} | body)


def summed(client: TestClient, device: str, target: str, coverage: float = 0.9) -> dict[str, float]:
    """The items predicted through ``/v1/gemm/predict`` on one device, summed."""
    items = [item | {"device": device} for item in ITEMS]
    body = {"items": items, "coverage": coverage}
    predictions = client.post("/v1/gemm/predict", json=body).json()["predictions"]
    return {key: sum(p[target][key] for p in predictions) for key in ("value", "low", "high")}


def test_every_gpu_ranked_by_time_with_comonotone_intervals(client, catalogue):
    response = whatif(client)
    assert response.status_code == 200, response.json()
    body = response.json()
    devices = body["devices"]
    assert body["task"] == "gemm" and body["items"] == 3 and body["time_target"] == "runtime_ms"
    assert len(devices) >= 3 and body["model"]["name"] == "preflight.gemm"
    times = [d["time_ms"]["value"] for d in devices]
    assert times == sorted(times) and [d["rank"]["time"] for d in devices] == list(range(1, len(devices) + 1))
    gpus = {s.id for s in catalogue if s.kind in ("gpu", "accelerator")}
    assert {d["device"] for d in devices} | {s["device"] for s in body["skipped"]} == gpus
    fastest = devices[0]
    assert fastest["time_ms"] == pytest.approx(summed(client, fastest["device"], "runtime_ms"))
    assert fastest["runs_per_s"] == pytest.approx(1e3 / fastest["time_ms"]["value"])
    assert fastest["ood"] is True and len(fastest["warnings"]) == len(set(fastest["warnings"]))


def test_energy_and_cost_per_run_with_their_ranks(client):
    response = whatif(client, devices=DEVICES, prices={"H100 SXM5": 3.5, "p100": 0.5}, coverage=0.8)
    assert response.status_code == 200, response.json()
    body = response.json()
    devices = {d["device"]: d for d in body["devices"]}
    assert len(devices) == 4 and body["energy_target"] == "energy_j" and not body["skipped"]
    h100 = devices["nvidia-h100-sxm5-80gb"]
    assert h100["energy_estimated"] is True
    assert h100["energy_j"] == pytest.approx(summed(client, "nvidia-h100-sxm5-80gb", "energy_j", 0.8))
    assert h100["price_usd_per_hour"] == 3.5
    usd_per_ms = 3.5 / 1e3 / 3600 * 1e6
    assert h100["cost_per_million_runs_usd"] == pytest.approx(
        {k: usd_per_ms * v for k, v in h100["time_ms"].items()}
    )
    p100 = devices["nvidia-tesla-p100-pcie-16gb"]
    assert sorted([h100["rank"]["cost"], p100["rank"]["cost"]]) == [1, 2]
    assert {d["rank"]["cost"] for d in devices.values()} == {1, 2, None}
    assert sorted(d["rank"]["energy"] for d in devices.values()) == [1, 2, 3, 4]


def test_a_device_without_a_tdp_has_no_energy_and_one_without_peaks_is_skipped(home):
    no_tdp = {"id": "lab-gpu", "name": "Lab GPU", "kind": "gpu", "compute_units": 80}
    no_tdp |= {"memory_bandwidth_gbs": 900, "peak_tflops": {"fp32": 15, "fp16": 120}}
    no_peaks = {"id": "lab-npu", "name": "Lab NPU", "kind": "accelerator", "tdp_w": 75}
    with api_client(home) as client:
        for spec in (no_tdp, no_peaks):
            assert client.post("/v1/devices", json={"spec": spec}).status_code == 201
        body = whatif(client, devices=["Lab GPU", "Lab NPU", "p100"]).json()
        alone = whatif(client, devices=["Lab NPU"])
    lab = body["devices"][[d["device"] for d in body["devices"]].index("lab-gpu")]
    assert lab["energy_j"] is None and lab["energy_estimated"] is False and lab["rank"]["energy"] is None
    assert any(w.startswith("energy not estimated") for w in lab["warnings"])
    assert [s["device"] for s in body["skipped"]] == ["lab-npu"] and "peak_tflops" in body["skipped"][0][
        "reason"
    ]
    assert alone.status_code == 422 and "no candidate device could be estimated" in alone.json()["detail"]


def test_unknown_device_gets_404_with_close_matches(client):
    response = whatif(client, devices=["rtx 4070 tii"])
    assert response.status_code == 404 and "NVIDIA GeForce RTX 4070" in response.json()["close_matches"]


@pytest.mark.parametrize(
    ("body", "loc"),
    [
        ({"workload": {"task": "gemm", "items": []}}, ["body", "workload", "items"]),
        ({"prices": {"p100": -1.0}}, ["body", "prices", "p100"]),
        ({"devices": []}, ["body", "devices", "list[constrained-str]"]),
        ({"coverage": 1.5}, ["body", "coverage"]),
    ],
)
def test_bad_requests_get_422_naming_the_field(client, body, loc):
    response = client.post("/v1/whatif", json={"workload": WORKLOAD} | body)
    assert response.status_code == 422 and loc in [e["loc"] for e in response.json()["detail"]]


def test_the_cli_workload_file_is_a_whole_request(client):
    """The README's file, posted byte for byte, answers as it does wrapped as ``workload``."""
    assert f"preflight whatif --workload {WORKLOAD_FILE}" in (ROOT / "README.md").read_text()
    document = (ROOT / WORKLOAD_FILE).read_bytes()
    bare = client.post("/v1/whatif", content=document, headers={"content-type": "application/json"})
    wrapped = client.post("/v1/whatif", json={"workload": json.loads(document)})
    assert bare.status_code == 200, bare.json()
    assert bare.json() == wrapped.json() and bare.json()["items"] == 4
    options = {"devices": DEVICES[:2], "prices": {"p100": 0.5}, "coverage": 0.8}
    beside = client.post("/v1/whatif", json=json.loads(document) | options)
    inside = client.post("/v1/whatif", json={"workload": json.loads(document)} | options)
    assert beside.status_code == 200 and beside.json() == inside.json()


@pytest.mark.parametrize(
    ("body", "loc", "kind"),
    [
        ({"workload": WORKLOAD, "task": "gemm"}, ["body", "task"], "workload_twice"),
        ({"workload": WORKLOAD, "items": ITEMS}, ["body", "items"], "workload_twice"),
        ({"task": "gemm"}, ["body", "items"], "missing"),
        ({"devices": "all"}, ["body", "task"], "missing"),
        ({"task": "gemm", "items": []}, ["body", "items"], "too_short"),
    ],
)
def test_a_workload_given_twice_or_half_gets_422_naming_the_field(client, body, loc, kind):
    response = client.post("/v1/whatif", json=body)
    assert response.status_code == 422
    assert [(e["loc"], e["type"]) for e in response.json()["detail"]] == [(loc, kind)]


def test_invalid_item_gets_422_naming_its_index_and_field(client):
    items = [ITEMS[0], {"m": 64, "n": 64, "k": -1}]
    response = client.post("/v1/whatif", json={"workload": {"task": "gemm", "items": items}})
    assert response.status_code == 422 and response.json()["detail"].startswith("workload: items[1].k: ")
    with_device = client.post(
        "/v1/whatif", json={"workload": {"task": "gemm", "items": [ITEMS[0] | {"device": "p100"}]}}
    )
    assert with_device.status_code == 422 and "items[0].device" in with_device.json()["detail"]


def test_a_price_for_a_device_not_compared_is_refused_by_name(client):
    response = whatif(client, devices=DEVICES[:2], prices={"NVIDIA GeForce RTX 4070": 1.0})
    assert response.status_code == 400 and "nvidia-geforce-rtx-4070" in response.json()["detail"]


def test_a_task_without_devices_gets_400_and_an_unknown_task_404(client):
    response = client.post(
        "/v1/whatif", json={"workload": {"task": "nas-accuracy", "items": [{"arch": "x"}]}}
    )
    assert response.status_code == 400 and "does not run on a device" in response.json()["detail"]
    assert "gemm" in response.json()["detail"]
    unknown = client.post("/v1/whatif", json={"workload": {"task": "fpga-magic", "items": ITEMS}})
    assert unknown.status_code == 404 and "gemm" in unknown.json()["known"]


def test_a_what_if_past_the_estimate_budget_is_refused_before_any_work(client):
    workload = {"task": "gemm", "items": [ITEMS[0]] * 10_000}
    answer = client.post("/v1/whatif", json={"workload": workload, "devices": "all"})
    assert answer.status_code == 422
    assert "units of work (44 devices each), more than the 100,000" in answer.json()["detail"]
