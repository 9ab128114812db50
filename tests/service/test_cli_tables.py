"""The CLI's tables and ``--json`` for train, evaluate and predict; task help; progress bars on request."""

import io
import json

import pytest
from preflight.models.core import evaluate, training
from preflight.models.core.task import all_tasks, get_task
from preflight.models.presentation import progress
from preflight.models.registry.tracking import ModelInfo, Promotion
from preflight.service.cli import app
from rich.console import Console
from typer.testing import CliRunner

from tests.conftest import synthetic_gemm
from tests.service.test_cli import deepbench_layout

runner = CliRunner()
#: A terminal on stderr, as rich reads the environment: progress is drawn there.
TERMINAL = {"TTY_COMPATIBLE": "1", "TERM": "xterm"}
REPORT = {
    "task": "gemm",
    "family": "tree",
    "source": "local-gemm",
    "split": "grouped-cv:shape-kernel",
    "n_train": 1200,
    "n_test": 1200,
    "metrics": {"runtime_ms": {"n": 1200, "mape": 12.345, "median_ape": 8.0, "spearman": 0.97}},
    "baseline": {
        "name": "roofline",
        "metrics": {"runtime_ms": {"n": 1200, "mape": 61.0, "median_ape": 40.0}},
    },
}


@pytest.fixture
def deepbench(tmp_path, monkeypatch, catalogue):
    """A DeepBench-layout file of three devices, with a fresh PREFLIGHT_HOME."""
    monkeypatch.setenv("PREFLIGHT_HOME", str(tmp_path / "home"))
    rows = synthetic_gemm(120, seed=1, devices=("NV_P100", "NV_1080Ti", "NV_M40"), catalogue=catalogue)
    return deepbench_layout(rows, tmp_path / "deepbench.csv")


@pytest.fixture
def fake_training(monkeypatch, tmp_path):
    """``train`` registers v3 as champion at once, running through two folds on the progress bars."""
    monkeypatch.setenv("PREFLIGHT_HOME", str(tmp_path / "home"))

    def train(task, settings, catalogue, **options):
        list(progress.track(range(2), "fake folds"))
        info = ModelInfo(name="preflight.gemm", version="3", run_id="r", family="tree")
        return training.TrainResult(Promotion(info, True, "mape 12.3 beats the champion's 14.1"), REPORT)

    monkeypatch.setattr(training, "train", train)


def test_help_of_task_commands_lists_every_task_family_and_split():
    for command in ("train", "evaluate", "predict"):
        result = runner.invoke(app, [command, "--help"], env={"COLUMNS": "200"})
        assert result.exit_code == 0, result.output
        lines = {
            line.split(":")[0].strip(): line for line in result.stdout.splitlines() if ": families " in line
        }
        for task in all_tasks():
            assert all(name in lines[task.name] for name in (*task.families, *task.groups)), lines[task.name]


@pytest.mark.parametrize(
    "args, valid",
    [
        (["train", "nope"], "nas-curve"),
        (["train", "gemm", "--family", "nope"], "tree, roofline"),
        (
            ["evaluate", "gemm", "--source", "deepbench", "--path", "none.csv", "--split", "nope"],
            "shape-kernel",
        ),
    ],
)
def test_an_unknown_task_family_or_split_exits_2_naming_the_valid_ones(args, valid, tmp_path, monkeypatch):
    monkeypatch.setenv("PREFLIGHT_HOME", str(tmp_path / "home"))
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and valid in result.stderr, result.output


