"""What a training run tells an MLflow user: a readable name, the code's commit, a note, the training
table it learned from, and a description on the version it registered."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from preflight.data.settings import Settings
from preflight.models.registry import tracking


@pytest.fixture
def champion(trained_home):
    """The trained home's gemm champion (trained on the shipped local-gemm sweep) and its run."""
    mlflow_client = tracking.client(Settings(home=trained_home))
    version = mlflow_client.get_model_version_by_alias("preflight.gemm", tracking.CHAMPION)
    return version, mlflow_client.get_run(version.run_id)


def test_the_run_is_named_by_task_family_sources_and_split(champion):
    _, run = champion
    assert run.info.run_name == "gemm · physics · local-gemm · grouped-cv:shape-kernel"


def test_the_run_records_the_checkouts_git_commit(champion):
    here = Path(tracking.__file__).parent
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True)
    if head.returncode != 0:
        pytest.skip("preflight does not run from a git checkout")
    _, run = champion
    assert run.data.tags["mlflow.source.git.commit"] == head.stdout.strip() == tracking.git_commit()


def test_without_git_the_commit_is_unknown_and_training_goes_on(monkeypatch):
    monkeypatch.setenv("PATH", "")
    assert tracking.git_commit() is None


def test_the_run_notes_and_the_version_describes_metrics_data_and_split(champion):
    version, run = champion
    assert run.data.tags["mlflow.note.content"] == version.description
    n_rows = run.data.params["n_rows"]
    assert f"{int(n_rows):,} rows of local-gemm" in version.description
    for part in (version.tags["data_sha"], "grouped-cv:shape-kernel", "runtime_ms mape", "roofline baseline"):
        assert part in version.description
    assert f"{float(version.tags['metric_value']):.4g}" in version.description


def test_the_training_tables_digest_is_the_runs_input(champion):
    version, run = champion
    (logged,) = run.inputs.dataset_inputs
    assert logged.dataset.digest == version.tags["data_sha"] == run.data.tags["data_sha"]
    assert logged.dataset.name == "gemm:local-gemm" and logged.dataset.source_type == "local"
    assert {(tag.key, tag.value) for tag in logged.tags} == {("mlflow.data.context", "training")}
    assert f'"num_rows": {run.data.params["n_rows"]}' in logged.dataset.profile
