"""Timing helpers: the probe scales a clipped run by size, the launch loop honours its minimum."""

from __future__ import annotations

import pytest
import torch
from preflight.data.collect import timing

CPU = torch.device("cpu")


def test_the_probe_clips_each_dimension_and_scales_by_their_product(monkeypatch):
    built = []
    monkeypatch.setattr(timing, "once_s", lambda run, target: 1e-3)
    estimate = timing.probe_s((4096, 16, 1024), lambda *dims: built.append(dims) or (lambda: None), CPU)
    assert built == [(512, 16, 512)]
    assert estimate == pytest.approx(1e-3 * 4096 * 1024 / (512 * 512))


def test_the_launch_loop_runs_at_least_the_minimum_and_spread_is_ordered():
    calls = []
    launches, elapsed_s = timing.run_for(lambda: calls.append(1), CPU, 0.0, per_run_s=1.0, at_least=3)
    assert launches == len(calls) == 3 and elapsed_s >= 0
    p10, median, p90 = timing.spread_ms(lambda: sum(range(1000)), CPU, repeats=5)
    assert 0 <= p10 <= median <= p90