def test_evaluate_prints_model_and_baseline_side_by_side(deepbench):
    args = ["evaluate", "gemm", "--source", "deepbench", "--path", str(deepbench), "--split", "device"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert "gemm on deepbench: split device" in result.stdout
    assert {"target", "n", "model", "mape", "median_ape"} <= set(
        next(line for line in lines if "mape" in line).split()
    )
    row = next(i for i, line in enumerate(lines) if line.split()[:1] == ["runtime_ms"])
    assert lines[row].split()[2] == "physics" and lines[row + 1].split()[0] == "roofline"
    assert result.stderr == ""  # no terminal: no progress bars


def test_evaluate_draws_progress_on_a_terminal_and_keeps_stdout_json(deepbench):
    args = [
        "evaluate",
        "gemm",
        "--source",
        "deepbench",
        "--path",
        str(deepbench),
        "--split",
        "device",
        "--json",
    ]
    result = runner.invoke(app, args, env=TERMINAL)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["split"] == "device" and len(result.stdout.splitlines()) == 1
    for bar in (
        "gemm physics vs roofline: device splits",
        "gemm physics: calibration folds",
        "fit on every row",
    ):
        assert bar in result.stderr


def test_the_library_draws_nothing_unless_asked(catalogue, capsys, monkeypatch):
    for name, value in TERMINAL.items():
        monkeypatch.setenv(name, value)
    rows = synthetic_gemm(60, seed=2, devices=("NV_P100", "NV_M40", "AMD_MI25"), catalogue=catalogue)
    evaluate.cross_validate(get_task("gemm"), rows, catalogue, "tree", "device")
    assert capsys.readouterr() == ("", "")
    assert list(progress.track([1, 2], "folds")) == [1, 2]
    screen = io.StringIO()
    with progress.shown(Console(file=screen, force_terminal=True, width=100)):
        assert list(progress.track([1, 2], "folds")) == [1, 2]
    assert "folds" in screen.getvalue() and "2/2" in screen.getvalue()


def test_train_prints_a_summary_and_json_on_request(fake_training):
    table = runner.invoke(app, ["train", "gemm"])
    assert table.exit_code == 0, table.output
    assert "preflight.gemm v3 (tree)" in table.stdout and "yes: mape 12.3 beats" in table.stdout
    lines = table.stdout.splitlines()
    row = next(i for i, line in enumerate(lines) if line.split()[:1] == ["runtime_ms"])
    assert lines[row].split() == ["runtime_ms", "1,200", "tree", "12.3", "8", "0.97"]
    assert lines[row + 1].split() == ["roofline", "61", "40", "-"]
    as_json = runner.invoke(app, ["train", "gemm", "--json"], env=TERMINAL)
    assert "fake folds" in as_json.stderr
    assert json.loads(as_json.stdout) == {
        "model": "preflight.gemm",
        "version": "3",
        "family": "tree",
        "champion": True,
        "reason": "mape 12.3 beats the champion's 14.1",
        "metrics": REPORT["metrics"],
    }


def test_predict_prints_a_row_per_item_and_json_on_request(trained_home, tmp_path, monkeypatch):
    monkeypatch.setenv("PREFLIGHT_HOME", str(trained_home))
    items = [
        {"m": 64, "n": 64, "k": 64, "device": "Tesla V100-SXM2-16GB"},
        {"m": 8, "n": 8, "k": 8, "device": "p100"},
    ]
    path = tmp_path / "items.json"
    path.write_text(json.dumps(items))
    table = runner.invoke(app, ["predict", "gemm", "--input", str(path)])
    assert table.exit_code == 0, table.output
    assert "each estimate: value [90% interval]" in table.stdout
    header = next(line.split() for line in table.stdout.splitlines() if "warnings" in line)
    assert header[:6] == ["#", "device", "m", "n", "k", "runtime_ms"] and header[-2:] == ["OOD", "warnings"]
    rows = [line.split() for line in table.stdout.splitlines() if line.strip()[:2] in ("0 ", "1 ")]
    assert [row[:5] for row in rows] == [
        ["0", "Tesla", "V100-SXM2-16GB", "64", "64"],
        ["1", "p100", "8", "8", "8"],
    ]
    records = json.loads(runner.invoke(app, ["predict", "gemm", "--input", str(path), "--json"]).stdout)
    assert set(records) == {"task", "model", "predictions"} and len(records["predictions"]) == 2
    value = records["predictions"][0]["runtime_ms"]["value"]
    assert f"{value:.3g}" in table.stdout
