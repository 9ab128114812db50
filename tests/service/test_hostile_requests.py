"""Small hostile requests: each is refused by a cost check or a bound before any work, answers a 4xx
(never a 500), and work whose client has gone stops."""

import asyncio
import itertools
import json
import random
import time

import numpy as np
import pytest
from preflight.data import arch
from preflight.data.catalogue import Catalogue, normalise
from preflight.data.errors import Cancelled
from preflight.features import arch as arch_features
from preflight.models.core import budget
from preflight.models.core.task import all_tasks, get_task
from preflight.models.tools import whatif
from preflight.service.batching import Batcher
from preflight.service.routing import lone_surrogate

from tests.client import api_client

SWITCH = {
    "model_type": "switch_transformers",
    "d_model": 64,
    "d_kv": 16,
    "d_ff": 128,
    "num_heads": 4,
    "vocab_size": 100,
    "num_experts": 4,
}


@pytest.fixture(scope="module")
def client(trained_home):
    with api_client(trained_home) as test_client:
        yield test_client


def post_routes(client) -> list[str]:
    paths = client.app.openapi()["paths"].items()
    return [path for path, item in paths if "requestBody" in item.get("post", {}) and "{" not in path]


def test_a_lone_surrogate_anywhere_in_a_body_is_a_422_naming_its_field_on_every_route(client):
    body = '{"items": [{"device": "H100", "\\ud800": 1}], "workload": {"task": "\\udfff"}}'
    for path in post_routes(client):
        answer = client.post(path, content=body, headers={"content-type": "application/json"})
        assert answer.status_code == 422, (path, answer.text)
        assert "lone surrogate" in answer.text, (path, answer.text)
    pair = client.post(  # a surrogate pair is an emoji: Unicode text, refused only for what it says
        "/v1/gemm/predict", json={"items": [{"m": 8, "n": 8, "k": 8, "device": "\U0001f600"}]}
    )
    assert pair.status_code == 404


def test_a_body_that_is_not_utf8_is_a_422_naming_its_first_bad_byte_on_every_route(client):
    body = '{"items": [{"device": "Caf\u00e9"}]}'.encode("latin-1")  # é as one byte, 0xe9
    for path in post_routes(client):
        answer = client.post(path, content=body, headers={"content-type": "application/json"})
        assert answer.status_code == 422, (path, answer.text)
        error = answer.json()["detail"][0]
        assert error["loc"] == ["body", 26] and "0xe9" in error["ctx"]["error"], (path, error)
    item = {"m": 8, "n": 8, "k": 8, "dtype": "fp32", "device": "Tesla T4"}
    with_bom = b"\xef\xbb\xbf" + json.dumps({"items": [item]}).encode()  # a byte order mark is read past
    answer = client.post("/v1/gemm/predict", content=with_bom, headers={"content-type": "application/json"})
    assert answer.status_code == 200, answer.text


#: A run of digits longer than any device name: a name normaliser once took quadratic time on it
#: (20,000 digits: 2 s; a megabyte: hours), holding the interpreter while every other request waited.
DIGITS = "1" * 20_000


@pytest.mark.parametrize(
    "task", [t for t in all_tasks() if "device" in t.item.model_fields], ids=lambda t: t.name
)
def test_a_device_name_longer_than_any_the_catalogue_holds_is_a_422_naming_its_field(client, task):
    item = dict(task.examples[0]) | {"device": DIGITS}
    answer = client.post(f"/v1/{task.name}/predict", json={"items": [item]})
    assert answer.status_code == 422, answer.text
    assert answer.json()["detail"][0]["loc"] == ["body", "items", 0, "device"]


def test_a_what_if_device_or_price_name_longer_than_any_device_name_is_a_422(client):
    workload = {"task": "gemm", "items": [{"m": 64, "n": 64, "k": 64}]}
    named = client.post("/v1/whatif", json={"workload": workload, "devices": [DIGITS]})
    priced = client.post("/v1/whatif", json={"workload": workload, "prices": {DIGITS: 1.0}})
    assert named.status_code == priced.status_code == 422, (named.text, priced.text)
    for answer, field in ((named, "devices"), (priced, "prices")):
        errors = answer.json()["detail"]
        assert any(e["loc"][:2] == ["body", field] and "at most 128" in e["msg"] for e in errors), errors


