"""Loaders, one module per public source or own profiler: ``path -> Loaded``.

A source is a module with a ``path -> Loaded`` function and one line here, or, for a source that
belongs to one task, a ``register`` call in that task's module. Sources whose licence allows it ship
a compressed extract under ``data/public/`` (with the licence), used when PREFLIGHT_DATASETS has none.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from preflight.data.errors import DataError
from preflight.data.sources import (
    cloudprophet,
    deepbench,
    ec_nas,
    gpperf,
    help_latency,
    hlsyn,
    hw_nas_bench_360,
    lcdb,
    local_curves,
    local_gemm,
    local_interference,
    marla,
    nas_bench_graph,
    neusight,
    neusight_traces,
    uci_sgemm,
)
from preflight.data.tables import Loaded

#: Public extracts shipped inside the package (licences beside them), the embedded default when no
#: PREFLIGHT_DATASETS copy is at hand.
PUBLIC = Path(__file__).resolve().parents[1] / "public"


@dataclass(frozen=True)
class Source:
    """A loader and where its data is found: ``file`` under PREFLIGHT_DATASETS (preferred), else the
    ``shipped`` copy inside the package."""

    loader: Callable[[Path], Loaded]
    file: str | None = None
    shipped: Path | None = None


LOADERS: dict[str, Source] = {
    "gpperf": Source(gpperf.load, "gemm/gpperf_cutlass_rtx4070.csv"),
    "deepbench": Source(
        deepbench.load, "gemm/deepbench_gemm.csv", PUBLIC / "deepbench" / "deepbench_gemm.csv.gz"
    ),
    "uci-sgemm": Source(uci_sgemm.load, "gemm/uci_sgemm_gtx680.csv"),
    "neusight": Source(
        neusight.load, "gemm/neusight/gemm_train.csv", PUBLIC / "neusight" / "gemm_train.csv.gz"
    ),
    "neusight-traces": Source(neusight_traces.load, "gemm/neusight", PUBLIC / "neusight"),
    "neusight-elementwise": Source(
        neusight.load_elementwise,
        "gemm/neusight/elementwise_train.csv",
        PUBLIC / "neusight" / "elementwise_train.csv.gz",
    ),
    "local-gemm": Source(local_gemm.load, shipped=local_gemm.SHIPPED),
    "local-curves": Source(local_curves.load, shipped=local_curves.SHIPPED),
    "help-nb201": Source(
        help_latency.load_nb201,
        "nas/help_nb201_latency.csv",
        PUBLIC / "help" / "help_nb201_latency.csv.gz",
    ),
    "help-fbnet": Source(help_latency.load_fbnet, "nas/help_fbnet_latency.csv"),
    "hw-nas-bench-360": Source(
        hw_nas_bench_360.load, "nas/hw_nas_bench_360.parquet"
    ),  # no licence: never shipped
    "nas-bench-graph": Source(
        nas_bench_graph.load,
        "nas/nas_bench_graph_light.csv",
        PUBLIC / "nas_bench_graph" / "nas_bench_graph_light.csv.gz",
    ),
    "ec-nas": Source(
        ec_nas.load, "nas/ec_nas_bench_energy.csv", PUBLIC / "ec_nas_bench" / "ec_nas_bench_energy.csv.gz"
    ),
    "hlsyn": Source(hlsyn.load, hlsyn.FILE),  # CC BY-SA: not shipped
    "marla": Source(marla.load, marla.FILE),  # no licence: never shipped
    "cloudprophet": Source(cloudprophet.load, cloudprophet.FILE),  # CC BY-SA: not shipped
    "local-interference": Source(local_interference.load, shipped=local_interference.SHIPPED),
    "lcdb": Source(lcdb.load, "lcdb/database-accuracy.csv"),  # from the lcdb package (optional, large)
}


def register(
    source: str, loader: Callable[[Path], Loaded], file: str | None = None, shipped: Path | None = None
) -> None:
    """Add a source: its loader, its file under PREFLIGHT_DATASETS and/or its shipped copy."""
    LOADERS[source] = Source(loader, file, shipped)


def _known(source: str) -> Source:
    if source not in LOADERS:
        raise DataError(f"unknown source {source!r}; known sources: {', '.join(LOADERS)}")
    return LOADERS[source]


def load(source: str, path: Path) -> Loaded:
    """Load one source from a file (or folder) in its published layout."""
    return _known(source).loader(Path(path))


def default_path(source: str, datasets: Path | None) -> Path | None:
    """Where a source's data lives by default: under PREFLIGHT_DATASETS, else shipped with preflight."""
    entry = _known(source)
    if entry.file is not None and datasets is not None and (Path(datasets) / entry.file).exists():
        return Path(datasets) / entry.file
    return entry.shipped if entry.shipped is not None and entry.shipped.exists() else None
