"""``preflight evaluate fpga`` through the CLI contract: kernels the training file never had."""

import json

from preflight.service.cli import app

from tests.fpga import KERNELS, write_hlsyn
from tests.service.test_cli import evaluate_files, runner


def test_kernels_the_training_file_never_had_are_evaluated(tmp_path, monkeypatch):
    monkeypatch.setenv("PREFLIGHT_HOME", str(tmp_path / "home"))
    held_out = ("k-stencil",)
    train = write_hlsyn(tmp_path / "train", kernels=tuple(k for k in KERNELS if k not in held_out))
    test = write_hlsyn(tmp_path / "test", kernels=held_out)
    report = evaluate_files("fpga", "hlsyn", train, test, "--split", "kernel")
    assert report["n_test"] == 36 and report["split"] == "train/test"
    cycles, valid = report["metrics"]["cycles"], report["metrics"]["valid"]
    assert {"median_ape", "mape", "coverage", "rmse_log10"} <= set(cycles)
    assert {"auc", "accuracy", "brier"} <= set(valid) and 0 <= valid["auc"] <= 1
    assert {"lut", "ff", "dsp", "bram"} <= set(report["metrics"])


def test_grouped_cv_by_kernel_through_the_cli(tmp_path, monkeypatch):
    monkeypatch.setenv("PREFLIGHT_HOME", str(tmp_path / "home"))
    path = write_hlsyn(tmp_path)
    args = ["evaluate", "fpga", "--source", "hlsyn", "--path", str(path), "--split", "kernel", "--json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["split"] == "kernel" and report["n_test"] == 36 * len(KERNELS)
    assert report["metrics"]["valid"]["auc"] > 0.5  # what fits follows the unrolling on any kernel