def test_a_lone_surrogate_deep_in_a_wide_body_is_found_where_it_sits():
    """Each value's path was a copy of its parent's: depth × breadth (3 s for a 382 KB body)."""
    nested: list = ["\ud800", *[0] * 190_000]
    for _ in range(900):
        nested = [nested]
    assert lone_surrogate({"items": [nested]}) == ("items" + ".0" * 902, "\\ud800")


def test_json_nested_past_what_the_service_decodes_or_writes_is_a_422_naming_its_field(client):
    deep = "[" * 5_000 + "]" * 5_000  # a JSON string the decoder cannot recurse through: was a 500
    arch_item = {"space": "opgraph", "arch": deep, "dataset": "cifar10"}
    nested: list = [1]
    for _ in range(900):  # valid, but deeper than the serializer writes items out again: was a 500
        nested = [nested]
    config = {"model_type": "bert", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2}
    config |= {"intermediate_size": 128, "vocab_size": 100, "x": nested}
    model_item = {"model": config, "batch": 1, "seq": 8, "device": "H100"}
    for path, item, field in (
        ("/v1/nas-accuracy/predict", arch_item, "arch"),
        ("/v1/model-latency/predict", model_item, "model"),
    ):
        answer = client.post(path, json={"items": [item]})
        assert answer.status_code == 422, answer.text
        assert answer.json()["detail"][0]["loc"] == ["body", "items", 0, field]


def test_a_run_of_digits_normalises_in_linear_time_and_core_counts_still_drop():
    assert normalise("1" * 200_000) == ["1" * 200_000]  # quadratic, it took minutes
    assert normalise("AMD EPYC 7742 64-Core Processor")[:2] == ["epyc", "7742"]


@pytest.mark.parametrize("layers", [100_000_000, 10**400])
def test_a_layer_count_no_model_has_is_refused_before_its_stack_is_built(client, layers):
    item = {"model": SWITCH | {"num_layers": layers}, "batch": 1, "seq": 8, "device": "H100"}
    answer = client.post("/v1/model-latency/predict", json={"items": [item]})
    assert answer.status_code == 422 and "num_layers" in answer.text and "[0, 10000]" in answer.text


def test_a_request_past_its_budget_names_the_item_where_it_ran_out(client):
    items = [{"model": "switchxl4", "batch": 1, "seq": 8, "device": "H100"}] * 200
    answer = client.post("/v1/model-latency/predict", json={"items": items})
    assert answer.status_code == 422, answer.text
    body = answer.json()
    index = body["loc"][2]
    assert body["loc"][:2] == ["body", "items"] and 0 < index < 200
    assert f"items[{index}]" in body["detail"] and "units of work" in body["detail"]


def test_a_body_of_too_many_json_values_is_refused_before_it_is_decoded(client):
    """Decoding holds the interpreter: four dense 256-node graphs (a million values) are refused from
    a count of their separators; one is decoded and answered."""
    dense = {"nodes": [{"op": "input"}] + [{"op": "conv", "kernel": 3}] * 254 + [{"op": "output"}]}
    dense["edges"] = [[a, b] for a, b in itertools.combinations(range(256), 2)]
    graph = {"space": "opgraph", "arch": dense, "dataset": "cifar10", "curve": [0.3, 0.4], "budget": 200}
    many = client.post("/v1/nas-curve/predict", json={"items": [graph] * 4})
    assert many.status_code == 422 and "at most 200,000" in many.text, many.text
    assert client.post("/v1/nas-curve/predict", json={"items": [graph]}).status_code == 200


def test_a_what_if_stops_between_devices_once_its_caller_has_gone(trained_home, catalogue):
    import preflight

    model = preflight.load("gemm", home=trained_home)
    devices = whatif.candidates(model.task, catalogue, None)
    with budget.cancellable() as cancel:
        cancel.set()
        with pytest.raises(Cancelled):
            whatif.compare(model.task, model.predictor, catalogue, [{"m": 8, "n": 8, "k": 8}], devices, {})


