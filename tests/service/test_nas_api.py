"""The NAS tasks over HTTP: notation in, estimates with intervals out, and few-shot devices."""

import json

import numpy as np
import pytest

from tests.client import api_client
from tests.nas import nb201_archs

CELL = "|nor_conv_3x3~0|+|nor_conv_3x3~0|skip_connect~1|+|nor_conv_3x3~0|none~1|nor_conv_1x1~2|"
GRAPH = {
    "nodes": [{"op": "input"}, {"op": "conv", "kernel": 3}, {"op": "skip"}, {"op": "output"}],
    "edges": [[0, 1], [0, 2], [1, 3], [2, 3]],
}


@pytest.fixture
def client(home):
    with api_client(home) as test_client:
        yield test_client


def test_accuracy_from_native_notation_and_from_an_explicit_graph(client):
    items = [
        {"space": "nb201", "arch": CELL, "dataset": "cifar100"},
        {"space": "nb201", "arch": CELL, "dataset": "darcy"},
        {"space": "opgraph", "arch": GRAPH, "dataset": "cifar100"},
    ]
    response = client.post("/v1/nas-accuracy/predict", json={"items": items, "coverage": 0.8})
    assert response.status_code == 200, response.text
    cifar, darcy, graph = response.json()["predictions"]
    for estimate in (cifar, darcy):
        assert estimate["accuracy"]["low"] < estimate["accuracy"]["value"] < estimate["accuracy"]["high"]
    assert darcy["accuracy"]["value"] < cifar["accuracy"]["value"]  # the test data put darcy's score lower
    assert graph["ood"] and any("arch_space" in w for w in graph["warnings"])  # no explicit graph in training


def test_latency_and_energy_with_intervals_and_unseen_devices_flagged(client):
    items = [
        {
            "space": "nb201",
            "arch": CELL,
            "dataset": "cifar100",
            "device": "Raspberry Pi 5",
            "framework": "litert",
        },
        {"space": "nb201", "arch": CELL, "dataset": "cifar100", "device": "pixel3"},
    ]
    response = client.post("/v1/nas-latency/predict", json={"items": items})
    assert response.status_code == 200, response.text
    pi, phone = response.json()["predictions"]
    assert 0 < pi["latency_ms"]["low"] < pi["latency_ms"]["value"] < pi["latency_ms"]["high"]
    assert pi["energy_mj"]["value"] > 0 and not pi["ood"]
    assert phone["ood"] and any("qualcomm-snapdragon-845" in w for w in phone["warnings"])


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ({"space": "nb201", "arch": "|nor_conv_3x3~0|+|none~0|", "dataset": "cifar10"}, "3 cell nodes"),
        (
            {
                "space": "nb201",
                "arch": "|conv9x9~0|+|none~0|none~1|+|none~0|none~1|none~2|",
                "dataset": "cifar10",
            },
            "bad NAS-Bench-201 edge",
        ),
        ({"space": "fbnet", "arch": ["k3_e1"] * 21, "dataset": "imagenet"}, "22 layers"),
        (
            {
                "space": "nb101",
                "arch": {"adjacency": [[0, 1], [0, 0]], "ops": ["input"]},
                "dataset": "cifar10",
            },
            "adjacency must be",
        ),
        (
            {"space": "opgraph", "arch": {"nodes": [{"op": "conv"}], "edges": []}, "dataset": "cifar10"},
            "'input' node first",
        ),
    ],
)
def test_bad_notation_gets_422_saying_what_is_wrong(client, item, message):
    response = client.post("/v1/nas-accuracy/predict", json={"items": [item]})
    assert response.status_code == 422
    (error,) = response.json()["detail"]
    assert error["loc"] == ["body", "items", 0, "arch"] and message in error["msg"]


