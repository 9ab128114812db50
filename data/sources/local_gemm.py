"""local-gemm: GEMMs timed by ``preflight collect gemm`` (``data/collect/gemm.py``).

A file is a CSV with one measured point per line; beside it, ``<file>.device.json`` holds the
spec sheet of the device that was measured, which travels with the rows as an extra device. A folder
of such files (one per device or sweep, as a lab collects them) loads as one table.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from preflight.data.catalogue import DeviceSpec
from preflight.data.errors import DataError
from preflight.data.gemm import Dtype
from preflight.data.sources._gemm import check_gemm, gemm_frame
from preflight.data.tables import Loaded, RowChecks, file_sha256, files_sha256, numeric, read_csv
from pydantic import ValidationError

SOURCE = "local-gemm"
#: The sweeps measured by the project and shipped with preflight: its own CPU, and an H100's and an
#: H200's tensor cores.
SHIPPED = Path(__file__).resolve().parents[1] / "local" / "gemm"
#: The layout the collector writes, in order; the loader needs every column.
COLUMNS = [
    "m",
    "n",
    "k",
    "dtype",
    "trans_a",
    "trans_b",
    "device",
    "repeats",
    "runtime_ms",
    "runtime_p10_ms",
    "runtime_p90_ms",
    "power_w",
    "energy_j",
    "collected_at",
]
_BOOLEANS = {"true": True, "false": False, "1": True, "0": False}


def side_file(path: Path) -> Path:
    """Where the spec sheet of the measured device lies: ``<path>.device.json``."""
    path = Path(path)
    return path.with_name(path.name + ".device.json")


def read_device(path: Path) -> DeviceSpec:
    """The measured device's spec sheet from the side file beside ``path``."""
    spec_path = side_file(path)
    if not spec_path.is_file():
        raise DataError(f"{SOURCE}: no device spec beside {path}; expected {spec_path}")
    try:
        return DeviceSpec.model_validate(json.loads(spec_path.read_text()))
    except (json.JSONDecodeError, ValidationError) as exc:
        raise DataError(f"{SOURCE}: {spec_path} is not a valid device spec: {exc}") from exc


def _flags(column: pd.Series) -> pd.Series:
    """Booleans from true/false/1/0 text; NaN where the text is none of these."""
    return column.astype(str).str.strip().str.lower().map(_BOOLEANS)


def load(path: Path) -> Loaded:
    """One collector file, or every ``*.csv`` in a folder of them as one table (rejects name their file)."""
    path = Path(path)
    if not path.is_dir():
        return _load_file(path)
    files = sorted(path.glob("*.csv"))
    if not files:
        raise DataError(f"{SOURCE}: no collector CSV in {path}")
    parts = [_load_file(file) for file in files]
    sheets = {sheet["id"]: sheet for part in parts for sheet in part.extra_devices}
    return Loaded(
        source=SOURCE,
        rows=pd.concat([part.rows for part in parts], ignore_index=True),
        rejects=pd.concat(
            [
                part.rejects.assign(reason=f"{file.name}: " + part.rejects["reason"])
                for file, part in zip(files, parts)
            ],
            ignore_index=True,
        ),
        sha256=files_sha256(path, files),
        extra_devices=list(sheets.values()),
    )


def _load_file(path: Path) -> Loaded:
    raw = read_csv(path, COLUMNS, SOURCE)
    device = read_device(path)
    trans_a, trans_b = _flags(raw["trans_a"]), _flags(raw["trans_b"])
    runtime_ms = numeric(raw, "runtime_ms")
    rows = gemm_frame(
        m=raw["m"],
        n=raw["n"],
        k=raw["k"],
        dtype=raw["dtype"],
        math_dtype=raw["dtype"],
        trans_a=trans_a.fillna(False).astype(bool),
        trans_b=trans_b.fillna(False).astype(bool),
        device=raw["device"],
        runtime_ms=runtime_ms,
        power_w=numeric(raw, "power_w"),
        energy_j=numeric(raw, "energy_j"),
        repeats=numeric(raw, "repeats"),
        runtime_spread=(numeric(raw, "runtime_p90_ms") - numeric(raw, "runtime_p10_ms")) / runtime_ms,
    )
    checks = RowChecks(len(raw))
    checks.reject(~raw["dtype"].isin([d.value for d in Dtype]), "dtype not a known dtype")
    checks.reject(trans_a.isna(), "trans_a not a boolean")
    checks.reject(trans_b.isna(), "trans_b not a boolean")
    checks.reject(raw["device"] != device.id, f"device not {device.id!r}, the one the side file describes")
    check_gemm(rows, checks)
    loaded = checks.finish(SOURCE, rows, file_sha256(path), path)
    loaded.extra_devices = [device.model_dump(mode="json", exclude_none=True)]
    return loaded
