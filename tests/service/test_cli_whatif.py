"""``preflight whatif``: the ranking as a table, as JSON, and as a chart; usage errors exit 2."""

import json

import pytest
from preflight.service.cli import app
from typer.testing import CliRunner

runner = CliRunner()

ITEMS = [{"m": 4096, "n": 4096, "k": 4096, "dtype": "fp16"}, {"m": 256, "n": 256, "k": 256}]
DEVICES = "p100,Tesla V100-SXM2-16GB,nvidia-h100-sxm5-80gb"


@pytest.fixture
def workload(trained_home, tmp_path, monkeypatch):
    """A GEMM workload file, with the trained champions as PREFLIGHT_HOME."""
    monkeypatch.setenv("PREFLIGHT_HOME", str(trained_home))
    path = tmp_path / "workload.json"
    path.write_text(json.dumps({"task": "gemm", "items": ITEMS}))
    return path


def whatif(*args: str):
    return runner.invoke(app, ["whatif", *args], env={"COLUMNS": "120"})


def test_json_ranks_the_named_devices_with_cost(workload):
    result = whatif("--workload", str(workload), "--devices", DEVICES, "--price", "H100 SXM5=3.5", "--json")
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    devices = body["devices"]
    assert [d["device"] for d in devices] != [] and len(devices) == 3 and body["skipped"] == []
    times = [d["time_ms"]["value"] for d in devices]
    assert times == sorted(times) and [d["rank"]["time"] for d in devices] == [1, 2, 3]
    priced = {d["device"]: d["cost_per_million_runs_usd"] for d in devices}
    h100 = next(d for d in devices if d["device"] == "nvidia-h100-sxm5-80gb")
    assert priced.pop("nvidia-h100-sxm5-80gb")["value"] == pytest.approx(
        3.5 * h100["time_ms"]["value"] / 3.6e3 * 1e3
    )
    assert set(priced.values()) == {None} and h100["rank"]["cost"] == 1


def test_table_by_default_and_the_chart_as_png(workload, tmp_path):
    chart = tmp_path / "whatif.png"
    result = whatif("--workload", str(workload), "--devices", DEVICES, "--chart", str(chart))
    assert result.exit_code == 0, result.output
    assert "NVIDIA Tesla V100 SXM2 16 GB" in result.stdout and "ms/run" in result.stdout
    assert chart.read_bytes().startswith(b"\x89PNG") and chart.stat().st_size > 10_000


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--devices", "rtx 4070 tii"],
            "unknown device 'rtx 4070 tii'; close matches: NVIDIA GeForce RTX 4070",
        ),
        (["--price", "p100=-2"], "must be a finite, non-negative USD per hour"),
        (["--price", "p100=nan"], "must be a finite, non-negative USD per hour"),
        (["--price", "p100"], "expected ID=USD_PER_HOUR"),
        (["--devices", "p100", "--price", "nvidia-a10=1"], "'nvidia-a10' is not among the candidate devices"),
    ],
)
def test_bad_devices_and_prices_are_usage_errors(workload, args, message):
    result = whatif("--workload", str(workload), *args)
    assert result.exit_code == 2 and "UsageError: " in result.stderr and message in result.stderr


def test_empty_workload_and_a_task_without_devices_are_usage_errors(workload):
    workload.write_text(json.dumps({"task": "gemm", "items": []}))
    empty = whatif("--workload", str(workload))
    assert empty.exit_code == 2 and "items: List should have at least 1 item" in empty.stderr
    workload.write_text(json.dumps({"task": "nas-accuracy", "items": [{"arch": "x"}]}))
    no_device = whatif("--workload", str(workload))
    assert no_device.exit_code == 2 and "'nas-accuracy' does not run on a device" in no_device.stderr
