"""NeuSight's whole-model traces (ASPLOS'25, github sitar-lab/NeuSight, MIT): one row per traced run.

Layout: ``traces/<GPU_DIR>/<model>-<inf|train>-<seq>-<batch>.csv`` beside a ``.json``, and
``device_configs/<GPU_DIR>.json`` (spec sheets). The csv is a ``torch.fx`` trace of the model built with
ONE transformer layer (layer 0), the embedding before it and the head after, each operator timed alone
(best 5 of 25 runs). The json holds the whole model's ``num_layer`` and measured ``e2e_latency`` =
``fw_latency`` + ``bwall_latency`` (ms; training times the forward pass with autograd recording, then
``loss.backward()``).

The layer block runs from the first operator of a layer-0 module up to the first other module after the
last one (final norm, LM head, pooler...); its operators run ``num_layer`` times, the rest once. In the
csv, ``latency`` = ``fw_latency`` + ``bw_latency`` + ``acc_latency`` (the last: gradient accumulation
into parameters), so the row's ``ops`` keep ``latency_ms`` = forward and ``bw_latency_ms`` = backward +
accumulation: observed targets, never features.

A ``.json`` without its ``.csv`` (multi-GPU runs, Switch models NeuSight could not trace) and the
``*-fusion.json`` runs (torch.compile) are not traces and are skipped.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from preflight.data.catalogue import DeviceSpec
from preflight.data.errors import DataError
from preflight.data.gemm import Dtype
from preflight.data.model_latency import OPS, OperatorSpec
from preflight.data.tables import Loaded, RowChecks, files_sha256
from pydantic import ValidationError

SOURCE = "neusight-traces"
COLUMNS = [
    "device",
    "model",
    "mode",
    "seq",
    "batch",
    "dtype",
    "latency_ms",
    "fw_latency_ms",
    "bw_latency_ms",
    "num_layer",
    "ops",
]
REQUIRED = ["op", "target", "meta", "input_shapes", "output_shape", "fw_latency", "dtype"]
TRACE_NAME = re.compile(r"^(?P<model>.+)-(?P<mode>inf|train)-(?P<seq>\d+)-(?P<batch>\d+)$")
#: torch.nn module class (the last entry of a node's ``nn_module_stack``) -> operator.
MODULE_OPS = {
    "Linear": "linear",
    "Conv1D": "linear",
    "LayerNorm": "layer_norm",
    "Embedding": "embedding",
    "Dropout": "dropout",
    "Tanh": "tanh",
    "ReLU": "relu",
    "GELU": "gelu",
    "Softmax": "softmax",
}
TORCH_DTYPES = {"torch.float32": "fp32", "torch.float16": "fp16", "torch.bfloat16": "bf16"}
#: fx nodes that are not operators: graph inputs, parameters, the output.
NOT_OPERATORS = ("placeholder", "get_attr", "output")
_FUNCTION = re.compile(r"^<(?:built-in (?:method|function)|function|class) '?(?:torch\.)?(\w+)")
_MODULE_CLASS = re.compile(r"<class '[\w.]*?(\w+)'>")
_VENDORS = {"nvidia": "nvidia", "tesla": "nvidia", "geforce": "nvidia", "amd": "amd", "instinct": "amd"}


class _Rejected(Exception):
    """A trace that cannot be used; the message is the reject reason."""


def _operator(node: dict[str, Any]) -> str:
    """The operator an fx node runs: a method's name, a function's name, or a module's class."""
    target = str(node["target"])
    if node["op"] == "call_module":
        classes = _MODULE_CLASS.findall(str(node["meta"]))
        if not classes or classes[-1] not in MODULE_OPS:
            raise _Rejected(f"module class {classes[-1] if classes else '?'} not understood")
        return MODULE_OPS[classes[-1]]
    match = _FUNCTION.match(target)
    return match.group(1) if node["op"] == "call_function" and match else target


def _layer_block(nodes: pd.DataFrame) -> tuple[int, int]:
    """[start, end) positions of the layer-0 block."""
    named = nodes["op"].isin(["call_module", "get_attr"]).to_numpy()
    target = nodes["target"].astype(str)
    layer0 = named & target.str.contains(r"(?:^|\.)0\.").to_numpy()
    if not layer0.any():
        raise _Rejected("no layer-0 module in the trace")
    if (named & target.str.contains(r"\.[1-9]\d*\.").to_numpy()).any():
        raise _Rejected("trace holds more than layer 0")
    first, last = np.flatnonzero(layer0)[[0, -1]]
    after = np.flatnonzero(named & ~layer0)
    after = after[after > last]
    return int(first), int(after[0]) if len(after) else len(nodes)


