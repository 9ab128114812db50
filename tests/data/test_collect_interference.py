"""The interference collector: real (short) co-located runs, whole-run appends, resume after a kill."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import psutil
import pytest
from preflight.data.collect import interference
from preflight.data.collect.interference import CollectSummary, collect_interference, plan
from preflight.data.errors import UsageError
from preflight.data.sources import local_interference
from preflight.service.cli import app
from typer.testing import CliRunner

SECONDS = 0.2


def planned(workload: str, seed: int = 0) -> list[interference.Run]:
    return [run for run in plan(seed) if run.workload == workload]


@dataclass
class Killed:
    path: Path
    children: list[psutil.Process]  # the collector's targets and stressors when it was killed
    survivors: list[psutil.Process]  # those still running 30 s after (a child still starting on a busy host)
    resumed: CollectSummary


@pytest.fixture(scope="module")
def compute_runs(tmp_path_factory) -> Killed:
    """The compute workload's plan, collected by a process SIGKILLed after two runs, then resumed here."""
    out = tmp_path_factory.mktemp("interference") / "compute.csv"
    code = (
        "from pathlib import Path; from preflight.data.collect.interference import collect_interference; "
        f"collect_interference(Path({str(out)!r}), seconds={SECONDS}, workloads=['compute'], progress=False)"
    )
    collector = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    try:
        children = _children_once_lines(collector, out, lines=3)  # the header and two runs
        os.killpg(collector.pid, signal.SIGKILL)  # the collector's group; its children run in their own
        collector.wait(10)
    finally:
        if collector.poll() is None:
            collector.kill()
            collector.wait()
    _, survivors = psutil.wait_procs(children, timeout=30)
    resumed = collect_interference(out, seconds=SECONDS, workloads=["compute"], progress=False)
    return Killed(out, children, survivors, resumed)


