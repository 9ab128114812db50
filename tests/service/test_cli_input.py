"""Bad input to the CLI: one line on stderr and exit 2 (usage) or 1, never a traceback; collectors leave
files that are not theirs alone."""

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from preflight.data.collect.gemm import seed_file
from preflight.data.sources import local_curves, local_gemm, local_interference
from preflight.service.cli import app
from typer.testing import CliRunner

runner = CliRunner()
COLLECTORS = {"gemm": local_gemm, "curves": local_curves, "interference": local_interference}
#: Options that keep a collection short, should a refusal fail and the collector get to work.
TINY = {
    "gemm": ["--points", "1", "--repeats", "1", "--max-seconds-per-point", "0.001"],
    "curves": ["--runs", "1", "--epochs", "1"],
    "interference": ["--seconds", "0.1", "--workloads", "compute", "--max-minutes", "0.0001"],
}


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("PREFLIGHT_HOME", str(tmp_path / "home"))


def refused(args: list[str], code: int = 2) -> str:
    """Run the CLI: it must exit ``code`` with one line on stderr and no traceback; returns the line."""
    result = runner.invoke(app, args)
    assert result.exit_code == code and isinstance(result.exception, SystemExit), result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def bad_option(args: list[str], option: str) -> None:
    """typer refuses the option's value before any work: exit 2, naming the option."""
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit), result.output
    assert f"Invalid value for '{option}'" in result.stderr


def log_with(collector: str, path: Path, **cells: str) -> Path:
    """``path`` as the collector's CSV: its header and one row, every cell ``x`` but ``cells``."""
    columns = COLLECTORS[collector].COLUMNS
    path.write_text(",".join(columns) + "\n" + ",".join(cells.get(c, "x") for c in columns) + "\n")
    return path


# -- the collectors ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("collector", COLLECTORS)
def test_an_out_that_is_not_the_collectors_csv_is_left_alone(collector, tmp_path):
    out = tmp_path / "existing.json"
    out.write_text('{"a": 1}')  # no newline at the end: it used to be cut away as a torn line
    line = refused(["collect", collector, "--out", str(out), *TINY[collector]])
    source = COLLECTORS[collector].SOURCE
    assert line == (
        f"UsageError: {out} is not a {source} CSV (its first line is not the collector's header); "
        "collect into another file"
    )
    assert out.read_text() == '{"a": 1}' and list(tmp_path.glob("existing.json*")) == [out]  # no side files


@pytest.mark.parametrize(
    "collector, cells, option",
    [
        ("gemm", {"device": "some-other-cpu"}, []),
        ("curves", {"seed": "0", "budget": "1"}, ["--seed", "1"]),
        ("interference", {"seed": "0"}, ["--seed", "1"]),
    ],
)
def test_an_out_of_another_seed_or_device_is_refused(collector, cells, option, tmp_path):
    out = log_with(collector, tmp_path / "log.csv", **cells)
    before = out.read_text()
    line = refused(["collect", collector, "--out", str(out), *TINY[collector], *option])
    what = "device some-other-cpu" if collector == "gemm" else "seed 0"
    assert line.startswith(f"UsageError: {out} holds rows of {what}, not ")
    assert line.endswith("; collect into another file") and out.read_text() == before


def test_a_gemm_csv_of_another_seed_is_refused(tmp_path):
    out = tmp_path / "gemm.csv"
    out.write_text(",".join(local_gemm.COLUMNS) + "\n")
    seed_file(out).write_text("0\n")
    line = refused(["collect", "gemm", "--out", str(out), *TINY["gemm"], "--seed", "1"])
    assert line == f"UsageError: {out} holds rows of seed 0, not 1; collect into another file"


