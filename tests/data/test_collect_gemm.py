"""The GEMM profiler, run for real on this machine's CPU with tiny shapes."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from preflight.data.catalogue import DeviceSpec
from preflight.data.collect.gemm import COLUMNS, DTYPES, collect_gemm, seed_file, sweep
from preflight.data.errors import UsageError
from preflight.data.sources import local_gemm

SMALL = (1, 16, 24, 48, 64)
KEY = ["m", "n", "k", "dtype", "trans_a", "trans_b", "device"]


def collect(out: Path, points: int, **options):
    options = {"seed": 0, "threads": 1, "repeats": 3, "progress": False, "dims": SMALL} | options
    return collect_gemm("cpu", out, points=points, **options)


def test_a_tiny_sweep_writes_what_the_loader_reads(tmp_path):
    out = tmp_path / "gemm.csv"
    summary = collect(out, 6)
    assert (summary.path, summary.measured, summary.skipped_existing, summary.skipped_slow) == (out, 6, 0, 0)

    assert out.read_text().splitlines()[0] == ",".join(COLUMNS)
    raw = pd.read_csv(out)
    assert (raw["runtime_p10_ms"] <= raw["runtime_ms"]).all() and (
        raw["runtime_ms"] <= raw["runtime_p90_ms"]
    ).all()
    assert (raw["repeats"] == 3).all()

    loaded = local_gemm.load(out)
    assert loaded.source == "local-gemm" and len(loaded.rows) == 6 and len(loaded.rejects) == 0
    spec = DeviceSpec.model_validate(loaded.extra_devices[0])
    assert spec.id == summary.device_id and spec.kind == "cpu" and spec.compute_units == 1
    assert spec.name.endswith("(1 thread)") and spec.id.endswith("-1-threads") and spec.aliases == []
    assert spec.memory_bandwidth_gbs > 0
    assert spec.peak_tflops["fp64"] == pytest.approx(spec.peak_tflops["fp32"] / 2, rel=1e-3)
    assert set(loaded.rows["device"]) == {spec.id}


def test_a_rerun_measures_only_the_new_points_of_the_same_sweep(tmp_path):
    out = tmp_path / "gemm.csv"
    collect(out, 6)
    summary = collect(out, 10)
    assert (summary.measured, summary.skipped_existing) == (4, 6)

    raw = pd.read_csv(out)
    assert len(raw) == 10 and not raw.duplicated(KEY).any()
    expected = {(p.m, p.n, p.k, p.dtype, p.trans_a, p.trans_b) for p in sweep(10, 0, DTYPES["cpu"], SMALL)}
    assert set(raw[KEY[:-1]].itertuples(index=False, name=None)) == expected


def test_the_sweep_is_seeded_and_a_longer_one_extends_a_shorter_one():
    assert sweep(10, 3, DTYPES["cpu"])[:6] == sweep(6, 3, DTYPES["cpu"])
    assert sweep(10, 3, DTYPES["cpu"]) != sweep(10, 4, DTYPES["cpu"])
    assert len(set(sweep(50, 0, DTYPES["cpu"], SMALL))) == 50


def test_a_torn_last_line_is_repaired_on_the_next_run(tmp_path):
    out = tmp_path / "gemm.csv"
    collect(out, 3)
    with open(out, "ab") as fh:
        fh.write(b"16,16,16,fp32,fal")  # what a power cut mid-write could leave
    summary = collect(out, 4)
    assert (summary.measured, summary.skipped_existing) == (1, 3)
    assert out.read_bytes().endswith(b"\n") and b"fal\n" not in out.read_bytes()
    loaded = local_gemm.load(out)
    assert len(loaded.rows) == 4 and len(loaded.rejects) == 0


def test_a_row_without_a_runtime_is_measured_again(tmp_path):
    out = tmp_path / "gemm.csv"
    collect(out, 3)
    raw = pd.read_csv(out, dtype=str, keep_default_na=False)
    raw.loc[1, "runtime_ms"] = "nan"  # a cell a hand edit or a failed timing could leave
    raw.to_csv(out, index=False)
    summary = collect(out, 3)
    assert (summary.measured, summary.skipped_existing) == (1, 2)
    loaded = local_gemm.load(out)
    assert len(loaded.rows) == 3 and loaded.reject_counts() == {"runtime_ms missing or not a number": 1}


def test_points_slower_than_the_budget_are_skipped_and_not_recorded(tmp_path):
    out = tmp_path / "gemm.csv"
    summary = collect(out, 4, max_seconds_per_point=1e-9)
    assert (summary.measured, summary.skipped_slow) == (0, 4)
    assert out.read_text() == ",".join(COLUMNS) + "\n"


def test_a_file_of_another_device_is_refused(tmp_path):
    out = tmp_path / "gemm.csv"
    collect(out, 1)
    spec_path = local_gemm.side_file(out)
    spec_path.write_text(json.dumps(json.loads(spec_path.read_text()) | {"id": "some-other-cpu"}))
    with pytest.raises(UsageError, match="device some-other-cpu, not"):
        collect(out, 2)


def test_rows_of_another_device_are_refused_without_its_spec_sheet(tmp_path):
    out = tmp_path / "gemm.csv"
    out.write_text(",".join(COLUMNS) + "\n16,16,16,fp32,false,false,some-other-cpu,3,1,1,1,,,2026-01-01\n")
    with pytest.raises(UsageError, match="device some-other-cpu, not"):
        collect(out, 2)
    assert not local_gemm.side_file(out).exists()


def test_a_file_of_another_seed_is_refused(tmp_path):
    out = tmp_path / "gemm.csv"
    collect(out, 2, seed=0)
    assert seed_file(out).read_text() == "0\n"
    with pytest.raises(UsageError, match="seed 0, not 1"):
        collect(out, 3, seed=1)
    assert len(pd.read_csv(out)) == 2


def test_a_file_that_is_not_a_gemm_csv_is_left_alone(tmp_path):
    out = tmp_path / "existing.json"
    out.write_text(json.dumps({"a": 1}))  # no newline at the end: once cut away as a torn line
    with pytest.raises(UsageError, match="not a local-gemm CSV"):
        collect(out, 1)
    assert out.read_text() == '{"a": 1}'
    assert sorted(tmp_path.iterdir()) == [out]  # no spec sheet or seed beside it


def test_a_timing_only_sweep_records_no_power_and_tf32_math_is_scoped():
    import torch
    from preflight.data.collect.gemm import _matmul_math

    before = torch.backends.cuda.matmul.allow_tf32
    with _matmul_math("tf32"):
        assert torch.backends.cuda.matmul.allow_tf32
    with _matmul_math("fp32"):
        assert not torch.backends.cuda.matmul.allow_tf32
    assert torch.backends.cuda.matmul.allow_tf32 == before
    assert "tf32" in DTYPES["cuda"] and "tf32" not in DTYPES["cpu"]


def test_power_off_leaves_the_power_cells_empty(tmp_path, monkeypatch):
    from itertools import count

    from preflight.data.collect import energy

    joules = count(step=5)
    monkeypatch.setattr(energy, "energy_meter", lambda target: energy.Meter(lambda: float(next(joules))))
    monkeypatch.setattr(energy, "SETTLE_S", 0.0)
    monkeypatch.setattr(energy, "WINDOW_S", 0.01)
    collect(tmp_path / "with.csv", 2)
    collect(tmp_path / "without.csv", 2, power=False)
    assert pd.read_csv(tmp_path / "with.csv")["power_w"].gt(0).all()
    assert pd.read_csv(tmp_path / "without.csv")[["power_w", "energy_j"]].isna().all().all()
