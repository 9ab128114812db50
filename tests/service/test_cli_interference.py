"""``preflight evaluate interference`` through the CLI contract: a test file of mixes never trained on."""

import json

import pandas as pd
import pytest
from preflight.service.cli import app

from tests.interference import write_marla
from tests.service.test_cli import evaluate_files, runner


def _split_by_mix(tmp_path, test_names: set[str]):
    """MARLA-layout train and test files in two folders, each with its traces beside it."""
    train = write_marla(tmp_path / "train")
    test = write_marla(tmp_path / "test")
    for path, keep_test in ((train, False), (test, True)):
        table = pd.read_csv(path)
        table[table["Interference_Name"].isin(test_names) == keep_test].to_csv(path, index=False)
    return train, test


@pytest.mark.parametrize("task", ["interference", "interference-trace"])
def test_mixes_the_training_file_never_had_are_evaluated(task, tmp_path, monkeypatch):
    monkeypatch.setenv("PREFLIGHT_HOME", str(tmp_path / "home"))
    train, test = _split_by_mix(tmp_path, {"1_CPU_1_L3", "1_CPU_1_MemBW", "2_stress-ng_l3_pods"})
    report = evaluate_files(task, "marla", train, test, "--split", "mix")
    metrics = report["metrics"]["norm_perf"]
    assert report["n_test"] == 36 and {"mae", "coverage"} <= set(metrics)
    assert metrics["mae"] < report["baseline"]["metrics"]["norm_perf"]["mae"] * 1.5
    assert 0 <= metrics["coverage"] <= 1


def test_grouped_cv_by_mix_through_the_cli(tmp_path, monkeypatch):
    monkeypatch.setenv("PREFLIGHT_HOME", str(tmp_path / "home"))
    path = write_marla(tmp_path)
    args = ["evaluate", "interference", "--source", "marla", "--path", str(path), "--split", "mix", "--json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["split"] == "mix" and report["metrics"]["norm_perf"]["mae"] < 0.2
