"""NAS-Bench-Graph (Apache-2.0): GNN architectures (link pattern + 4 ops) on 9 graph datasets.

The published latency comes from the benchmark's own machine, which the file does not name:
``device`` is left empty.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from preflight.data.sources._nas import check_nas, nas_frame
from preflight.data.tables import Loaded, RowChecks, file_sha256, numeric, read_csv

OPS = ["op1", "op2", "op3", "op4"]


def load(path: Path) -> Loaded:
    raw = read_csv(
        path,
        ["dataset", "arch_hash", "link", *OPS, "valid_perf", "test_perf", "latency_s"],
        "nas-bench-graph",
    )
    arch = [
        json.dumps({"link": str(link), "ops": list(ops)})
        for link, ops in zip(raw["link"], raw[OPS].astype(str).to_numpy())
    ]
    rows = nas_frame(
        space=["nasbench-graph"] * len(raw),
        arch=pd.Series(arch),
        arch_group=raw["arch_hash"].astype(str),
        dataset=raw["dataset"],
        latency_ms=numeric(raw, "latency_s") * 1e3,
        accuracy=numeric(raw, "test_perf"),
        valid_accuracy=numeric(raw, "valid_perf"),
        params_m=numeric(raw, "params_M") if "params_M" in raw else None,
    )
    checks = RowChecks(len(raw))
    check_nas(rows, checks, "nasbench-graph")
    return checks.finish("nas-bench-graph", rows, file_sha256(path), path)