@pytest.mark.parametrize(
    "collector, option, value",
    [
        ("gemm", "--points", "-5"),
        ("gemm", "--repeats", "0"),
        ("gemm", "--threads", "0"),
        ("gemm", "--seed", "-1"),
        ("gemm", "--max-seconds-per-point", "0"),
        ("gemm", "--devices", "0"),
        ("gemm", "--devices", "two"),
        ("curves", "--workers", "-1"),
        ("curves", "--runs", "0"),
        ("curves", "--epochs", "-1"),
        ("curves", "--seed", "-1"),
        ("interference", "--seed", "-1"),
    ],
)
def test_counts_below_one_and_negative_seeds_are_refused(collector, option, value, tmp_path):
    out = tmp_path / "log.csv"
    bad_option(["collect", collector, "--out", str(out), *TINY[collector], option, value], option)
    assert not out.exists()


@pytest.mark.parametrize("collector", COLLECTORS)
def test_an_unwritable_out_is_one_line_naming_it(collector, tmp_path):
    (tmp_path / "a-file").touch()
    line = refused(["collect", collector, "--out", str(tmp_path), *TINY[collector]])
    assert line == f"UsageError: cannot write {tmp_path}: Is a directory"
    under_a_file = tmp_path / "a-file" / "log.csv"
    line = refused(["collect", collector, "--out", str(under_a_file), *TINY[collector]])
    assert line.startswith(f"UsageError: cannot write {under_a_file}: ") and "a-file" in line


def test_a_gemm_sweep_on_a_cluster_names_no_gpu_index(tmp_path, monkeypatch):
    """Each Ray worker sweeps its own GPU (``cuda``); ``cuda:1`` would name another one on every node."""
    monkeypatch.setenv("RAY_ADDRESS", "auto")
    line = refused(["collect", "gemm", "--out", str(tmp_path), "--device", "cuda:1", *TINY["gemm"]])
    assert (
        line == "UsageError: on a Ray cluster the device is 'cpu' or 'cuda' (each worker's own), not 'cuda:1'"
    )


# -- predict, evaluate, whatif -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content, code, message",
    [
        (b"[]", 1, "items: List should have at least 1 item"),
        (b'{"items": []}', 1, "items: List should have at least 1 item"),
        (b"{}", 2, 'not a JSON list of items, nor {"items": [...]}'),
        (b'{"items": 5}', 2, 'not a JSON list of items, nor {"items": [...]}'),
        (b"null", 2, 'not a JSON list of items, nor {"items": [...]}'),
        (b"{bad", 2, "not JSON (Expecting property name"),
        (b"\x89PNG\r\n\x1a\n\x00\xff", 2, "not JSON ('utf-8' codec can't decode"),
        (b'[{"m": -1, "n": 8, "k": 8, "device": "a100"}]', 1, "items.0.m: Input should be greater than 0"),
    ],
)
def test_predict_input_that_is_not_items(content, code, message, tmp_path):
    path = tmp_path / "items.json"
    path.write_bytes(content)
    line = refused(["predict", "gemm", "--input", str(path)], code)
    assert line.startswith(("UsageError: --input", "DataError: --input")) and message in line


@pytest.mark.parametrize(
    "name, why", [("missing/chart.png", "No such file or directory"), (".", "Is a directory")]
)
def test_a_chart_that_cannot_be_written_is_one_line_naming_it(name, why, trained_home, tmp_path, monkeypatch):
    monkeypatch.setenv("PREFLIGHT_HOME", str(trained_home))
    workload = tmp_path / "workload.json"
    workload.write_text(json.dumps({"task": "gemm", "items": [{"m": 256, "n": 256, "k": 256}]}))
    chart = tmp_path / name
    line = refused(["whatif", "--workload", str(workload), "--devices", "p100", "--chart", str(chart)])
    assert line == f"UsageError: --chart {chart}: {why}"


def test_a_missing_input_file_is_a_usage_error(tmp_path):
    line = refused(["predict", "gemm", "--input", str(tmp_path / "none.json")])
    assert line == f"UsageError: --input {tmp_path / 'none.json'}: No such file or directory"


