"""Small data per task, made by the tests: the contract tests and the ``trained_home`` champions run
over every registered task with it. A new task adds one entry here (its source files, written into a
folder the test gives)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from preflight.data.sources import local_gemm

from tests.nas import write_hw_nas_bench, write_local_curves

#: task -> (folder -> {source: file}); files in the sources' published layouts.
SAMPLE_SOURCES: dict[str, Callable[[Path], dict[str, Path]]] = {
    "gemm": lambda folder: {"local-gemm": local_gemm.SHIPPED},
    "nas-accuracy": lambda folder: {"hw-nas-bench-360": write_hw_nas_bench(folder)},
    "nas-latency": lambda folder: {"hw-nas-bench-360": write_hw_nas_bench(folder)},
    "nas-curve": lambda folder: {"local-curves": write_local_curves(folder / "local_curves.csv")},
}


def sample_paths(task: str, folder: Path) -> dict[str, Path]:
    """The sample source files of a task, written under ``folder``."""
    if task not in SAMPLE_SOURCES:
        pytest.fail(f"task {task!r} has no sample data: add a writer to tests/samples.py")
    folder.mkdir(parents=True, exist_ok=True)
    return SAMPLE_SOURCES[task](folder)