def test_huge_dimensions_are_answered_not_a_500(client):
    big = 2**31 - 1
    op = {"op": "bmm", "input_shapes": [[1, big, 1], [1, 1, 65536]], "output_shape": [1, big, 65536]}
    for mode in ("inf", "train"):
        answer = client.post(
            "/v1/model-latency/predict", json={"items": [{"ops": [op], "device": "H100", "mode": mode}]}
        )
        assert answer.status_code == 200, answer.text
    gemm = {"b": big, "m": big, "n": big, "k": big}
    compared = client.post("/v1/whatif", json={"workload": {"task": "gemm", "items": [gemm]}})
    assert compared.status_code == 200, compared.text


def test_an_untrained_task_says_so_before_reading_a_single_item(tmp_path):
    with api_client(tmp_path / "empty") as empty:
        bad = [{"kernel": "k", "graph": {"nodes": [], "edges": []}, "pragmas": {"x": "y"}}] * 50
        answer = empty.post("/v1/fpga/predict", json={"items": bad})
    assert answer.status_code == 503, answer.text


def _listed_paths(g: arch.OpGraph) -> dict[str, float]:
    """Role sequences of input-to-output paths by listing every path (the definition)."""
    counts: dict[str, float] = {}

    def walk(node: int, roles: tuple[str, ...]) -> None:
        for a, b in g.edges:
            if a != node:
                continue
            if b == len(g.nodes) - 1:
                if roles:
                    counts["-".join(roles)] = counts.get("-".join(roles), 0) + 1
            elif (role := arch_features._role(g.nodes[b])) is not None and len(
                roles
            ) < arch_features.PATH_OPS:
                walk(b, (*roles, role))

    walk(0, ())
    return counts


def test_paths_are_counted_as_listing_them_would_and_repeated_edges_count_once():
    rng = random.Random(0)
    ops = ["conv", "skip", "maxpool", "zero", "fc", "mbconv"]
    for _ in range(30):
        n = rng.randint(3, 9)
        nodes = [{"op": "input"}] + [
            {"op": rng.choice(ops), "kernel": rng.choice([1, 3])} for _ in range(n - 2)
        ] + [{"op": "output"}]  # fmt: skip
        edges = [[a, b] for a, b in itertools.combinations(range(n), 2) if rng.random() < 0.5]
        g = arch.from_opgraph(nodes, edges)
        assert arch_features._short_paths(g) == _listed_paths(g)
        repeated = arch.from_opgraph(nodes, edges * 60)
        assert repeated == g
        np.testing.assert_array_equal(
            arch_features._flat_one("opgraph", json.dumps({"nodes": nodes, "edges": edges * 60})),
            arch_features._flat_one("opgraph", json.dumps({"nodes": nodes, "edges": edges})),
        )


def test_a_large_request_is_answered_in_calls_that_let_a_small_one_through_and_stop_when_it_leaves():
    calls: list[list[str]] = []

    def predict(model, items, coverage):
        calls.append(list(items))
        time.sleep(0.05)
        return [{"item": item} for item in items]

    async def main():
        batcher = Batcher(predict)
        large = asyncio.create_task(batcher.predict("m", [f"l{i}" for i in range(10)], 0.9, [1_000.0] * 10))
        await asyncio.sleep(0.02)  # the large request's first call is running
        small = await batcher.predict("m", ["s"], 0.9, [1.0])
        large.cancel()  # its client gives up (a deadline): the rest of its items are never computed
        await asyncio.sleep(0.1)
        return small

    small = asyncio.run(main())
    assert small == [{"item": "s"}]
    assert calls[0] == ["l0", "l1", "l2"]  # at most CALL_COST (3,000 units) a call
    assert calls[1][0] == "s"  # the small request goes before the rest of the large one
    assert sum(len(c) for c in calls) < 11  # the large request's last items were dropped


def test_costs_are_priced_from_raw_fields(catalogue: Catalogue):
    latency = get_task("model-latency")
    assert latency.item_cost({"ops": [{}] * 3}) == 30
    assert latency.item_cost({"model": "switchxl4"}) > latency.item_cost({"model": "bert"}) > 1
    assert latency.item_cost({"model": SWITCH | {"num_layers": 10**400}}) == latency.item_cost(
        {"model": "switchxl4"}
    )  # layers repeat operators: the count adds no work
    assert get_task("gemm").item_cost({"m": 1}) == 1 and get_task("gemm").item_cost("junk") == 1
