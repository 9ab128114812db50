"""hlsyn: HLS designs of 35 PolyBench/MachSuite kernels, each a setting of its pragmas, synthesized
for a Xilinx Alveo U200 with SDx 2018.3 (``v18``) and Vitis 2020.2 (``v20``) (HLSyn, github ZongyueQin/HLSyn,
CC BY-SA 4.0: not shipped).

``hlsyn_designs.csv`` holds a row per (tool, kernel, design): the pragma values (``pragmas``, JSON:
``__PARA__L<i>`` parallel factors, ``__PIPE__L<i>`` pipeline modes ``off``/``cg``/``fg``/``flatten``
or empty for Merlin's default pipeline, ``__TILE__L<i>`` tile factors), whether synthesis succeeded within
the device (``valid``), and for valid designs the latency in cycles and the LUT/FF/DSP/BRAM use as
fractions of the device. Each kernel's ProGraML graph lies beside the file in
``hlsyn_raw/graphs/<kernel>_processed_result.gexf`` (``graph``: its path, empty where absent;
``kernel_graph``), and its C source with the pragma placeholders in ``hlsyn_raw/sources/<kernel>_kernel.c``
(``code``: its path, empty where absent; ``kernel_source``).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
from preflight.data.fpga import BOARD, TOOLS
from preflight.data.tables import Loaded, RowChecks, file_sha256, numeric, read_csv

SOURCE = "hlsyn"
FILE = "fpga/hlsyn_designs.csv"
GRAPHS = Path("hlsyn_raw") / "graphs"
SOURCES = Path("hlsyn_raw") / "sources"
REQUIRED = ["tool_version", "kernel", "design_key", "valid", "perf_cycles", "util_LUT", "util_FF",
            "util_DSP", "util_BRAM", "pragmas"]  # fmt: skip
#: Published column -> canonical target (resources as fractions of the device).
TARGETS = {
    "perf_cycles": "cycles",
    "util_LUT": "lut",
    "util_FF": "ff",
    "util_DSP": "dsp",
    "util_BRAM": "bram",
}


def load(path: Path) -> Loaded:
    path = Path(path)
    raw = read_csv(path, REQUIRED, SOURCE)
    valid = raw["valid"].astype(str).str.lower().map({"true": True, "false": False, "1": True, "0": False})
    pragmas = raw["pragmas"].map(_pragmas)
    kernel = raw["kernel"].astype(str)
    rows = pd.DataFrame(
        {
            "tool": raw["tool_version"].astype(str),
            "kernel": kernel,
            "design": raw["design_key"].astype(str),
            "pragmas": pragmas.map(lambda p: json.dumps(p, sort_keys=True) if p is not None else ""),
            "valid": valid.astype(float),
            "graph": kernel.map(lambda k: kernel_graph(path.parent, k)),
            "code": kernel.map(lambda k: kernel_source(path.parent, k)),
            "device": BOARD,
        }
    )
    for column, target in TARGETS.items():  # only a design that fits has a latency and a footprint
        rows[target] = numeric(raw, column).where(valid.fillna(False).astype(bool))
    checks = RowChecks(len(rows))
    checks.reject(~rows["tool"].isin(TOOLS), f"tool_version is not one of {', '.join(TOOLS)}")
    checks.reject(valid.isna(), "valid is not true or false")
    checks.reject(pragmas.isna(), "pragmas is not a JSON object of knob values")
    checks.reject((valid == True) & ~(rows["cycles"] > 0), "valid design without a cycle count")  # noqa: E712
    resources = rows[["lut", "ff", "dsp", "bram"]].to_numpy(dtype=float)
    bad_resources = (valid == True).to_numpy() & ~np.all((resources >= 0) & (resources <= 1), axis=1)  # noqa: E712
    checks.reject(bad_resources, "a resource fraction outside [0, 1]")
    return checks.finish(SOURCE, rows, file_sha256(path), path)


def _pragmas(text: object) -> dict | None:
    """The design's knob values ({} for none); None if the text is not a JSON object."""
    try:
        value = json.loads(str(text))
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def kernel_graph(folder: Path, kernel: str) -> str:
    """The path of a kernel's graph beside a designs file in ``folder`` ("" if there is none):
    ``<kernel>_processed_result.gexf``, else the one MachSuite variant ``<kernel>_<variant>_...``
    (``stencil`` → ``stencil_stencil2d``)."""
    return _kernel_file(folder / GRAPHS, kernel, "_processed_result.gexf")


def kernel_source(folder: Path, kernel: str) -> str:
    """The path of a kernel's C source beside a designs file in ``folder`` ("" if there is none):
    ``<kernel>_kernel.c``, else the one MachSuite variant's (``stencil`` → ``stencil_stencil2d``)."""
    return _kernel_file(folder / SOURCES, kernel, "_kernel.c")


def _kernel_file(files: Path, kernel: str, suffix: str) -> str:
    exact = files / f"{kernel}{suffix}"
    if exact.is_file():
        return str(exact)
    variants = sorted(files.glob(f"{kernel}_*{suffix}"))
    return str(variants[0]) if len(variants) == 1 else ""