def test_unknown_space_and_device_are_refused(client):
    response = client.post(
        "/v1/nas-accuracy/predict", json={"items": [{"space": "darts", "arch": "x", "dataset": "c"}]}
    )
    assert response.status_code == 422 and response.json()["detail"][0]["loc"] == [
        "body",
        "items",
        0,
        "space",
    ]
    item = {"space": "nb201", "arch": CELL, "dataset": "cifar100", "device": "abacus 3000"}
    assert client.post("/v1/nas-latency/predict", json={"items": [item]}).status_code == 404


def test_an_unknown_device_in_a_batch_is_reported_by_its_items(client):
    good = {"space": "nb201", "arch": CELL, "dataset": "cifar100", "device": "pixel3"}
    items = [good, good | {"device": "abacus 3000"}, good, good | {"device": "abacus 3000"}]
    response = client.post("/v1/nas-latency/predict", json={"items": items})
    body = response.json()
    assert response.status_code == 404 and body["error"] == "UnknownDevice"
    assert body["items"] == [1, 3] and body["loc"] == ["body", "items", 1, "device"]
    assert "items 1, 3" in body["detail"]


def test_a_device_without_a_spec_sheet_is_learned_from_its_measurements(client):
    """An FPGA no catalogue lists: ten measured cells register it, and it then answers from those alone."""
    archs = nb201_archs(30, seed=6)
    pi = client.post(
        "/v1/nas-latency/predict",
        json={
            "items": [{"space": "nb201", "arch": a, "dataset": "cifar100", "device": "pixel3"} for a in archs]
        },
    ).json()["predictions"]
    fpga = [0.5 * p["latency_ms"]["value"] for p in pi]
    shots = [
        {"space": "nb201", "arch": a, "dataset": "cifar100", "latency_ms": v} for a, v in zip(archs, fpga)
    ]
    unknown = {"space": "nb201", "arch": archs[0], "dataset": "cifar100", "device": "lab-fpga"}
    assert client.post("/v1/nas-latency/predict", json={"items": [unknown]}).status_code == 404
    registered = client.post(
        "/v1/devices", json={"device": "lab-fpga", "task": "nas-latency", "measurements": shots[:10]}
    )
    assert registered.status_code == 201, registered.text
    assert registered.json()["spec"]["kind"] == "unknown" and registered.json()["measurements"] == {
        "nas-latency": 10
    }
    items = [unknown | {"arch": a} for a in archs[10:]]
    after = client.post("/v1/nas-latency/predict", json={"items": items}).json()["predictions"]
    error = np.median([abs(e["latency_ms"]["value"] / t - 1) for e, t in zip(after, fpga[10:])])
    assert error < 0.3
    refused = client.post(
        "/v1/devices",
        json={
            "device": "lab-tpu",
            "task": "gemm",
            "measurements": [{"m": 8, "n": 8, "k": 8, "runtime_ms": 1}],
        },
    )
    assert refused.status_code == 404  # GEMM needs a spec sheet: its roofline is the model's reference


def test_a_new_device_from_ten_measured_architectures(client):
    """A phone the model never saw runs the (synthetic) cells 4x slower than the Pi: ten shots adapt it."""
    archs = nb201_archs(30, seed=5)
    base = {"dataset": "cifar100", "device": "pixel3", "space": "nb201"}
    before = client.post(
        "/v1/nas-latency/predict", json={"items": [base | {"arch": a} for a in archs]}
    ).json()
    slow = [4 * p["latency_ms"]["value"] for p in before["predictions"]]
    shots = [
        {"space": "nb201", "arch": a, "dataset": "cifar100", "latency_ms": v}
        for a, v in zip(archs[:10], slow[:10])
    ]
    registered = client.post(
        "/v1/devices", json={"device": "pixel3", "task": "nas-latency", "measurements": shots}
    )
    assert registered.status_code == 201 and registered.json()["measurements"] == {"nas-latency": 10}
    after = client.post(
        "/v1/nas-latency/predict", json={"items": [base | {"arch": a} for a in archs[10:]]}
    ).json()
    error = np.median(
        [abs(e["latency_ms"]["value"] / t - 1) for e, t in zip(after["predictions"], slow[10:])]
    )
    assert error < 0.3  # 0.75 before the shots
    assert not any(
        w.startswith(("unseen:", "unmeasured:")) for e in after["predictions"] for w in e["warnings"]
    )


