"""``preflight report``: one self-contained page per version, for every task that has a champion."""

from __future__ import annotations

import re

import pytest
from preflight.models.core.task import all_tasks
from preflight.service.cli import app
from typer.testing import CliRunner

runner = CliRunner()


@pytest.fixture
def in_home(home, monkeypatch):
    monkeypatch.setenv("PREFLIGHT_HOME", str(home))
    return home


@pytest.mark.parametrize("task", [t.name for t in all_tasks()])
def test_every_champion_gets_a_report(task, in_home, tmp_path):
    out = tmp_path / "report"
    result = runner.invoke(app, ["report", task, "--out", str(out), "--rows", "120"])
    assert result.exit_code == 0, result.output
    page = out / "index.html"
    assert result.stdout.strip() == str(page)
    text = page.read_text()
    assert re.search(r"<img alt='[^']+' src='data:image/png;base64,", text)
    assert f"preflight report: {task} v1" in text
    assert {p.name for p in out.glob("*.png")}, "the figures sit beside the page too"


def test_an_unknown_version_lists_the_known_ones(in_home):
    result = runner.invoke(app, ["report", "gemm", "--version", "9"])
    assert result.exit_code == 2
    assert "has no version '9'; its versions: 1" in result.output


def test_a_task_without_a_model_says_how_to_train_it(tmp_path, monkeypatch):
    monkeypatch.setenv("PREFLIGHT_HOME", str(tmp_path / "empty"))
    result = runner.invoke(app, ["report", "gemm"])
    assert result.exit_code == 1
    assert "preflight train gemm" in result.output