@pytest.mark.parametrize(
    "args, option",
    [
        (["predict", "gemm", "--input", "items.json", "--coverage", "5"], "--coverage"),
        (["predict", "gemm", "--input", "items.json", "--coverage", "nan"], "--coverage"),
        (["whatif", "--workload", "workload.json", "--coverage", "1"], "--coverage"),
        (["evaluate", "gemm", "--source", "local-gemm", "--coverage", "0"], "--coverage"),
        (["evaluate", "gemm", "--source", "local-gemm", "--train-size", "-3"], "--train-size"),
        (["evaluate", "gemm", "--source", "local-gemm", "--shots", "-2"], "--shots"),
        (["evaluate", "gemm", "--source", "local-gemm", "--seed", "-1"], "--seed"),
        (["train", "gemm", "--seed", "-1"], "--seed"),
    ],
)
def test_option_values_out_of_range_are_refused_before_any_work(args, option):
    bad_option(args, option)


def test_a_port_out_of_range_is_refused_before_serving(monkeypatch):
    import uvicorn

    def serve(*args, **kwargs):
        raise AssertionError("served")

    monkeypatch.setattr(uvicorn, "run", serve)
    monkeypatch.setitem(
        sys.modules, "preflight.service.app", SimpleNamespace(create_app=lambda *a, **k: None)
    )
    bad_option(["serve", "--port", "70000"], "--port")


def _local_gemm_file(tmp_path: Path, rows: int) -> Path:
    """The shipped CPU sweep's first ``rows`` rows, with its device spec beside them."""
    shipped = Path(local_gemm.__file__).parents[1] / "local" / "gemm" / "local_gemm.csv"
    out = tmp_path / f"gemm-{rows}.csv"
    out.write_text("".join(shipped.read_text().splitlines(keepends=True)[: rows + 1]))
    spec = Path(f"{shipped}.device.json")
    Path(f"{out}.device.json").write_text(spec.read_text())
    return out


def test_training_on_too_few_rows_says_so(tmp_path):
    path = _local_gemm_file(tmp_path, 2)
    line = refused(["train", "gemm", "--source", "local-gemm", "--path", str(path)], code=1)
    assert line.startswith("DataError: too few rows with runtime_ms")


def test_a_grouped_split_of_one_group_says_so(tmp_path):
    path = _local_gemm_file(tmp_path, 40)
    args = ["evaluate", "gemm", "--source", "local-gemm", "--path", str(path), "--split", "device", "--json"]
    assert refused(args, code=1).startswith("DataError: a grouped split needs at least two groups")


def test_an_input_file_gets_the_bounds_of_a_request_body(tmp_path, monkeypatch):
    """Size, nesting, Unicode and the request budget: each a one-line refusal before any model work."""
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    assert "nested too deeply" in refused(["predict", "gemm", "--input", str(deep)])
    monkeypatch.setenv("PREFLIGHT_MAX_BODY_BYTES", "4096")
    large = tmp_path / "large.json"
    large.write_text(json.dumps([{"m": 8, "n": 8, "k": 8, "device": "p100"}] * 200))
    assert "larger than 4,096 bytes" in refused(["predict", "gemm", "--input", str(large)])
    lone = tmp_path / "lone.json"
    lone.write_text('[{"m": 8, "n": 8, "k": 8, "device": "\\ud800"}]')
    assert "lone surrogate" in refused(["predict", "gemm", "--input", str(lone)])
    assert "lone surrogate" in refused(["whatif", "--workload", str(lone)])
    monkeypatch.delenv("PREFLIGHT_MAX_BODY_BYTES")
    costly = tmp_path / "costly.json"
    costly.write_text(json.dumps([{"model": "switchxl4", "batch": 1, "seq": 8, "device": "H100"}] * 200))
    assert "units of work" in refused(["predict", "model-latency", "--input", str(costly)], code=1)


def test_a_bad_setting_is_one_line_naming_it_not_a_traceback(monkeypatch):
    monkeypatch.setenv("PREFLIGHT_API_KEYS", "short")
    line = refused(["devices"])
    assert line.startswith("UsageError: settings (PREFLIGHT_*)") and "at least 16" in line