@pytest.mark.parametrize(
    "arch",
    [
        '{"nodes": ["input", "output"], "edges": []}',  # nodes that are not objects
        # a kernel of infinity
        '{"nodes": [{"op": "input"}, {"op": "conv", "kernel": 1e400}, {"op": "output"}], "edges": []}',
        '{"nodes": [{"op": "input"}, {"op": "output"}], "edges": [[0, 1e400]]}',
        json.dumps(
            {"nodes": [{"op": "input"}] + [{"op": "skip"}] * 300 + [{"op": "output"}], "edges": []}
        ),  # too large
    ],
)
def test_hostile_op_graphs_get_422_not_500(client, arch):
    # sent as text: 1e400 is JSON, but not to json=
    body = f'{{"items": [{{"space": "opgraph", "dataset": "c", "arch": {arch}}}]}}'
    response = client.post(
        "/v1/nas-accuracy/predict", content=body, headers={"content-type": "application/json"}
    )
    assert response.status_code == 422 and response.json()["detail"][0]["loc"] == ["body", "items", 0, "arch"]


def test_unknown_dataset_and_unmeasured_target_are_flagged(client):
    (unknown,) = client.post(
        "/v1/nas-accuracy/predict", json={"items": [{"space": "nb201", "arch": CELL, "dataset": "mnist"}]}
    ).json()["predictions"]
    assert unknown["ood"] and any("dataset=mnist" in w for w in unknown["warnings"])
    item = {
        "space": "nb201",
        "arch": CELL,
        "dataset": "cifar100",
        "device": "Raspberry Pi 5",
        "framework": "litert",
        "batch_size": 10**7,
    }
    assert client.post("/v1/nas-latency/predict", json={"items": [item]}).status_code == 422


def test_accuracy_measurements_are_refused_with_a_reason(client):
    shots = [{"space": "nb201", "arch": CELL, "dataset": "cifar100", "accuracy": 0.7}]
    response = client.post(
        "/v1/devices", json={"device": "pixel3", "task": "nas-accuracy", "measurements": shots}
    )
    assert response.status_code == 422 and response.json()["detail"][0]["loc"] == ["body", "task"]


def test_the_architectures_to_measure_on_a_new_device(client):
    """K distinct training cells of the space, the most informative first; a space without training
    architectures is a 422 naming the field."""
    response = client.post("/v1/nas-latency/reference-archs", json={"space": "nb201", "k": 5})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["space"] == "nb201" and len(body["archs"]) == len(set(body["archs"])) == 5
    assert (
        all(arch.startswith("|") for arch in body["archs"])
        and body["model"]["name"] == "preflight.nas-latency"
    )
    wrong = client.post("/v1/nas-latency/reference-archs", json={"space": "darts", "k": 5})
    assert wrong.status_code == 422 and wrong.json()["detail"][0]["loc"][-1] == "space"
    assert "nb201" in wrong.json()["detail"][0]["msg"]


def test_the_architectures_to_measure_by_get_are_the_posts(client):
    """``GET ?k=10`` (a read-only question, its fields as query parameters, the space NAS-Bench-201 by
    default) answers as the POST does; a bad parameter is a 422 under ``query``."""
    posted = client.post("/v1/nas-latency/reference-archs", json={"space": "nb201", "k": 4}).json()
    got = client.get("/v1/nas-latency/reference-archs?k=4")
    assert got.status_code == 200, got.text
    assert got.json() == posted
    for query, field in (("k=1.5", "k"), ("k=0", "k"), ("space=darts", "space")):
        bad = client.get(f"/v1/nas-latency/reference-archs?{query}")
        assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["query", field], bad.text
    parameters = client.get("/openapi.json").json()["paths"]["/v1/nas-latency/reference-archs"]["get"]
    assert {p["name"] for p in parameters["parameters"]} == {"space", "k"}
