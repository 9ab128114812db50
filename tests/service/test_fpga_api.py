"""FPGA designs over HTTP: predictions from a kernel's name or its graph, exploration ranked by
cycles within resource limits, and malformed graphs and pragmas refused with a clear 4xx."""

import pytest

from tests.client import api_client
from tests.fpga import KERNELS, kernel_gexf, write_hlsyn

GEMM = kernel_gexf(*KERNELS["k-gemm"])
TARGETS = ("cycles", "lut", "ff", "dsp", "bram", "valid")


@pytest.fixture
def client(trained_home, tmp_path, monkeypatch):
    write_hlsyn(tmp_path / "datasets", designs_per_kernel=0)  # the kernels' graphs, found by name
    monkeypatch.setenv("PREFLIGHT_DATASETS", str(tmp_path / "datasets"))
    with api_client(trained_home) as test_client:
        yield test_client


def test_a_known_kernel_by_name_and_a_new_graph_are_both_predicted(client):
    items = [
        {"kernel": "k-gemm", "pragmas": {"__PARA__L2": 8}},
        {"graph": GEMM, "pragmas": {"__PARA__L2": 8}},
    ]
    response = client.post("/v1/fpga/predict", json={"items": items})
    assert response.status_code == 200, response.text
    named, unnamed = response.json()["predictions"]
    for prediction in (named, unnamed):
        assert set(TARGETS) <= set(prediction)
        for target in TARGETS:
            estimate = prediction[target]
            assert estimate["low"] <= estimate["value"] <= estimate["high"]
        assert 0 <= prediction["valid"]["value"] <= 1
    assert named["cycles"]["value"] == unnamed["cycles"]["value"]  # the same graph, the same design
    assert not named["ood"] and unnamed["ood"]  # a graph of its own is a kernel never seen
    assert any(w.startswith("unseen:kernel=graph:") for w in unnamed["warnings"])


def test_more_unrolling_predicts_fewer_cycles(client):
    items = [{"kernel": "k-mvt", "pragmas": {"__PARA__L1": f}} for f in (1, 16)]
    response = client.post("/v1/fpga/predict", json={"items": items})
    assert response.status_code == 200, response.text
    slow, fast = (p["cycles"]["value"] for p in response.json()["predictions"])
    assert fast < slow


def test_explore_ranks_feasible_settings_by_cycles(client):
    designs = [{"__PARA__L1": f, "__PARA__L0": g} for f in (1, 4, 16) for g in (1, 16)]
    body = {"kernel": "k-mvt", "designs": designs, "limits": {"lut": 0.6}}
    response = client.post("/v1/fpga/explore", json=body)
    assert response.status_code == 200, response.text
    result = response.json()
    explored = result["designs"]
    assert sorted(d["index"] for d in explored) == list(range(len(designs)))
    feasible = [d for d in explored if d["feasible"]]
    assert feasible and result["best"] == feasible[0]["index"]
    assert [d["rank"] for d in feasible] == list(range(1, len(feasible) + 1))
    cycles = [d["cycles"]["value"] for d in feasible]
    assert cycles == sorted(cycles)
    p_valid = sorted(d["valid"]["value"] for d in explored)
    for d in explored:  # among the most likely valid half, within the LUT limit
        likely = sum(p <= d["valid"]["value"] for p in p_valid) > len(designs) / 2
        fits = likely and d["resources"]["lut"]["value"] <= 0.6
        assert d["feasible"] == fits and (d["rank"] is None) != fits
    assert explored[: len(feasible)] == feasible  # the feasible first
    strict = client.post("/v1/fpga/explore", json=body | {"min_valid_probability": 0.99}).json()
    assert all(d["valid"]["value"] >= 0.99 for d in strict["designs"] if d["feasible"])


@pytest.mark.parametrize(
    ("path", "body", "status", "needle"),
    [
        ("predict", {"items": [{"kernel": "k-gemm", "pragmas": {"__PARA__L7": 2}}]}, 422, "__PARA__L7"),
        (
            "predict",
            {"items": [{"kernel": "k-gemm", "pragmas": {"__PIPE__L0": "fast"}}]},
            422,
            "pipeline mode",
        ),
        ("predict", {"items": [{"kernel": "nope"}]}, 422, "k-atax"),
        ("predict", {"items": [{"graph": "<gexf><graph>"}]}, 422, "GEXF"),
        ("predict", {"items": [{"graph": {"nodes": []}}]}, 422, "no nodes"),
        ("predict", {"items": [{"graph": "/etc/hosts"}]}, 422, "GEXF text"),
        ("predict", {"items": [{"kernel": "k-gemm", "tool": "v23"}]}, 422, "tool"),
        ("predict", {"items": [{"kernel": "k-gemm", "device": "Tesla T4"}]}, 422, "FPGA"),
        ("predict", {"items": [{"kernel": "k-gemm", "device": "stratix-99"}]}, 404, "stratix-99"),
        ("explore", {"kernel": "k-gemm", "designs": [{}, {"__TILE__L2": 2}]}, 422, "designs[1]"),
        ("explore", {"kernel": "k-gemm", "designs": []}, 422, "designs"),
        ("explore", {"kernel": "k-gemm", "designs": [{}], "limits": {"dsp": 1.5}}, 422, "dsp"),
        ("explore", {"graph": "<gexf", "designs": [{}]}, 422, "GEXF"),
    ],
)
def test_bad_designs_are_refused_naming_the_problem(client, path, body, status, needle):
    response = client.post(f"/v1/fpga/{path}", json=body)
    assert response.status_code == status, response.text
    assert needle in response.text
