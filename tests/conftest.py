"""Hermetic tests: no PREFLIGHT_* or MLflow variables leak in; state lives under tmp_path."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from preflight.data.catalogue import Catalogue
from preflight.data.settings import Settings

#: Where integration tests find the public datasets (captured before the environment is cleaned).
SHARED_DATASETS = Path(
    os.environ.get("PREFLIGHT_DATASETS") or Path(__file__).resolve().parents[2] / "shared" / "datasets"
)


@pytest.fixture(autouse=True)
def clean_environ(monkeypatch):
    for name in list(os.environ):
        if name.startswith("PREFLIGHT_") or name == "MLFLOW_TRACKING_URI":
            monkeypatch.delenv(name)
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")


@pytest.fixture
def settings(tmp_path) -> Settings:
    return Settings(home=tmp_path / "home")


@pytest.fixture(scope="session")
def catalogue() -> Catalogue:
    return Catalogue.load()


def write(folder: Path, name: str, lines: list[str]) -> Path:
    """A text file of these lines (a CSV: header first) in ``folder``."""
    path = folder / name
    path.write_text("\n".join(lines) + "\n")
    return path


def shared_file(relative: str) -> Path:
    """A public dataset file, or skip the test saying why."""
    path = SHARED_DATASETS / relative
    if not path.is_file():
        pytest.skip(f"{relative} not found under {SHARED_DATASETS} (set PREFLIGHT_DATASETS)")
    return path


DEVICES = ("NV_P100", "NV_1080Ti", "AMD_MI25", "NV_M40", "Tesla V100-SXM2-16GB", "NVIDIA GeForce RTX 4070")


def synthetic_gemm(
    n: int, seed: int = 0, devices: tuple[str, ...] = DEVICES, catalogue: Catalogue | None = None
) -> pd.DataFrame:
    """GEMM rows whose runtime follows each device's roofline at a shape-dependent efficiency after a
    launch floor, with noise."""
    catalogue = catalogue or Catalogue.load()
    rng = np.random.default_rng(seed)
    dims = np.array([64, 128, 256, 512, 1024, 2048, 4096])
    m, n_, k = (rng.choice(dims, n) for _ in range(3))
    device = rng.choice(devices, n)
    specs = [catalogue.resolve(d) for d in device]
    peak = np.array([s.peak_tflops["fp32"] for s in specs]) * 1e12
    bandwidth = np.array([s.memory_bandwidth_gbs for s in specs]) * 1e9
    flops, traffic = 2.0 * m * n_ * k, 4.0 * (m * k + k * n_ + m * n_)
    efficiency = 0.8 * (1 - np.exp(-flops / 2e9)) + 0.05
    launch_ms = 5e-3  # no GPU kernel runs in less than a few microseconds
    roofline_ms = np.maximum(flops / peak, traffic / bandwidth) * 1e3
    runtime_ms = (launch_ms + roofline_ms / efficiency) * rng.lognormal(0, 0.05, n)
    power_w = np.array([s.tdp_w for s in specs]) * (0.4 + 0.5 * efficiency) * rng.lognormal(0, 0.03, n)
    return pd.DataFrame(
        {
            "m": m,
            "n": n_,
            "k": k,
            "dtype": "fp32",
            "math_dtype": "fp32",
            "trans_a": rng.random(n) < 0.5,
            "trans_b": False,
            "device": device,
            "kernel": None,
            "runtime_ms": runtime_ms,
            "power_w": power_w,
            "energy_j": runtime_ms * power_w / 1e3,
        }
    )


@pytest.fixture(scope="session")
def trained_home(tmp_path_factory) -> Path:
    """A PREFLIGHT_HOME with a champion of every registered task, trained on that task's sample data
    (``tests/samples.py``: gemm on the shipped local-gemm sweep, real data; the others on small files
    the tests make)."""
    from preflight.models.core.task import all_tasks
    from preflight.models.core.training import train

    from tests.samples import sample_paths

    home = tmp_path_factory.mktemp("trained") / "home"
    settings = Settings(home=home, datasets=None, api_keys=[])
    catalogue = Catalogue.load(settings.devices_file)
    for task in all_tasks():
        train(task, settings, catalogue, paths=sample_paths(task.name, home.parent / task.name))
    return home


@pytest.fixture
def home(trained_home, tmp_path) -> Path:
    """A private copy of the trained home, for tests that register devices or measurements."""
    import shutil

    copy = tmp_path / "home"
    shutil.copytree(trained_home, copy)
    return copy
