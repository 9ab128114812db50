"""Interference over HTTP: pre-flight slowdowns, host placement, black-box windows, and bad input."""

import pytest
from preflight.data.interference import TRACE_CHANNELS

from tests.client import api_client

NGINX = {"workload": "nginx", "load_rps": 2000, "replicas": 1, "solo": {"p99_ms": 0.15, "ipc": 0.9}}


@pytest.fixture
def client(trained_home):
    with api_client(trained_home) as test_client:
        yield test_client


def _window(steps: int = 6, channels: int = len(TRACE_CHANNELS), value: float = 0.5) -> list[list[float]]:
    return [[value] * channels for _ in range(steps)]


def test_more_cpu_neighbours_never_predict_less_slowdown(client):
    items = [NGINX | {"neighbours": {"cpu": n}} for n in (1, 2, 4)]
    response = client.post("/v1/interference/predict", json={"items": items})
    assert response.status_code == 200, response.text
    values = [p["norm_perf"]["value"] for p in response.json()["predictions"]]
    assert values[0] >= values[1] >= values[2] and values[0] > values[2]
    for p in response.json()["predictions"]:
        assert p["norm_perf"]["low"] <= p["norm_perf"]["value"] <= p["norm_perf"]["high"]


def test_a_workload_with_no_neighbours_runs_as_it_does_alone_exactly(client):
    items = [NGINX, NGINX | {"neighbours": {}}, NGINX | {"neighbours": {"cpu": 0}}, {"workload": "nginx"}]
    response = client.post(
        "/v1/interference/predict", json={"items": items + [NGINX | {"neighbours": {"cpu": 1}}]}
    )
    assert response.status_code == 200, response.text
    *alone, crowded = response.json()["predictions"]
    for p in alone:
        assert p["norm_perf"] == {"value": 1.0, "low": 1.0, "high": 1.0}, p
        assert "exact:norm_perf" in p["warnings"], p
    assert crowded["norm_perf"]["value"] < 1.0 and "exact:norm_perf" not in crowded["warnings"]


def test_place_ranks_the_quiet_host_first(client):
    hosts = [
        {"name": "busy", "residents": {"cpu": 2, "l3": 2}},
        {"name": "quiet", "residents": {"membw": 1}},
        {"name": "middle", "residents": {"cpu": 1}},
    ]
    response = client.post("/v1/interference/place", json={"workload": NGINX, "hosts": hosts})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["best"] == "quiet" and [h["rank"] for h in body["hosts"]] == [1, 2, 3]
    assert body["hosts"][-1]["host"] == "busy"
    values = [h["norm_perf"]["value"] for h in body["hosts"]]
    assert values == sorted(values, reverse=True)
    assert not any("host" in w for h in body["hosts"] for w in h["warnings"])  # named, not a model input


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"workload": NGINX, "hosts": []}, "hosts"),
        ({"workload": NGINX, "hosts": [{"name": "a", "residents": {"gpu_miner": 1}}]}, "gpu_miner"),
        ({"workload": NGINX, "hosts": [{"name": "a", "residents": {"cpu": -1}}]}, "cpu"),
        ({"workload": NGINX, "hosts": [{"name": "a"}, {"name": "a"}]}, "distinct"),
        ({"workload": NGINX | {"neighbours": {"cpu": 1}}, "hosts": [{"name": "a"}]}, "residents"),
        ({"workload": NGINX | {"host": "b"}, "hosts": [{"name": "a"}]}, "workload.host"),
        ({"workload": NGINX | {"solo": {"latency": 1}}, "hosts": [{"name": "a"}]}, "latency"),
    ],
)
def test_bad_placement_requests_get_a_422_naming_the_problem(client, body, field):
    response = client.post("/v1/interference/place", json=body)
    assert response.status_code == 422, response.text
    assert field in response.text


def test_a_trace_window_gives_the_current_slowdown(client):
    response = client.post("/v1/interference-trace/predict", json={"items": [{"window": _window()}]})
    assert response.status_code == 200, response.text
    estimate = response.json()["predictions"][0]["norm_perf"]
    assert 0 < estimate["low"] <= estimate["value"] <= estimate["high"]


@pytest.mark.parametrize(
    ("window", "message"),
    [
        (_window(channels=len(TRACE_CHANNELS) - 1), f"a window needs {len(TRACE_CHANNELS)}"),
        ([[float("nan")] * len(TRACE_CHANNELS)] * 3, "NaN"),
        (_window(steps=1), "at least 2"),
    ],
)
def test_bad_windows_get_a_422(client, window, message):
    payload = '{"items": [{"window": ' + str(window).replace("nan", "NaN") + "}]}"
    response = client.post(
        "/v1/interference-trace/predict", content=payload, headers={"content-type": "application/json"}
    )
    assert response.status_code == 422, response.text
    assert message in response.text and "window" in response.text
