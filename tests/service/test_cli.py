import json
import subprocess
import sys

import numpy as np
import pytest
from preflight.service.cli import app
from typer.testing import CliRunner

from tests.conftest import shared_file, synthetic_gemm

runner = CliRunner()


def deepbench_layout(rows, path):
    frame = rows.rename(columns={"m": "M", "n": "N", "k": "K", "runtime_ms": "time_ms"})
    frame["precision"] = "Float"
    frame["a_trans"] = np.where(frame["trans_a"], "T", "N")
    frame["b_trans"] = "N"
    frame[["device", "precision", "M", "N", "K", "a_trans", "b_trans", "time_ms"]].to_csv(path, index=False)
    return path


def evaluate_files(task: str, source: str, train, test, *options: str) -> dict:
    """``preflight evaluate TASK --source S --train A --test B [options] --json``: exit 0, the report."""
    args = ["evaluate", task, "--source", source, "--train", str(train), "--test", str(test), *options]
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_help_is_quick_and_lists_commands():
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "preflight.service.cli", "--help"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0
    for command in ("serve", "train", "evaluate", "predict", "collect", "data"):
        assert command in result.stdout
    assert "mlflow" not in result.stderr and "lightgbm" not in result.stderr  # heavy imports stay lazy


def test_evaluate_json_contract_with_train_and_test_files(tmp_path, monkeypatch, catalogue, caplog):
    monkeypatch.setenv("PREFLIGHT_HOME", str(tmp_path / "home"))
    train = deepbench_layout(
        synthetic_gemm(150, seed=1, devices=("NV_P100", "NV_1080Ti", "NV_M40"), catalogue=catalogue),
        tmp_path / "train.csv",
    )
    tested = synthetic_gemm(41, seed=2, devices=("AMD_MI25",), catalogue=catalogue)
    tested.loc[7, "runtime_ms"] = -1.0  # a bad row: rejected, and said so
    test = deepbench_layout(tested, tmp_path / "test.csv")
    report = evaluate_files("gemm", "deepbench", train, test, "--shots", "10")
    assert {"task", "family", "source", "split", "n_train", "n_test", "metrics", "baseline"} <= set(report)
    assert report["n_train"] == 150 and report["n_test"] == 30
    assert "test.csv: 1 of 41 rows rejected" in caplog.text
    assert "mean" in report["metrics"]["runtime_ms"] and report["baseline"]["name"] == "roofline"
    assert "training rows" not in caplog.text


def test_evaluate_says_when_test_rows_are_training_rows(tmp_path, monkeypatch, catalogue, caplog):
    monkeypatch.setenv("PREFLIGHT_HOME", str(tmp_path / "home"))
    rows = synthetic_gemm(60, seed=1, devices=("NV_P100", "NV_M40"), catalogue=catalogue)
    train = deepbench_layout(rows, tmp_path / "train.csv")
    test = deepbench_layout(rows.iloc[40:], tmp_path / "test.csv")
    evaluate_files("gemm", "deepbench", train, test)
    assert "20 of 20 test rows are also training rows: their figures are in-sample" in caplog.text


def test_errors_exit_1_or_2_with_the_error_type(tmp_path, monkeypatch):
    monkeypatch.setenv("PREFLIGHT_HOME", str(tmp_path / "home"))
    result = runner.invoke(
        app, ["evaluate", "gemm", "--source", "deepbench", "--path", str(tmp_path / "none.csv"), "--json"]
    )
    assert result.exit_code == 1 and "DataError" in result.output
    assert runner.invoke(app, ["train", "nope"]).exit_code == 2  # a usage error: an unknown task


