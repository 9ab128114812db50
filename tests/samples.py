"""Small data per task, made by the tests: the contract tests and the ``trained_home`` champions run
over every registered task with it. A new task adds one entry here (its source files, written into a
folder the test gives)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest
from preflight.data.sources import PUBLIC, local_gemm

from tests.fpga import write_hlsyn
from tests.interference import write_marla
from tests.nas import write_hw_nas_bench, write_local_curves

#: A GEMM whose time is all compute on any GPU, in a dtype the tensor cores run.
LARGE_FP16_GEMM = {"m": 4096, "n": 4096, "k": 4096, "dtype": "fp16"}
#: A spec sheet of a GPU no catalogue knows, as a registration sends it.
LAB_GPU = {
    "id": "lab-gpu",
    "name": "Lab GPU 7",
    "kind": "gpu",
    "peak_tflops": {"fp32": 60.0, "fp16": 500.0},
    "memory_bandwidth_gbs": 2000.0,
    "tdp_w": 500.0,
}
SAMPLE_GPUS = ("Tesla_T4", "Tesla_V100-PCIE-32GB", "NVIDIA_A100-PCIE-40GB")
#: Rows the GEMM sample keeps of each shipped sweep: every device and dtype, few rows for fast tests.
SWEEP_ROWS = 400


def write_local_gemm(folder: Path) -> Path:
    """The shipped local-gemm sweeps (the CPU, the H100, the H200), each cut to a seeded sample of
    ``SWEEP_ROWS`` rows beside its device's side file."""
    root = folder / "local-gemm"
    root.mkdir(parents=True, exist_ok=True)
    for sweep in sorted(local_gemm.SHIPPED.glob("*.csv")):
        table = pd.read_csv(sweep, dtype=str, keep_default_na=False)
        table.sample(min(SWEEP_ROWS, len(table)), random_state=0).sort_index().to_csv(
            root / sweep.name, index=False
        )
        shutil.copy(local_gemm.side_file(sweep), local_gemm.side_file(root / sweep.name))
    return root


def write_model_traces(folder: Path) -> Path:
    """BERT-large traces (inference, and training where traced) of three GPUs from the shipped extract."""
    root = folder / "neusight"
    for gpu in SAMPLE_GPUS:
        (root / "traces" / gpu).mkdir(parents=True, exist_ok=True)
        for trace in (PUBLIC / "neusight" / "traces" / gpu).glob("bert_large-*"):
            shutil.copy(trace, root / "traces" / gpu / trace.name)
    shutil.copytree(PUBLIC / "neusight" / "device_configs", root / "device_configs", dirs_exist_ok=True)
    return root


#: task -> (folder -> {source: file}); files in the sources' published layouts.
SAMPLE_SOURCES: dict[str, Callable[[Path], dict[str, Path]]] = {
    "gemm": lambda folder: {"local-gemm": write_local_gemm(folder)},
    "nas-accuracy": lambda folder: {"hw-nas-bench-360": write_hw_nas_bench(folder)},
    "nas-latency": lambda folder: {"hw-nas-bench-360": write_hw_nas_bench(folder)},
    "nas-curve": lambda folder: {"local-curves": write_local_curves(folder / "local_curves.csv")},
    "model-latency": lambda folder: {"neusight-traces": write_model_traces(folder)},
    "interference": lambda folder: {"marla": write_marla(folder)},
    "interference-trace": lambda folder: {"marla": write_marla(folder)},
    "fpga": lambda folder: {"hlsyn": write_hlsyn(folder)},
}


def sample_paths(task: str, folder: Path) -> dict[str, Path]:
    """The sample source files of a task, written under ``folder``."""
    if task not in SAMPLE_SOURCES:
        pytest.fail(f"task {task!r} has no sample data: add a writer to tests/samples.py")
    folder.mkdir(parents=True, exist_ok=True)
    return SAMPLE_SOURCES[task](folder)
