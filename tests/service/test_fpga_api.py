"""FPGA designs over HTTP: predictions from a kernel's name or its graph, exploration ranked by
cycles within resource limits, and malformed graphs and pragmas refused with a clear 4xx."""

import numpy as np
import pytest

from tests.client import api_client
from tests.fpga import KERNELS, kernel_gexf, write_hlsyn

GEMM = kernel_gexf(*KERNELS["k-gemm"])
#: C source whose pragma names a placeholder the k-gemm graph does not have.
_LOOP_L9 = (
    "void k(int a[8]) {\n#pragma ACCEL PARALLEL FACTOR=auto{__PARA__L9}\n"
    "  for (int i = 0; i < 8; i++) a[i] = 0;\n}\n"
)
TARGETS = ("cycles", "lut", "ff", "dsp", "bram", "valid")


@pytest.fixture
def client(trained_home, tmp_path, monkeypatch):
    write_hlsyn(tmp_path / "datasets", designs_per_kernel=0)  # the kernels' graphs, found by name
    monkeypatch.setenv("PREFLIGHT_DATASETS", str(tmp_path / "datasets"))
    with api_client(trained_home) as test_client:
        yield test_client


@pytest.fixture
def own_client(home, tmp_path, monkeypatch):
    """A client on a private copy of the trained home: registrations stay in it."""
    write_hlsyn(tmp_path / "datasets", designs_per_kernel=0)
    monkeypatch.setenv("PREFLIGHT_DATASETS", str(tmp_path / "datasets"))
    with api_client(home) as test_client:
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
        ("explore", {"kernel": "k-gemm", "designs": [{}], "learn_share": 1.5}, 422, "learn_share"),
        ("explore", {"graph": "<gexf", "designs": [{}]}, 422, "GEXF"),
        ("explore", {"graph": GEMM, "code": _LOOP_L9, "designs": [{}]}, 422, "__PARA__L9"),
    ],
)
def test_bad_designs_are_refused_naming_the_problem(client, path, body, status, needle):
    response = client.post(f"/v1/fpga/{path}", json=body)
    assert response.status_code == status, response.text
    assert needle in response.text


def _predict(client, kernel: str, factors: list[int]) -> list[dict]:
    items = [{"kernel": kernel, "pragmas": {"__PARA__L1": f}} for f in factors]
    response = client.post("/v1/fpga/predict", json={"items": items})
    assert response.status_code == 200, response.text
    return response.json()["predictions"]


def test_synthesized_designs_adapt_their_kernel_only(own_client):
    client = own_client
    factors = [1, 2, 4, 8, 16]
    gemm_before, mvt_before = _predict(client, "k-gemm", factors), _predict(client, "k-mvt", factors)
    assert all("unseen:kernel=k-mvt" not in p["warnings"] for p in mvt_before)  # a training kernel
    truth = [4_000_000 / f for f in factors]  # far slower than the model thinks
    designs = [
        {
            "pragmas": {"__PARA__L1": f},
            "valid": 1,
            "cycles": c,
            "lut": 0.1,
            "ff": 0.05,
            "dsp": 0.02,
            "bram": 0.01,
        }
        for f, c in zip(factors, truth)
    ] + [{"pragmas": {"__PARA__L0": 64, "__PARA__L1": 64}, "valid": 0}]
    response = client.post("/v1/fpga/kernels/k-mvt/designs", json={"designs": designs})
    assert response.status_code == 201, response.text
    assert response.json() == {"task": "fpga", "subject": "k-mvt", "measurements": 6}
    assert client.get("/v1/fpga/kernels/k-mvt/designs").json()["measurements"] == 6
    gemm_after, mvt_after = _predict(client, "k-gemm", factors), _predict(client, "k-mvt", factors)
    assert gemm_after == gemm_before  # bit for bit
    for before, after, c in zip(mvt_before, mvt_after, truth):
        assert abs(np.log(after["cycles"]["value"] / c)) < abs(np.log(before["cycles"]["value"] / c))
        assert "adapted:5" in after["warnings"] or "adapted:6" in after["warnings"]
    assert client.delete("/v1/fpga/kernels/k-mvt/designs", headers={"X-API-Key": "x" * 16}).status_code == 401
    removed = client.delete("/v1/fpga/kernels/k-mvt/designs")
    assert removed.status_code == 200 and removed.json()["measurements"] == 0, removed.text
    assert _predict(client, "k-mvt", factors) == mvt_before  # the unadapted answers again, bit for bit
    assert _predict(client, "k-gemm", factors) == gemm_before