def test_predict_command_uses_the_champion(trained_home, tmp_path, monkeypatch):
    monkeypatch.setenv("PREFLIGHT_HOME", str(trained_home))
    items = tmp_path / "items.json"
    items.write_text(json.dumps({"items": [{"m": 64, "n": 64, "k": 64, "device": "Tesla V100-SXM2-16GB"}]}))
    result = runner.invoke(app, ["predict", "gemm", "--input", str(items), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["predictions"][0]["runtime_ms"]["value"] > 0


@pytest.mark.integration
def test_deepbench_zero_shot_on_a_held_out_device(tmp_path, monkeypatch):
    """The published DeepBench table: hold out the P100 and predict it from its spec sheet."""
    import pandas as pd

    source = shared_file("gemm/deepbench_gemm.csv")
    table = pd.read_csv(source)
    held_out = table["device"] == "NV_P100"
    table[~held_out].to_csv(tmp_path / "train.csv", index=False)
    table[held_out].to_csv(tmp_path / "test.csv", index=False)
    monkeypatch.setenv("PREFLIGHT_HOME", str(tmp_path / "home"))
    report = evaluate_files("gemm", "deepbench", tmp_path / "train.csv", tmp_path / "test.csv")
    model, baseline = report["metrics"]["runtime_ms"], report["baseline"]["metrics"]["runtime_ms"]
    assert model["median_ape"] < baseline["median_ape"]


def test_nas_latency_few_shot_on_devices_absent_from_the_training_file(tmp_path, monkeypatch):
    """HELP layout: train on three devices' columns, give 10 measured cells of two new ones, test on the
    rest."""
    from tests.nas import write_help_csv

    monkeypatch.setenv("PREFLIGHT_HOME", str(tmp_path / "home"))
    train = write_help_csv(
        tmp_path / "train.csv", n=120, settings=("1080ti_1", "2080ti_32", "gold_6240"), seed=1
    )
    test = write_help_csv(tmp_path / "test.csv", n=60, settings=("titan_rtx_1", "pixel3"), seed=2)
    report = evaluate_files("nas-latency", "help-nb201", train, test, "--shots", "10")
    latency = report["metrics"]["latency_ms"]
    assert set(latency) == {"nvidia-titan-rtx", "qualcomm-snapdragon-845", "mean"}
    assert report["n_train"] == 360 and report["n_test"] == 2 * (60 - 10)
    assert latency["mean"]["spearman"] > 0.8 and report["baseline"]["name"] == "linear"


def test_version_prints_the_installed_version():
    from importlib.metadata import version

    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.stdout.strip() == f"preflight {version('preflight')}"


def test_devices_lists_the_catalogue_as_a_table(tmp_path, monkeypatch):
    monkeypatch.setenv("PREFLIGHT_HOME", str(tmp_path / "home"))
    listed = runner.invoke(app, ["devices"])
    assert listed.exit_code == 0 and "nvidia-h100-sxm5-80gb" in listed.stdout and "TDP W" in listed.stdout
    one = runner.invoke(app, ["devices", "Tesla V100-SXM2-16GB", "--json"])
    assert one.exit_code == 0 and [d["id"] for d in json.loads(one.stdout)] == ["nvidia-tesla-v100-sxm2-16gb"]


def test_devices_names_close_matches_for_an_unknown_name(tmp_path, monkeypatch):
    monkeypatch.setenv("PREFLIGHT_HOME", str(tmp_path / "home"))
    result = runner.invoke(app, ["devices", "tesla v1000"])
    assert result.exit_code == 1 and result.stderr.startswith("UnknownDevice:") and "V100" in result.stderr


def test_devices_lists_the_candidates_for_a_name_several_devices_fit(tmp_path, monkeypatch):
    monkeypatch.setenv("PREFLIGHT_HOME", str(tmp_path / "home"))
    result = runner.invoke(app, ["devices", "h100"])
    assert result.exit_code == 1 and result.stderr.startswith("AmbiguousDevice: device 'h100' fits 2 devices")
    assert "NVIDIA H100 PCIe 80 GB; NVIDIA H100 SXM5 80 GB" in result.stderr and not result.stdout


def test_data_list_is_a_table_or_json_lines(tmp_path, monkeypatch):
    monkeypatch.setenv("PREFLIGHT_HOME", str(tmp_path / "home"))
    table = runner.invoke(app, ["data", "list"])
    assert table.exit_code == 0 and "rows stored" in table.stdout and "deepbench" in table.stdout
    lines = runner.invoke(app, ["data", "list", "--json"]).stdout.splitlines()
    sources = {json.loads(line)["source"]: json.loads(line) for line in lines}
    assert "deepbench_gemm.csv" in sources["deepbench"]["path"]  # shipped, or under PREFLIGHT_DATASETS
