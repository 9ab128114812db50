"""The README's requests to ``/v1/<task>/predict`` (each ``curl ... -d '<JSON>'``) are valid bodies of
the named task's route, so a README example that drifts from the schema fails here."""

import json
import re
from pathlib import Path

import pytest
from preflight.models.task import get_task
from preflight.service.schemas import predict_request

README = Path(__file__).resolve().parents[2] / "README.md"
#: A curl to a task's predict route and its JSON body (``-d '...'``, single-quoted, over lines).
PREDICT_CURL = re.compile(r"curl [^\n]*?/v1/([\w-]+)/predict\b[^\n]*?-d '([^']*)'")


def predict_bodies() -> list[tuple[str, str]]:
    """``(task, body)`` of every predict request in the README, in its order."""
    return PREDICT_CURL.findall(README.read_text(encoding="utf-8"))


def test_the_readme_shows_predict_requests():
    assert predict_bodies(), f"no curl to /v1/<task>/predict found in {README}"


@pytest.mark.parametrize(
    ("task", "body"), [pytest.param(*request, id=request[0]) for request in predict_bodies()]
)
def test_a_readme_predict_request_is_valid_for_its_task(task, body, settings):
    request = predict_request(get_task(task))
    request.model_validate(json.loads(body), context=settings.validation_context())
