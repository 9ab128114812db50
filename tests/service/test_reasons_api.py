"""Warnings as codes: predictions carry short codes, ``GET /v1/ood-reasons`` documents every kind a
prediction emits, and ``POST /v1/ood-reasons/explain`` spells them out against the task's model."""

import shutil

import pytest
from fastapi.testclient import TestClient
from preflight.data.settings import Settings
from preflight.service.app import create_app

KEY = "reasons-test-key"
OUTSIDE = [
    {"m": 65536, "n": 3, "k": 16384, "dtype": "fp64", "device": "NVIDIA H100 PCIe"},
    {"m": 512, "n": 512, "k": 512, "device": "NV_P100", "kernel": {"block_m": 128, "block_n": 64}},
    {"m": 512, "n": 512, "k": 512, "device": "amd-epyc-1-threads"},  # no TDP: no power estimate
]


@pytest.fixture(scope="module")
def client(trained_home, tmp_path_factory):
    home = tmp_path_factory.mktemp("reasons") / "home"
    shutil.copytree(trained_home, home)
    with TestClient(create_app(Settings(home=home, api_keys=[KEY])), headers={"X-API-Key": KEY}) as c:
        yield c


@pytest.fixture(scope="module")
def warnings(client) -> list[str]:
    response = client.post("/v1/gemm/predict", json={"items": OUTSIDE})
    assert response.status_code == 200, response.text
    return [w for prediction in response.json()["predictions"] for w in prediction["warnings"]]


def is_code(warning: str) -> bool:
    """``kind:subject`` with a one-word kind (a task's note is free text)."""
    kind, colon, _ = warning.partition(":")
    return bool(colon) and kind.isalpha()


def test_every_code_a_prediction_emits_is_documented(client, warnings):
    listed = client.get("/v1/ood-reasons")
    assert listed.status_code == 200
    kinds = {entry["kind"]: entry["meaning"] for entry in listed.json()}
    emitted = {w.partition(":")[0] for w in warnings if is_code(w)}
    assert emitted >= {"unseen", "range", "absent", "missing"} and emitted <= set(kinds)
    assert all(meaning.startswith(f"{kind}:") for kind, meaning in kinds.items())


def test_codes_are_short(warnings):
    assert max(len(w) for w in warnings if is_code(w)) < 60


def test_explain_spells_codes_out_with_the_training_ranges(client, warnings):
    response = client.post("/v1/ood-reasons/explain", json={"task": "gemm", "warnings": warnings})
    assert response.status_code == 200, response.text
    texts = {e["warning"]: e["text"] for e in response.json()}
    assert set(texts) == set(warnings)
    assert texts["unseen:device_id=nvidia-h100-pcie-80gb"] == (
        "device_id=nvidia-h100-pcie-80gb has no measurements in the training data"
    )
    assert texts["range:m_log2"].startswith("m_log2 outside the training range [")
    assert texts["absent:kernel_block_m"] == "kernel_block_m never present in the training data"
    assert texts["missing:power_w"].startswith("no power_w estimate")
    assert texts["prior:power_w"].startswith("power_w: the estimate comes from a physical prior")
    notes = [w for w in warnings if not is_code(w)]
    assert all(texts[w] == w for w in notes)  # a note is its own text


def test_explain_names_an_unknown_task(client):
    response = client.post("/v1/ood-reasons/explain", json={"task": "tea", "warnings": ["range:m_log2"]})
    assert response.status_code == 404 and "gemm" in response.json()["detail"]
