"""Energy metering: missing counters degrade to None; a window's power comes from a counter's delta."""

from __future__ import annotations

import sys

import pytest
import torch
from preflight.data.collect import energy


def test_without_nvml_bindings_there_is_no_gpu_meter(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml now raises ImportError
    assert energy.nvml_meter(torch.device("cuda", 0)) is None


def test_a_missing_rapl_zone_gives_no_meter(tmp_path, monkeypatch):
    assert energy.rapl_meter(tmp_path / "intel-rapl:0") is None
    monkeypatch.setattr(energy, "RAPL", tmp_path / "intel-rapl:0")
    assert energy.energy_meter(torch.device("cpu")) is None


def test_a_rapl_zone_counts_joules_and_wraps(tmp_path):
    (tmp_path / "energy_uj").write_text("1500000\n")
    (tmp_path / "max_energy_range_uj").write_text("5000000\n")
    meter = energy.rapl_meter(tmp_path)
    assert meter is not None and (meter.read_j(), meter.wrap_j) == (1.5, 5.0)
    assert meter.delta_j(4.5, 0.5) == pytest.approx(1.0) and meter.delta_j(0.5, 2.0) == 1.5


def test_power_is_the_counter_delta_over_the_window(monkeypatch):
    monkeypatch.setattr(energy, "SETTLE_S", 0.01)
    monkeypatch.setattr(energy, "WINDOW_S", 0.02)
    spent = [0.0]

    def run() -> None:
        spent[0] += 0.25

    watts, joules = energy.power(run, torch.device("cpu"), 1e-3, energy.Meter(lambda: spent[0]))
    assert joules == pytest.approx(0.25) and watts > 0