def _shape(text: Any) -> list:
    """A shape column: JSON lists for inputs, a Python tuple for the output."""
    return json.loads(str(text).replace("(", "[").replace(")", "]").replace(",]", "]"))


def _latencies(nodes: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Observed forward and backward (+ gradient accumulation) ms per node; absent columns are zero."""
    ms = {
        c: pd.to_numeric(nodes[c], errors="coerce").to_numpy(float) if c in nodes else np.zeros(len(nodes))
        for c in ("fw_latency", "bw_latency", "acc_latency")
    }
    fw, bw = ms["fw_latency"], ms["bw_latency"] + ms["acc_latency"]
    if not (np.isfinite(fw) & np.isfinite(bw) & (fw >= 0) & (bw >= 0)).all():
        raise _Rejected("operator latency not a non-negative number")
    return fw, bw


def _ops(nodes: pd.DataFrame, num_layer: int) -> list[dict[str, Any]]:
    """The trace's operators with their multiplicity and observed latencies."""
    start, end = _layer_block(nodes)
    fw, bw = _latencies(nodes)
    records = nodes[["op", "target", "meta", "input_shapes", "output_shape"]].to_dict("records")
    ops = []
    for position, node in enumerate(records):
        if node["op"] in NOT_OPERATORS:
            continue
        op = _operator(node)
        if op not in OPS:
            raise _Rejected(f"operator {op!r} not in the vocabulary")
        try:
            spec = OperatorSpec(
                op=op,
                input_shapes=_shape(node["input_shapes"]),
                output_shape=_shape(node["output_shape"]),
                count=num_layer if start <= position < end else 1,
            )
        except (ValidationError, json.JSONDecodeError) as exc:
            raise _Rejected("operator shapes not readable") from exc
        ops.append(
            spec.model_dump() | {"latency_ms": float(fw[position]), "bw_latency_ms": float(bw[position])}
        )
    return ops


def _dtype(nodes: pd.DataFrame) -> str:
    floats = {t for t in nodes["dtype"].dropna().astype(str) if "float" in t}
    if len(floats) != 1 or next(iter(floats)) not in TORCH_DTYPES:
        raise _Rejected(f"float dtype mixed, missing or unknown ({sorted(floats)})")
    return TORCH_DTYPES[floats.pop()]


def _summary(path: Path) -> dict[str, Any]:
    """The run's json: layers and end-to-end latencies (ms)."""
    if not path.is_file():
        raise _Rejected("no .json beside the trace")
    try:
        summary = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise _Rejected("json not readable") from exc
    if not isinstance(summary, dict) or "e2e_latency" not in summary:
        raise _Rejected("json lacks e2e_latency")
    values = {
        k: summary.get(k, math.nan) for k in ("num_layer", "e2e_latency", "fw_latency", "bwall_latency")
    }
    if not all(isinstance(v, int | float) for v in values.values()):
        raise _Rejected("json latencies not numbers")
    if not values["e2e_latency"] > 0:
        raise _Rejected("e2e_latency not positive")
    if not (isinstance(values["num_layer"], int) and values["num_layer"] > 0):
        raise _Rejected("num_layer not a positive integer")
    return values


def _stem(csv: Path) -> str:
    """The run's name: the trace file's name without ``.csv`` or ``.csv.gz`` (a compressed extract)."""
    return csv.name.removesuffix(".gz").removesuffix(".csv")


def _summary_path(csv: Path) -> Path:
    return csv.with_name(f"{_stem(csv)}.json")


def _row(csv: Path, device: str | None) -> dict[str, Any]:
    """One trace as a row, or _Rejected."""
    if device is None:
        raise _Rejected("device_configs json not readable")
    name = TRACE_NAME.match(_stem(csv))
    if name is None:
        raise _Rejected("file name not <model>-<inf|train>-<seq>-<batch>")
    summary = _summary(_summary_path(csv))
    try:
        nodes = pd.read_csv(csv, low_memory=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise _Rejected("csv not readable") from exc
    if missing := [c for c in REQUIRED if c not in nodes.columns]:
        raise _Rejected(f"csv lacks columns {missing}")
    if name["mode"] == "train" and not summary["bwall_latency"] > 0:
        raise _Rejected("training run without a backward latency")
    return {
        "device": device,
        "model": name["model"],
        "mode": name["mode"],
        "seq": int(name["seq"]),
        "batch": int(name["batch"]),
        "dtype": _dtype(nodes),
        "latency_ms": float(summary["e2e_latency"]),
        "fw_latency_ms": float(summary["fw_latency"]),
        "bw_latency_ms": float(summary["bwall_latency"]),
        "num_layer": summary["num_layer"],
        "ops": json.dumps(_ops(nodes, summary["num_layer"]), separators=(",", ":")),
    }


def _device_config(root: Path, gpu_dir: str) -> dict[str, Any] | None:
    path = root / "device_configs" / f"{gpu_dir}.json"
    if not path.is_file():
        return None
    try:
        config = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataError(f"{SOURCE}: {path} is not readable JSON: {exc}") from exc
    if not isinstance(config, dict):
        raise DataError(f"{SOURCE}: {path} is not a spec sheet (a JSON object)")
    return config


def _name(gpu_dir: str, config: dict[str, Any]) -> str:
    """NeuSight's device name: the spec sheet's ``Device``, else the directory with spaces."""
    return str(config.get("Device") or gpu_dir.replace("_", " "))


def _device_name(root: Path, gpu_dir: str) -> str | None:
    """The device a trace folder was measured on; None when its spec sheet is there but unreadable."""
    try:
        return _name(gpu_dir, _device_config(root, gpu_dir) or {})
    except DataError:
        return None


def _traces(path: Path) -> list[Path]:
    if not (path / "traces").is_dir():
        raise DataError(f"{SOURCE}: no traces/ folder under {path}; is it NeuSight's layout?")
    found = sorted(p for pattern in ("*/*.csv", "*/*.csv.gz") for p in (path / "traces").glob(pattern))
    if not found:
        raise DataError(f"{SOURCE}: no traces (traces/<GPU>/<model>-<mode>-<seq>-<batch>.csv) under {path}")
    return found


def load(path: Path) -> Loaded:
    path = Path(path)
    csvs = _traces(path)
    devices = {d: _device_name(path, d) for d in sorted({csv.parent.name for csv in csvs})}
    rows: list[dict[str, Any]] = []
    reasons: list[str | None] = []
    for csv in csvs:
        try:
            rows.append(_row(csv, devices[csv.parent.name]))
            reasons.append(None)
        except _Rejected as exc:
            rows.append({})
            reasons.append(str(exc))
    checks = RowChecks(len(rows))
    for reason in sorted({r for r in reasons if r is not None}):
        checks.reject(np.array([r == reason for r in reasons]), reason)
    read = [p for csv in csvs for p in (csv, _summary_path(csv)) if p.is_file()]
    read += [c for d in devices if (c := path / "device_configs" / f"{d}.json").is_file()]
    loaded = checks.finish(SOURCE, pd.DataFrame(rows, columns=COLUMNS), files_sha256(path, read), path)
    loaded.rows = loaded.rows.astype({"seq": "int64", "batch": "int64", "num_layer": "int64"})
    loaded.rejects["file"] = [csvs[i].relative_to(path).as_posix() for i in loaded.rejects["row"]]
    loaded.extra_devices = [spec.model_dump(mode="json", exclude_none=True) for spec in device_specs(path)]
    return loaded


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9._-]+", "-", name.lower()).strip("-._")


def _spec(gpu_dir: str, config: dict[str, Any]) -> DeviceSpec:
    name = _name(gpu_dir, config)
    words = re.findall(r"[a-z]+", name.lower())
    vendor = next((_VENDORS[w] for w in words if w in _VENDORS), "unknown")
    fp32 = config.get("SingleFLOPsMM", config.get("SingleFLOPs"))
    return DeviceSpec(
        id=_slug(name),
        name=name,
        vendor=vendor,
        kind="gpu",
        aliases=list(dict.fromkeys([name, gpu_dir])),
        compute_units=config.get("Num_Sm"),
        boost_clock_mhz=config.get("Freq"),
        memory_gb=config.get("Dev_Mem"),
        memory_bandwidth_gbs=config.get("Mem_Bw"),
        llc_mb=config.get("L2Cache"),
        peak_tflops={Dtype.fp32: fp32 / 1000} if fp32 else {},
    )


def device_specs(path: Path) -> list[DeviceSpec]:
    """Spec sheets (``device_configs/<GPU_DIR>.json``) of the GPUs that have traces.

    Sheets without a ``traces/<GPU_DIR>`` folder are left out: NeuSight's ``*_TP`` sheet describes a
    tensor-parallel group (memory, bandwidth and peak summed), not one device. An unreadable sheet is
    left out too: its traces are rejected by ``load`` with that reason.
    """
    path = Path(path)
    specs = []
    for gpu_dir in sorted(p.name for p in (path / "traces").glob("*") if p.is_dir()):
        try:
            config = _device_config(path, gpu_dir)
        except DataError:
            continue
        if config is None:
            continue
        try:
            specs.append(_spec(gpu_dir, config))
        except (ValidationError, TypeError) as exc:
            raise DataError(
                f"{SOURCE}: device_configs/{gpu_dir}.json is not a usable spec sheet: {exc}"
            ) from exc
    return specs
