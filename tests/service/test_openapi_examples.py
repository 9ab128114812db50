"""The OpenAPI document as a client reads it: every request example is a request the service takes,
each task's predictions are typed from its targets and real answers match them, and the routes that
may answer 404 or 503 say so."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from preflight.data.settings import Settings
from preflight.models.core.task import all_tasks, get_task
from preflight.service.app import create_app
from preflight.service.schemas import predict_response

from tests.client import api_client


@pytest.fixture(scope="module")
def doc(tmp_path_factory) -> dict:
    """The document of a service on an empty home (it needs no model)."""
    return create_app(Settings(home=tmp_path_factory.mktemp("doc") / "home")).openapi()


def operations(doc: dict) -> list[tuple[str, str, dict]]:
    return [(method, path, op) for path, ops in doc["paths"].items() for method, op in ops.items()]


def body_examples(doc: dict) -> list[tuple[str, str, str, object]]:
    """``(method, path, example name, body)`` of every request-body example, in document order."""
    return [
        (method, path, name, example["value"])
        for method, path, op in operations(doc)
        for name, example in op.get("requestBody", {}).get("content", {}).get("application/json", {})
        .get("examples", {}).items()
    ]  # fmt: skip


def parameter_examples(doc: dict) -> list[tuple[str, str, str]]:
    """``(method, url, example name)`` of every path-parameter example, the value in the path."""
    return [
        (method, path.replace(f"{{{param['name']}}}", quote(str(example["value"]), safe="")), name)
        for method, path, op in operations(doc)
        for param in op.get("parameters", [])
        if param["in"] == "path"
        for name, example in param.get("examples", {}).items()
    ]


def test_every_route_that_takes_a_body_has_an_example(doc):
    documented = {(method, path) for method, path, _, _ in body_examples(doc)}
    bare = [
        f"{method.upper()} {path}"
        for method, path, op in operations(doc)
        if "requestBody" in op and (method, path) not in documented
    ]
    assert not bare, f"no request example: {bare}"


def test_every_documented_example_is_taken(home):
    """Sent as they are documented (the bodies first: the device an example registers is then known to
    the examples of device names), each gets a 2xx: every task has a model in this home."""
    with api_client(home) as client:
        doc = client.get("/openapi.json").json()
        requests = [(method, path, name, {"json": body}) for method, path, name, body in body_examples(doc)]
        requests += [(method, url, name, {}) for method, url, name in parameter_examples(doc)]
        refused = []
        for method, url, name, options in requests:
            answer = client.request(method.upper(), url, **options)
            if not answer.is_success:
                refused.append(f"{method.upper()} {url} {name!r}: {answer.status_code} {answer.text[:300]}")
    assert not refused, "\n".join(refused)


def test_examples_of_an_untrained_task_are_valid_requests(tmp_path):
    """Without models, an example is still well-formed: 503 (how to train it) or a 2xx, never a 422."""
    with api_client(tmp_path / "empty") as client:
        doc = client.get("/openapi.json").json()
        for method, path, name, body in body_examples(doc):
            answer = client.request(method.upper(), path, json=body)
            assert answer.status_code != 422, f"{path} example {name!r}: {answer.text[:300]}"


def test_predictions_are_typed_from_the_task_targets(doc):
    for task in all_tasks():
        response = doc["paths"][f"/v1/{task.name}/predict"]["post"]["responses"]["200"]
        name = response["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
        items = doc["components"]["schemas"][name]["properties"]["predictions"]["items"]["$ref"]
        prediction = doc["components"]["schemas"][items.rsplit("/", 1)[1]]
        assert list(prediction["properties"]) == [*task.targets, "ood", "warnings"]
        assert {task.primary_target, *task.derived, "ood", "warnings"} <= set(prediction["required"])
        assert prediction["additionalProperties"] is False


def test_real_answers_match_their_typed_model(trained_home):
    """Each task's example answered, its body validated against the task's generated model."""
    with api_client(trained_home) as client:
        doc = client.get("/openapi.json").json()
        for path, body in [
            (path, body) for _, path, _, body in body_examples(doc) if path.endswith("/predict")
        ]:
            task = get_task(path.split("/")[2])
            answer = client.post(path, json=body)
            assert answer.status_code == 200, answer.text
            typed = predict_response(task).model_validate(answer.json())
            assert len(typed.predictions) == len(body["items"]) and typed.task == task.name
            assert answer.headers["X-Preflight-Model-Version"] == typed.model.version


@pytest.mark.parametrize(
    ("method", "path", "statuses"),
    [
        *[("post", f"/v1/{task.name}/predict", ("404", "503")) for task in all_tasks()],
        ("post", "/v1/devices", ("404", "503")),  # measurements of an unknown device, or of an untrained task
        ("get", "/v1/devices/{name}", ("404",)),
        ("delete", "/v1/devices/{name}", ("404",)),
        ("post", "/v1/whatif", ("404", "503")),
        ("post", "/v1/ood-reasons/explain", ("404", "503")),
    ],
)
def test_not_found_and_unavailable_are_documented_where_they_happen(doc, method, path, statuses):
    documented = doc["paths"][path][method]["responses"]
    for status in statuses:
        assert status in documented, f"{method.upper()} {path}: no {status}"
        assert documented[status]["content"]["application/json"]["schema"] == {
            "$ref": "#/components/schemas/Problem"
        }
