"""``preflight evaluate fpga`` through the CLI contract: kernels the training file never had."""

import json

import preflight
import pytest
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


def test_a_new_kernels_designs_given_as_shots_through_the_cli(tmp_path, monkeypatch):
    monkeypatch.setenv("PREFLIGHT_HOME", str(tmp_path / "home"))
    held_out = ("k-stencil",)
    train = write_hlsyn(tmp_path / "train", kernels=tuple(k for k in KERNELS if k not in held_out))
    test = write_hlsyn(tmp_path / "test", kernels=held_out)
    zero = evaluate_files("fpga", "hlsyn", train, test, "--split", "kernel")
    adapted = evaluate_files("fpga", "hlsyn", train, test, "--split", "kernel", "--shots", "10")
    assert adapted["n_test"] == zero["n_test"] - 10
    cycles = adapted["metrics"]["cycles"]["k-stencil"]  # metrics per held-out kernel with shots
    assert 0 <= cycles["coverage"] <= 1 and "auc" in adapted["metrics"]["valid"]["k-stencil"]
    # the synthetic kernel's zero-shot error is small already (rmse of log10 ~0.2): a few shots must
    # not blow it up (what they gain on real kernels is measured by bench/fpga_dse.py)
    assert cycles["rmse_log10"] < 1.5 * zero["metrics"]["cycles"]["rmse_log10"]


def test_synthesized_designs_are_registered_through_the_cli(home, tmp_path, monkeypatch):
    write_hlsyn(tmp_path / "datasets", designs_per_kernel=0)
    monkeypatch.setenv("PREFLIGHT_DATASETS", str(tmp_path / "datasets"))
    monkeypatch.setenv("PREFLIGHT_HOME", str(home))
    designs = tmp_path / "designs.jsonl"
    rows = [{"pragmas": {"__PARA__L1": f}, "valid": 1, "cycles": 1000 * f} for f in (1, 2, 4)]
    designs.write_text("\n".join(json.dumps(row) for row in rows))
    result = runner.invoke(app, ["register-designs", "k-mvt", str(designs)])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"task": "fpga", "subject": "k-mvt", "measurements": 3}
    assert preflight.remove_designs("k-mvt").measurements == 0  # taken back through the Python API
    result = runner.invoke(app, ["register-designs", "k-mvt", str(designs)])
    assert json.loads(result.stdout)["measurements"] == 3  # none were left to add to


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (None, "No such file"),
        ("", "no designs"),
        ('{"valid": 1}\n{"valid": 1, \n', "line 2: not JSON"),
        ("[1, 2", "not JSON"),
    ],
)
def test_a_designs_file_that_cannot_be_read_is_a_usage_error_naming_it(tmp_path, monkeypatch, content, why):
    monkeypatch.setenv("PREFLIGHT_HOME", str(tmp_path / "home"))
    designs = tmp_path / "designs.jsonl"
    if content is not None:
        designs.write_text(content)
    result = runner.invoke(app, ["register-designs", "k-mvt", str(designs)])
    assert result.exit_code == 2 and why in result.stderr, result.output
