"""``POST /v1/nas/early-stop`` over HTTP: decisions, probabilities, and degenerate curves."""

import json

import pytest
from preflight.models.core.task import get_action

from tests.client import api_client
from tests.nas import nb201_archs

CELL = nb201_archs(1, seed=0)[0]


@pytest.fixture(scope="module")
def client(trained_home):
    with api_client(trained_home) as test_client:
        yield test_client


def ask(client, curve, incumbent=0.8, **extra):
    body = {
        "space": "nb201",
        "arch": CELL,
        "dataset": "digits",
        "curve": curve,
        "budget": 8,
        "learning_rate": 0.01,
        "incumbent": incumbent,
    } | extra
    # json.dumps writes NaN as the literal a careless client sends (httpx would refuse to)
    return client.post(
        "/v1/nas/early-stop", content=json.dumps(body), headers={"content-type": "application/json"}
    )


def test_a_run_far_below_the_incumbent_is_stopped_and_a_promising_one_continues(client):
    low = ask(client, [0.1, 0.1, 0.1, 0.1, 0.1], incumbent=0.9).json()
    assert low["decision"] == "stop" and low["p_beat_incumbent"] < 0.05
    high = ask(client, [0.5, 0.7, 0.8, 0.85], incumbent=0.6).json()
    assert high["decision"] == "continue" and high["p_beat_incumbent"] > 0.5
    estimate = high["final_accuracy"]
    assert (
        estimate["low"] < estimate["value"] < estimate["high"]
        and "P(final accuracy > incumbent)" in high["rule"]
    )


def test_the_risk_level_moves_the_decision(client):
    curve = [0.3, 0.45, 0.55]
    p = ask(client, curve).json()["p_beat_incumbent"]
    assert ask(client, curve, risk=min(0.99, p + 0.01)).json()["decision"] == "stop"
    assert ask(client, curve, risk=max(0.001, p - 0.01)).json()["decision"] == "continue"


def test_probability_falls_as_the_incumbent_rises(client):
    curve = [0.3, 0.5, 0.6]
    p = [ask(client, curve, incumbent=i).json()["p_beat_incumbent"] for i in (0.3, 0.6, 0.9)]
    assert p[0] >= p[1] >= p[2] and p[0] > p[2]


def test_one_point_and_constant_curves_get_an_answer(client):
    for curve in ([0.4], [0.5] * 5):
        response = ask(client, curve)
        assert response.status_code == 200, response.text
        assert 0 <= response.json()["p_beat_incumbent"] <= 1


def test_a_finished_run_stops_with_its_last_value(client):
    body = ask(client, [0.5, 0.6, 0.7, 0.75, 0.8, 0.82, 0.84, 0.85], incumbent=0.8).json()
    assert body["decision"] == "stop" and body["final_accuracy"] == {"value": 0.85, "low": 0.85, "high": 0.85}
    assert body["p_beat_incumbent"] == 1.0 and "budget" in body["reason"]


def test_without_an_incumbent_the_run_continues(client):
    body = ask(client, [0.2, 0.3], incumbent=None).json()
    assert body["decision"] == "continue" and body["p_beat_incumbent"] is None


def test_an_unseen_dataset_is_flagged(client):
    body = ask(client, [0.2, 0.3, 0.4], dataset="imagenet").json()
    assert body["ood"] and body["warnings"]


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        ({"curve": [0.2, float("nan")]}, ["body", "curve", 1], "finite"),
        ({"curve": [0.2, 1.5]}, ["body", "curve", 1], "less than or equal to 1"),
        ({"curve": []}, ["body", "curve"], "at least 1"),
        ({"curve": [0.1] * 9}, ["body"], "past the budget of 8 epochs"),
        ({"curve": [0.1, 0.2], "epochs": [2, 2]}, ["body"], "increase strictly"),
        ({"curve": [0.1, 0.2], "epochs": [1]}, ["body"], "1 entries for 2 curve points"),
        ({"curve": [0.1, 0.2], "epochs": []}, ["body", "epochs"], "at least 1"),
        ({"incumbent": 1.2}, ["body", "incumbent"], "less than or equal to 1"),
        ({"risk": 0}, ["body", "risk"], "greater than 0"),
        ({"budget": 0}, ["body", "budget"], "greater than or equal to 1"),
        ({"arch": "|nor_conv_3x3~0|"}, ["body", "arch"], "3 cell nodes"),
    ],
)
def test_degenerate_and_bad_curves_get_422_naming_the_field(client, change, field, message):
    response = ask(client, [0.2, 0.3], **change) if "curve" not in change else ask(client, **change)
    assert response.status_code == 422, response.text
    errors = response.json()["detail"]
    assert any(e["loc"] == field and message in e["msg"] for e in errors), errors


def test_final_accuracy_is_also_served_as_a_task(client):
    item = {"space": "nb201", "arch": CELL, "dataset": "digits", "curve": [0.3, 0.5, 0.6], "budget": 8}
    response = client.post("/v1/nas-curve/predict", json={"items": [item]})
    assert response.status_code == 200, response.text
    estimate = response.json()["predictions"][0]["accuracy"]
    assert estimate["low"] <= estimate["value"] <= estimate["high"]


def test_a_tie_with_the_incumbent_does_not_beat_it(client):
    curve = [0.3, 0.5, 0.6]
    anywhere = ask(client, curve, incumbent=0.7).json()["p_beat_incumbent"]
    on_a_lattice = ask(client, curve, incumbent=0.7, valid_size=10).json()["p_beat_incumbent"]
    assert on_a_lattice < anywhere  # accuracy moves in steps of 0.1: ending at 0.7 is a tie, not a win
    finished = ask(client, [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8], incumbent=0.8).json()
    assert finished["p_beat_incumbent"] == 0.0 and finished["decision"] == "stop"


def test_a_learner_without_an_architecture_gets_an_answer_flagged_unseen(client):
    body = get_action("early-stop")[1].examples["learner"]["value"]  # the route's own example
    response = client.post("/v1/nas/early-stop", json=body)
    assert response.status_code == 200, response.text
    assert response.json()["ood"]  # the test model was trained on architectures only
    half = client.post("/v1/nas/early-stop", json=body | {"space": "nb201"})
    assert half.status_code == 422 and "space and arch go together" in half.text


def test_nothing_beats_a_perfect_incumbent_and_no_estimate_exceeds_one(client):
    body = ask(client, [0.97, 0.98, 0.99], incumbent=1.0).json()
    assert body["p_beat_incumbent"] == 0.0 and body["decision"] == "stop"
    saturated = ask(client, [1.0, 1.0, 1.0], incumbent=0.5).json()["final_accuracy"]
    assert saturated["value"] <= 1.0 and saturated["high"] <= 1.0
