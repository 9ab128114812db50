"""The first start trains the champions that are missing and says why each was promoted."""

import logging

from preflight.data.settings import Settings
from preflight.service import served
from preflight.service.served import ServedModels

from tests.samples import sample_paths

TASK = "nas-curve"


def test_the_first_start_promotes_a_first_version_and_says_so(tmp_path, monkeypatch, caplog):
    paths = sample_paths(TASK, tmp_path / "data")
    # one task's small data at hand, none for the others (the shipped sets take minutes to train on)
    monkeypatch.setattr(served, "available_sources", lambda task, _: paths if task.name == TASK else {})
    models = ServedModels.create(Settings(home=tmp_path / "home"))
    with caplog.at_level(logging.INFO, logger="preflight"):
        models.start(bootstrap=True)
    assert models.tasks[TASK].state == "ready" and models.tasks[TASK].version == "1"
    registered = [r.getMessage() for r in caplog.records if r.getMessage().startswith("registered ")]
    assert registered == [f"registered preflight.{TASK} v1, promoted: preflight.{TASK} had no champion yet"]