def _children_once_lines(collector: subprocess.Popen, out: Path, lines: int) -> list[psutil.Process]:
    """The collector's children, taken once ``out`` holds ``lines`` lines and a run is under way."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and collector.poll() is None:
        if out.exists() and out.read_text().count("\n") >= lines:
            children = psutil.Process(collector.pid).children(recursive=True)
            if children:
                return children
        time.sleep(0.05)
    raise AssertionError(f"the collector wrote no {lines} lines in time (exit status {collector.poll()})")


def test_a_killed_collection_resumes_without_losing_runs_or_leaving_stressors(compute_runs):
    assert compute_runs.children, "the collector had no target or stressor running"
    assert not compute_runs.survivors, f"left running: {[p.cmdline()[3:5] for p in compute_runs.survivors]}"
    resumed = compute_runs.resumed
    assert resumed.skipped_existing >= 2 and resumed.measured + resumed.skipped_existing == 14
    assert not resumed.stopped_early
    table = pd.read_csv(compute_runs.path)
    assert sorted(table["run"]) == [run.run for run in planned("compute")]  # each once: none lost or doubled


def test_a_collection_follows_the_plan_and_loads(compute_runs):
    table = pd.read_csv(compute_runs.path, keep_default_na=False)
    runs = planned("compute")
    assert table["run"].tolist() == [run.run for run in runs]
    assert table["neighbours"].tolist() == [run.neighbours for run in runs]
    assert table["neighbours"].iloc[0] == table["neighbours"].iloc[-1] == "alone"
    assert {"cpu=1", "cpu=2", "membw=2", "l3=1", "io=2", "cpu=1,membw=1"} <= set(table["neighbours"])
    assert float(table["norm_perf"].iloc[0]) == 1.0 and (table["norm_perf"].astype(float) > 0).all()
    assert (table["solo_ops_per_s"] == table["ops_per_s"].iloc[0]).all()
    trace = json.loads(table["trace"].iloc[1])
    assert trace["planned_s"] == SECONDS and len(trace["t"]) == len(trace["others_cpu"]) >= 1
    loaded = local_interference.load(compute_runs.path)
    assert len(loaded.rejects) == 0 and len(loaded.rows) == 14


def test_a_rerun_measures_nothing_more_and_other_plans_are_refused(compute_runs, tmp_path):
    again = collect_interference(compute_runs.path, seconds=SECONDS, workloads=["compute"], progress=False)
    assert (again.measured, again.skipped_existing) == (0, 14)
    with pytest.raises(UsageError, match="seed 0, not 1"):
        collect_interference(compute_runs.path, seconds=SECONDS, seed=1, progress=False)
    with pytest.raises(UsageError, match="seconds 0.2, not 0.3"):
        collect_interference(compute_runs.path, seconds=0.3, progress=False)
    foreign = tmp_path / "foreign.csv"
    table = pd.read_csv(compute_runs.path, keep_default_na=False)
    table.assign(host="another cpu (64 logical cores)").to_csv(foreign, index=False)
    with pytest.raises(UsageError, match=r"host another cpu \(64 logical cores\), not"):
        collect_interference(foreign, seconds=SECONDS, progress=False)


def test_a_torn_last_line_is_repaired_and_its_run_measured_again(compute_runs, tmp_path):
    out = tmp_path / "torn.csv"
    text = compute_runs.path.read_text()
    out.write_text(text[: len(text) - 30])  # the last run's line torn mid-way
    summary = collect_interference(out, seconds=SECONDS, workloads=["compute"], progress=False)
    assert (summary.measured, summary.skipped_existing) == (1, 13)
    table = pd.read_csv(out)
    assert table["run"].tolist() == [run.run for run in planned("compute")]
    assert len(local_interference.load(out).rejects) == 0


def test_a_run_without_a_duration_is_measured_again(compute_runs, tmp_path):
    out = tmp_path / "edited.csv"
    table = pd.read_csv(compute_runs.path, dtype=str, keep_default_na=False)
    table.loc[3, "seconds"] = ""  # a cell a hand edit could leave: the loader rejects the row
    table.to_csv(out, index=False)
    summary = collect_interference(out, seconds=SECONDS, workloads=["compute"], progress=False)
    assert (summary.measured, summary.skipped_existing) == (1, 13)
    loaded = local_interference.load(out)
    assert len(loaded.rows) == 14 and loaded.reject_counts() == {"no measured duration": 1}


def test_bad_options_are_usage_errors(tmp_path, monkeypatch):
    monkeypatch.setenv("PREFLIGHT_HOME", str(tmp_path / "home"))
    runner = CliRunner()
    for options, message in (
        (["--seconds", "0"], "seconds must be a positive number"),
        (["--max-minutes", "-1"], "max-minutes must be positive"),
        (["--backend", "docker"], "unknown backend"),
        (["--workloads", "compute,gpu"], "unknown workloads"),
    ):
        result = runner.invoke(app, ["collect", "interference", "--out", str(tmp_path / "x.csv"), *options])
        assert result.exit_code == 2 and message in result.output, (options, result.output)
    assert not (tmp_path / "x.csv").exists()
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(UsageError, match="stress-ng"):
        collect_interference(tmp_path / "x.csv", backend="stress-ng", progress=False)


def test_perf_output_becomes_ipc_or_nothing():
    supported = "1200000,,instructions:u,1000,100.00,,\n1000000,,cycles:u,1000,100.00,,\n"
    assert interference.parse_ipc(supported) == pytest.approx(1.2)
    unsupported = "<not supported>,,instructions,0,100.00,,\n<not supported>,,cycles,0,100.00,,\n"
    assert interference.parse_ipc(unsupported) is None


def test_the_plan_is_seeded_and_each_workload_starts_and_ends_alone():
    assert plan(0) == plan(0) and plan(0) != plan(1)
    for workload in interference.WORKLOADS:
        runs = planned(workload)
        assert len(runs) == 14 and runs[0].neighbours == runs[-1].neighbours == "alone"
        assert sorted(r.neighbours for r in runs) == sorted(r.neighbours for r in planned(workload, seed=1))


def test_the_shipped_set_loads_and_shows_real_slowdowns():
    loaded = local_interference.load(local_interference.SHIPPED)
    assert len(loaded.rejects) == 0
    rows = loaded.rows
    assert set(rows["workload"]) == set(interference.WORKLOADS)
    beside = rows[rows["mix"] != "alone"]
    assert (beside.groupby("workload")["norm_perf"].min() < 0.8).all()


def test_a_collection_past_its_time_stops_after_the_run_in_progress(tmp_path):
    summary = collect_interference(
        tmp_path / "io.csv", seconds=SECONDS, workloads=["io"], max_minutes=1e-4, progress=False
    )
    assert (summary.measured, summary.stopped_early) == (1, True)
    assert pd.read_csv(tmp_path / "io.csv")["neighbours"].tolist() == ["alone"]


@pytest.mark.skipif(shutil.which("stress-ng") is None, reason="stress-ng is not on PATH")
def test_stress_ng_neighbours_run_and_are_gone_after(tmp_path):
    setup = interference.Setup(0, SECONDS, "h", "stress-ng", tmp_path, interference.llc_bytes(), perf=False)
    measured = interference.measure(interference.Run(0, "compute", (("cpu", 1), ("io", 1))), setup)
    assert measured.ops > 0 and measured.host_cpu_util > 0
    assert not [p for p in psutil.process_iter(["name"]) if p.info["name"] == "stress-ng"]
    assert list(tmp_path.iterdir()) == []


def test_a_terminated_collection_stops_its_children(tmp_path):
    """SIGTERM (``timeout``, a batch scheduler) stops the CLI's collector as Ctrl-C does: the target,
    30 s into nothing, and any stressor are stopped with it, and the log stays whole."""
    out = tmp_path / "terminated.csv"
    command = [sys.executable, "-m", "preflight.service.cli", "collect", "interference", "--out", str(out)]
    options = ["--seconds", "30", "--workloads", "compute"]
    env = {**os.environ, "PREFLIGHT_HOME": str(tmp_path / "home")}
    collector = subprocess.Popen([*command, *options], env=env, start_new_session=True)
    try:
        children = _children_once_lines(collector, out, lines=1)  # the header, and the first run started
        _working(children)
        collector.send_signal(signal.SIGTERM)  # the collector alone, not its group
        collector.wait(20)
    finally:
        if collector.poll() is None:
            os.killpg(collector.pid, signal.SIGKILL)
            collector.wait()
    _, survivors = psutil.wait_procs(children, timeout=15)
    assert not survivors, f"left running: {survivors}"
    assert out.read_text().endswith("\n")  # whole lines only: the next run resumes from it


def _working(children: list[psutil.Process], cpu_s: float = 0.5) -> None:
    """Once one of the children has worked ``cpu_s`` of CPU time (past its start, into its run)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if any(child.cpu_times().user >= cpu_s for child in children if child.is_running()):
            return
        time.sleep(0.05)
    raise AssertionError("no child worked")