def test_explore_names_the_next_designs_to_synthesize(client):
    designs = [{"__PARA__L1": f, "__PARA__L0": g} for f in (1, 2, 4, 8, 16) for g in (1, 4, 16)]
    synthesized = [
        {"pragmas": designs[0], "valid": 1, "cycles": 50_000, "lut": 0.1, "ff": 0.1, "dsp": 0.1, "bram": 0.1}
    ]
    body = {"kernel": "k-mvt", "designs": designs, "batch": 4, "synthesized": synthesized}
    response = client.post("/v1/fpga/explore", json=body)
    assert response.status_code == 200, response.text
    result = response.json()
    assert len(result["next"]) == 4 == len(set(result["next"])) and 0 not in result["next"]
    assert result["measured"] == 1 and result["model"]["adaptation"].startswith("shots:1:")
    assert response.headers["X-Preflight-Adaptation"] == result["model"]["adaptation"]
    plain = client.post("/v1/fpga/explore", json={"kernel": "k-mvt", "designs": designs}).json()
    assert plain["next"] == [] and plain["measured"] == 0


def test_the_learning_share_picks_where_validity_is_least_certain(client):
    designs = [{"__PARA__L1": f, "__PARA__L0": g} for f in (1, 2, 4, 8, 16) for g in (1, 4, 16)]
    body = {"kernel": "k-mvt", "designs": designs, "batch": 1}
    answers = {
        share: client.post("/v1/fpga/explore", json=body | {"learn_share": share}).json()
        for share in (0.0, 1.0)
    }
    p_valid = {d["index"]: d["valid"]["value"] for d in answers[1.0]["designs"]}
    least_certain = min(p_valid, key=lambda i: abs(p_valid[i] - 0.5))
    assert answers[1.0]["next"] == [least_certain]
    assert answers[0.0]["next"] != [least_certain]  # improvement alone picks a fast, likely valid one


@pytest.mark.parametrize(
    ("design", "field"),
    [
        ({"pragmas": {"__PARA__L1": 2}, "valid": 2}, "valid"),
        ({"pragmas": {"__PARA__L1": 2}, "valid": 1, "lut": 1.5}, "lut"),
        ({"pragmas": {"__PARA__L9": 2}, "valid": 1}, "pragmas"),
    ],
)
def test_a_bad_synthesized_design_is_refused_naming_its_field(own_client, design, field):
    client = own_client
    response = client.post(
        "/v1/fpga/kernels/k-mvt/designs", json={"designs": [{"pragmas": {}, "valid": 1}, design]}
    )
    assert response.status_code == 422, response.text
    assert any(e["loc"][:3] == ["body", "designs", 1] and field in str(e) for e in response.json()["detail"])
    assert client.get("/v1/fpga/kernels/k-mvt/designs").json()["measurements"] == 0  # nothing registered


def test_a_kernel_never_seen_is_flagged_with_its_zero_shot_quality(client):
    response = client.post(
        "/v1/fpga/predict", json={"items": [{"graph": GEMM, "pragmas": {"__PARA__L2": 8}}]}
    )
    prediction = response.json()["predictions"][0]
    unseen = next(w for w in prediction["warnings"] if w.startswith("unseen:kernel=graph:"))
    explained = client.post("/v1/ood-reasons/explain", json={"task": "fpga", "warnings": [unseen]})
    text = explained.json()[0]["text"]
    assert "zero-shot" in text and "valid ROC AUC" in text and "cycles median APE" in text, text
