"""A task's actions: the registry refuses two with one name or path, and an answer without the model
label that every response carries; the CLI names the known actions for an unknown one."""

import dataclasses

import pytest
from preflight.data.errors import UsageError
from preflight.models.core import task as registry
from preflight.models.core.actions import Action, ModelInfoPublic
from preflight.models.core.task import get_action, get_task
from preflight.service.cli import app
from pydantic import BaseModel
from typer.testing import CliRunner


class Question(BaseModel):
    x: float


class Answer(BaseModel):
    model: ModelInfoPublic
    y: float


def answer(served, body: Question) -> Answer:
    """Twice x."""
    return Answer(model=served.model(), y=2 * body.x)


def test_an_action_is_found_by_name_with_its_task():
    task, action = get_action("early-stop")
    assert task.name == "nas-curve" and action.path == "/v1/nas/early-stop"
    assert action.summary == "Stop or continue a training run, from its partial learning curve."
    with pytest.raises(UsageError, match="known actions: early-stop, explore, place"):
        get_action("stop")


def test_a_response_without_the_model_label_is_refused():
    class Bare(BaseModel):
        y: float

    with pytest.raises(ValueError, match="needs a `model` field"):
        Action("twice", "/v1/toy/twice", Question, Bare, answer)


@pytest.mark.parametrize("clash", ["early-stop", "/v1/nas/early-stop"])
def test_two_tasks_cannot_share_an_action_name_or_path(clash):
    taken = get_action("early-stop")[1]
    name, path = (clash, "/v1/other/x") if clash == taken.name else ("other", clash)
    copy = dataclasses.replace(
        get_task("gemm"), name="gemm-copy", actions=(Action(name, path, Question, Answer, answer),)
    )
    with pytest.raises(ValueError, match="another task's action"):
        registry.register(copy)
    assert "gemm-copy" not in registry.TASKS


def test_the_cli_names_the_known_actions_for_an_unknown_one(tmp_path):
    body = tmp_path / "body.json"
    body.write_text("{}")
    result = CliRunner().invoke(app, ["ask", "stop", "--input", str(body)])
    assert result.exit_code == 2 and "known actions: early-stop, explore, place" in result.stderr
    listed = CliRunner().invoke(app, ["ask", "--help"])
    assert "place (interference): POST /v1/interference/place" in listed.stdout
