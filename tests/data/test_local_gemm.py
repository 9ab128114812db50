"""The local-gemm loader, on small files written by the test."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from preflight.data.catalogue import DeviceSpec
from preflight.data.collect import host
from preflight.data.errors import DataError
from preflight.data.sources import local_gemm

SPEC = {
    "id": "test-cpu-1-threads",
    "name": "Test CPU (1 threads)",
    "kind": "cpu",
    "compute_units": 1,
    "memory_bandwidth_gbs": 10.0,
    "peak_tflops": {"fp32": 0.1, "fp64": 0.05},
}
HEADER = ",".join(local_gemm.COLUMNS)
GOOD = [
    "64,32,16,fp32,false,true,test-cpu-1-threads,7,0.01,0.009,0.012,,,2026-11-01T00:00:00+00:00",
    "128,128,128,bf16,true,false,test-cpu-1-threads,7,2.0,1.5,2.5,30.5,0.061,2026-11-01T00:00:01+00:00",
    "1,4096,16,fp64,true,true,test-cpu-1-threads,7,0.5,0.5,0.5,,,2026-11-01T00:00:02+00:00",
]


def write(tmp_path: Path, lines: list[str], header: str = HEADER, spec: dict | None = SPEC) -> Path:
    path = tmp_path / "local_gemm.csv"
    path.write_text("\n".join([header, *lines]) + "\n")
    if spec is not None:
        local_gemm.side_file(path).write_text(json.dumps(spec))
    return path


def test_good_rows_become_canonical_rows_with_their_device(tmp_path):
    loaded = local_gemm.load(write(tmp_path, GOOD))
    rows = loaded.rows
    assert loaded.source == "local-gemm" and len(rows) == 3 and len(loaded.rejects) == 0
    assert list(rows["trans_a"]) == [False, True, True] and list(rows["trans_b"]) == [True, False, True]
    assert list(rows["math_dtype"]) == ["fp32", "bf16", "fp64"] and rows["kernel"].isna().all()
    assert rows["runtime_spread"].tolist() == pytest.approx([0.3, 0.5, 0.0])
    assert rows["power_w"].isna().tolist() == [True, False, True] and rows.loc[
        1, "energy_j"
    ] == pytest.approx(0.061)
    assert list(rows["repeats"]) == [7, 7, 7]
    assert [DeviceSpec.model_validate(d).id for d in loaded.extra_devices] == ["test-cpu-1-threads"]


def test_bad_rows_are_rejected_with_their_reason(tmp_path):
    bad = [
        "0,32,16,fp32,false,false,test-cpu-1-threads,7,0.01,0.009,0.012,,,2026-11-01T00:00:00+00:00",
        "64,32,16,fp12,false,false,test-cpu-1-threads,7,0.01,0.009,0.012,,,2026-11-01T00:00:00+00:00",
        "64,32,16,fp32,maybe,false,test-cpu-1-threads,7,0.01,0.009,0.012,,,2026-11-01T00:00:00+00:00",
        "64,32,16,fp32,false,false,another-cpu,7,0.01,0.009,0.012,,,2026-11-01T00:00:00+00:00",
        "64,32,16,fp32,false,false,test-cpu-1-threads,7,-1,0.009,0.012,,,2026-11-01T00:00:00+00:00",
    ]
    loaded = local_gemm.load(write(tmp_path, GOOD * 2 + bad))
    assert len(loaded.rows) == 6
    assert loaded.rejects["row"].tolist() == [6, 7, 8, 9, 10]
    assert loaded.reject_counts() == {
        "m not a positive integer": 1,
        "dtype not a known dtype": 1,
        "trans_a not a boolean": 1,
        "device not 'test-cpu-1-threads', the one the side file describes": 1,
        "runtime_ms not positive": 1,
    }


def test_a_file_without_a_required_column_is_refused_naming_it(tmp_path):
    header = HEADER.replace(",runtime_p90_ms", "")
    lines = [
        line.replace(",0.012,", ",", 1).replace(",2.5,", ",", 1).replace(",0.5,,", ",,", 1) for line in GOOD
    ]
    with pytest.raises(DataError, match="runtime_p90_ms"):
        local_gemm.load(write(tmp_path, lines, header=header))


def test_a_missing_side_file_is_an_error_naming_where_it_was_expected(tmp_path):
    path = write(tmp_path, GOOD, spec=None)
    with pytest.raises(DataError, match="local_gemm.csv.device.json"):
        local_gemm.load(path)


def test_an_invalid_side_file_is_an_error(tmp_path):
    with pytest.raises(DataError, match="not a valid device spec"):
        local_gemm.load(write(tmp_path, GOOD, spec=SPEC | {"peak_tflops": {"fp16": 10.0}}))


def test_a_folder_of_sweeps_loads_as_one_table_with_each_device(tmp_path):
    first = write(tmp_path, GOOD)
    other = SPEC | {"id": "test-gpu", "name": "Test GPU", "kind": "gpu"}
    second = tmp_path / "gpu.csv"
    second.write_text("\n".join([HEADER, GOOD[0].replace("test-cpu-1-threads", "test-gpu"), "bad"]) + "\n")
    local_gemm.side_file(second).write_text(json.dumps(other))
    loaded = local_gemm.load(tmp_path)
    assert sorted(loaded.rows["device"]) == ["test-cpu-1-threads"] * 3 + ["test-gpu"]
    assert sorted(d["id"] for d in loaded.extra_devices) == ["test-cpu-1-threads", "test-gpu"]
    assert loaded.rejects["reason"].str.startswith("gpu.csv: ").all() and len(loaded.rejects) == 1
    assert loaded.sha256 != local_gemm.load(first).sha256


def test_an_empty_folder_is_refused(tmp_path):
    with pytest.raises(DataError, match="no collector CSV"):
        local_gemm.load(tmp_path)


def test_the_shipped_cpu_sweep_names_its_device_as_the_collector_names_a_slice():
    """The sheet the sweep brings into every home that trains on it: ``AMD EPYC (1 thread)``."""
    spec = local_gemm.read_device(local_gemm.SHIPPED / "local_gemm.csv")
    cpu = spec.name.rpartition(" (")[0]
    assert spec.compute_units == 1 and spec.name == host.slice_name(cpu, 1) == "AMD EPYC (1 thread)"
    assert spec.id == host.slice_id(cpu, 1)
