"""Loaders, one module per public source or own profiler: ``path -> Loaded``.

A source is a module with a ``path -> Loaded`` function and one line here, or, for a source that
belongs to one task, a ``register`` call in that task's module.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from preflight.data.errors import DataError
from preflight.data.sources import (
    deepbench,
    ec_nas,
    gpperf,
    help_latency,
    hw_nas_bench_360,
    lcdb,
    local_curves,
    local_gemm,
    nas_bench_graph,
    uci_sgemm,
)
from preflight.data.tables import Loaded

#: source name -> (loader, its file: a name under PREFLIGHT_DATASETS, or the Path of a file shipped with
#: preflight)
LOADERS: dict[str, tuple[Callable[[Path], Loaded], str | Path]] = {
    "gpperf": (gpperf.load, "gemm/gpperf_cutlass_rtx4070.csv"),
    "deepbench": (deepbench.load, "gemm/deepbench_gemm.csv"),
    "uci-sgemm": (uci_sgemm.load, "gemm/uci_sgemm_gtx680.csv"),
    "local-gemm": (local_gemm.load, local_gemm.SHIPPED),
    "local-curves": (local_curves.load, local_curves.SHIPPED),
    "help-nb201": (help_latency.load_nb201, "nas/help_nb201_latency.csv"),
    "help-fbnet": (help_latency.load_fbnet, "nas/help_fbnet_latency.csv"),
    "hw-nas-bench-360": (hw_nas_bench_360.load, "nas/hw_nas_bench_360.parquet"),
    "nas-bench-graph": (nas_bench_graph.load, "nas/nas_bench_graph_light.csv"),
    "ec-nas": (ec_nas.load, "nas/ec_nas_bench_energy.csv"),
    "lcdb": (lcdb.load, "lcdb/database-accuracy.csv"),  # from the lcdb package (optional, large)
}


def register(source: str, loader: Callable[[Path], Loaded], file: str | Path) -> None:
    """Add a source: its loader, and its file (a name under PREFLIGHT_DATASETS, or a shipped Path)."""
    LOADERS[source] = (loader, file)


def load(source: str, path: Path) -> Loaded:
    """Load one source from a file in its published layout."""
    if source not in LOADERS:
        raise DataError(f"unknown source {source!r}; known sources: {', '.join(LOADERS)}")
    return LOADERS[source][0](Path(path))


def default_path(source: str, datasets: Path | None) -> Path | None:
    """Where a source's file lives by default: shipped with preflight, or under PREFLIGHT_DATASETS."""
    if source not in LOADERS:
        raise DataError(f"unknown source {source!r}; known sources: {', '.join(LOADERS)}")
    file = LOADERS[source][1]
    if isinstance(file, Path):
        return file if file.is_file() else None
    if datasets is None or not (Path(datasets) / file).is_file():
        return None
    return Path(datasets) / file
