"""GEMM features: work, traffic, the device's roofline, tile and wave quantization, spec-sheet facts.

Every feature is computable from a GEMM item and the device's spec sheet, so a model can answer for
a device it has no measurements of. Works on numpy arrays and builds each frame once: a scheduler's
single-item request pays for this on every call.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pandas as pd
from preflight.data.catalogue import Catalogue, DeviceSpec
from preflight.data.gemm import BYTES_PER_ELEMENT, KERNEL_FIELDS, Dtype
from preflight.features import Features, Pieces, device, distinct_rows, float_frame, labels, numbers

#: Tile assumed for wave quantization when no kernel configuration is given (typical cuBLAS tile).
DEFAULT_TILE = 128
_DTYPE_CODES = {d.value: i for i, d in enumerate(Dtype)}
#: Beyond this many waves of tiles, more waves change nothing: the count saturates so that trees never
#: meet a value past the training range.
MAX_WAVES = 256


def _quantization(
    b: np.ndarray, m: np.ndarray, n: np.ndarray, block_m, block_n, units: np.ndarray
) -> dict[str, np.ndarray]:
    """Output tiles in waves over the compute units: how full the last wave is, how much of each tile
    is padding (relative to the device, so the pattern carries from one GPU to the next)."""
    tiles = b * np.ceil(m / block_m) * np.ceil(n / block_n)
    waves = tiles / units
    return {
        "waves_log2": np.log2(np.minimum(waves, MAX_WAVES)),
        "wave_efficiency": waves / np.ceil(waves),
        "tile_efficiency": (b * m * n) / (tiles * block_m * block_n),
    }


def _tiling(kernel: dict[str, np.ndarray], element_bytes: np.ndarray) -> dict[str, np.ndarray]:
    """What a tiled kernel's knobs mean for one thread and one block (NaN where a knob is not given)."""
    threads = kernel["threads_m"] * kernel["threads_n"]
    rows_per_thread = kernel["block_m"] / kernel["threads_m"]
    cols_per_thread = kernel["block_n"] / kernel["threads_n"]
    staged = kernel["block_m"] * np.nan_to_num(kernel["cache_a"], nan=1) + kernel["block_n"] * np.nan_to_num(
        kernel["cache_b"], nan=1
    )
    return {
        "threads_log2": np.log2(threads),
        "thread_tile_log2": np.log2(rows_per_thread * cols_per_thread),
        "thread_tile_aspect_log2": np.log2(rows_per_thread / cols_per_thread),
        "shared_kb": staged * kernel["block_k"] * element_bytes / 1024,
        "loads_a_per_thread_log2": np.log2(
            kernel["block_m"] * kernel["block_k"] / (threads * kernel["vector_m"])
        ),
        "loads_b_per_thread_log2": np.log2(
            kernel["block_n"] * kernel["block_k"] / (threads * kernel["vector_n"])
        ),
    }


#: Output-tile edges assumed per dimension when no kernel configuration is given: libraries shrink
#: the tile for a thin matrix, so each edge is the dimension rounded up to a power of two, within these.
TILE_EDGE_RANGE = (32, DEFAULT_TILE)
#: Past this roofline time (µs) launch and ramp-up costs no longer matter: the feature saturates there.
SATURATION_US = 1e3
#: Directions physics fixes: log(runtime / roofline) cannot rise with the work per launch.
MONOTONE = {"runtime_ms": {"roofline_us_log2": -1}}
#: Architectures whose low-precision GEMMs run on matrix units (tensor cores, matrix cores, WMMA), by
#: the start of the catalogue's ``architecture``: a spec-sheet fact, the tensor-core generation.
MATRIX_ARCHITECTURES = ("volta", "turing", "ampere", "ada", "hopper", "blackwell", "cdna", "rdna 3")
#: Dtypes a matrix unit runs (fp32 GEMMs stay on the vector units in cuBLAS's default mode; fp64 runs on
#: them where the spec sheet gives an fp64 GEMM peak: the FP64 tensor cores of A100/H100-class parts).
MATRIX_DTYPES = frozenset({Dtype.fp16, Dtype.bf16, Dtype.tf32, Dtype.fp8, Dtype.int8})
#: A GEMM whose roofline time is at least this (µs) is large: launch and ramp-up no longer dominate.
LARGE_US = 100.0
#: The least time a kernel launch takes, by device kind (ms): the roofline's floor.
LAUNCH_FLOOR_MS = {"gpu": 2e-3}
#: How much faster than DRAM a working set that fits the last-level cache streams (L2 on a GPU, L3 on
#: a CPU: a stated prior, about 3-5x on current parts), so that the roofline stays a limit for it.
CACHE_SPEEDUP = 4.0
#: The meta column of the power roofline (``power_headroom_log2``): the physics prior and a whole model's
#: GEMM parts read it.
HEADROOM = "power_headroom_log2"
#: Energy per FLOP halves about every this many years of process nodes (a power roofline's clock).
NODE_HALVING_YEARS = 2.5
#: A matrix unit's FLOP costs about this fraction of a vector FMA's energy (operands fetched once
#: for a whole tile product): the stated prior that carries the power roofline to tensor cores.
MATRIX_ENERGY_SHARE = 1 / 8


def _library_tile(dim: np.ndarray) -> np.ndarray:
    return np.clip(2 ** np.ceil(np.log2(np.maximum(dim, 1))), *TILE_EDGE_RANGE)


def compute_unit(spec: DeviceSpec) -> str:
    """The design of a device's compute units: its architecture and the fp32 FLOPs one unit does per
    clock, to a power of two (an A100's SM does 128, an A10's 256: two chips of one architecture).
    Devices that share it run the same library kernels. The architecture alone where the sheet lacks
    the units or the clock."""
    architecture = spec.architecture or spec.id
    fp32 = spec.peak_tflops.get(Dtype.fp32)
    if not (fp32 and spec.compute_units and spec.boost_clock_mhz):
        return architecture
    per_clock = fp32 * 1e12 / (spec.compute_units * spec.boost_clock_mhz * 1e6)
    return f"{architecture}, {2 ** round(np.log2(per_clock))} FLOP/clock a unit"


#: Meta columns read off each row's spec sheet.
_META: dict[str, Callable[[DeviceSpec], str]] = {
    "device_id": lambda s: s.id,
    "device_kind": lambda s: s.kind,
    "architecture": lambda s: s.architecture or s.id,
    "compute_unit": compute_unit,
}


def _devices(names: np.ndarray, catalogue: Catalogue) -> tuple[np.ndarray, list[DeviceSpec]]:
    """Each row's index into the distinct devices' spec sheets (resolved once each, in order of first
    appearance, so an unknown device is named as a row-by-row pass would name it)."""
    index, distinct = pd.factorize(names, use_na_sentinel=False)
    return index, device.resolve(np.asarray(distinct), catalogue)


def _per_device_dtype(
    specs: list[DeviceSpec],
    device_index: np.ndarray,
    dtypes: np.ndarray,
    function: Callable[[DeviceSpec, Dtype], tuple[float, ...]],
) -> np.ndarray:
    """``function(spec, dtype)`` of each row, ``[rows, values]``, called once per distinct device and
    dtype."""
    dtype_index, distinct = pd.factorize(dtypes, use_na_sentinel=False)
    pair_index, pairs = pd.factorize(device_index * len(distinct) + dtype_index)
    values = [function(specs[p // len(distinct)], Dtype(distinct[p % len(distinct)])) for p in pairs.tolist()]
    return np.array(values, dtype=float).reshape(len(values), -1)[pair_index]


def _peaks(
    specs: list[DeviceSpec], device_index: np.ndarray, math_dtype: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Each row's dense GEMM peak (TFLOP/s) and whether it came from a fallback dtype (1.0)."""
    peaks = _per_device_dtype(specs, device_index, math_dtype, DeviceSpec.gemm_peak)
    return peaks[:, 0], peaks[:, 1]


def _working_dtypes(specs: list[DeviceSpec], device_index: np.ndarray, math_dtype: np.ndarray) -> np.ndarray:
    """Each row's working dtype (``DeviceSpec.working_dtype``): the dtype whose units run its GEMM (fp32 for
    a tf32 GEMM on a V100)."""
    codes = _per_device_dtype(
        specs, device_index, math_dtype, lambda spec, dtype: (_DTYPE_CODES[spec.working_dtype(dtype).value],)
    )
    return np.array([d.value for d in Dtype], dtype=object)[codes[:, 0].astype(int)]


def _each(values: np.ndarray, function: Callable[[str], float], dtype: type) -> np.ndarray:
    """``function`` of each row's value, called once per distinct value."""
    index, distinct = pd.factorize(values, use_na_sentinel=False)
    return np.array([function(v) for v in distinct], dtype=dtype)[index]


def _shapes(
    b: np.ndarray, m: np.ndarray, n: np.ndarray, k: np.ndarray
) -> np.ndarray | pd.api.extensions.ExtensionArray:
    """``MxNxK``, or ``BxMxNxK`` for a batch of more than one (spelt once per distinct shape)."""
    index, first = distinct_rows(b, m, n, k)
    spelt = [
        "x".join(f"{d:.0f}" for d in (dims if dims[0] > 1 else dims[1:]))  # "nan" for a gap
        for dims in zip(b[first], m[first], n[first], k[first])
    ]
    return labels(spelt, index)


def _matrix_units(specs: list[DeviceSpec], device_index: np.ndarray, math_dtype: np.ndarray) -> np.ndarray:
    """Whether each row's GEMM runs on matrix units (1.0): a low-precision dtype with a native peak (its
    own, or that of the dtype it falls back to), or fp64 with a GEMM peak of its own, on a GPU of a
    tensor-core generation."""

    def runs_on_matrix_units(spec: DeviceSpec, dtype: Dtype) -> tuple[float]:
        architecture, dtype = (spec.architecture or "").lower(), spec.working_dtype(dtype)
        matrix_dtype = (dtype in MATRIX_DTYPES and dtype in spec.peak_tflops) or (
            dtype == Dtype.fp64 and dtype in spec.gemm_peak_tflops
        )
        return (float(spec.kind == "gpu" and matrix_dtype and architecture.startswith(MATRIX_ARCHITECTURES)),)

    return _per_device_dtype(specs, device_index, math_dtype, runs_on_matrix_units)[:, 0]


def launch_floor_ms(kinds: np.ndarray) -> np.ndarray:
    """Each row's least kernel time by its device's kind (``LAUNCH_FLOOR_MS``; 0 for a kind without)."""
    return _each(kinds, lambda kind: LAUNCH_FLOOR_MS.get(kind, 0.0), float)


def power_headroom_log2(
    tdp_w: np.ndarray,
    peak_tflops: np.ndarray,
    vector_tflops: np.ndarray,
    year: np.ndarray,
    matrix: np.ndarray,
) -> np.ndarray:
    """log2 of the board's power over what its units would draw at full rate at its process node's
    energy per FLOP (normalised to 2016): a matrix unit's peak at ``MATRIX_ENERGY_SHARE`` of a vector
    FMA's energy, the vector units at their fp32 rate whatever the dtype (a packed fp16 FMA or a DP4A
    costs about one fp32 FMA's energy). Below about 4-5 a card cannot hold its boost clock at peak
    (T4, P4), which no peak on the sheet says. NaN without a TDP or year."""
    node = 2.0 ** (-(year - 2016) / NODE_HALVING_YEARS)
    draw = np.where(matrix > 0, peak_tflops * MATRIX_ENERGY_SHARE, vector_tflops) * node
    return np.log2(tdp_w / draw)


def _strata(
    kinds: np.ndarray, library: np.ndarray, roofline_ms: np.ndarray, matrix: np.ndarray
) -> np.ndarray:
    """Calibration strata, parent first (``gpu.library.large.matrix``): each kind of device errs
    differently, tuned-kernel sweeps differently from library calls, a large GEMM (its error is the
    device's efficiency) less than a small one (launch and shape effects), and matrix units (never
    measured in the shipped data) differently from vector units."""
    source = np.where(library, ".library", ".kernel")
    size = np.where(roofline_ms * 1e3 >= LARGE_US, ".large", ".small")
    units = np.where(matrix > 0, ".matrix", "")
    return np.char.add(np.char.add(np.char.add(kinds.astype(str), source), size), units)


def gemm_on_device(rows: pd.DataFrame, catalogue: Catalogue) -> Features:
    """Features for canonical GEMM rows (loaders' tables or API items as rows), with the other GEMMs
    a library could run each as (``_pieces``).

    Device facts enter only relative to the work (intensity over the ridge point, waves of output
    tiles over the compute units, working set over the cache, roofline time up to a saturation) or as
    dimensionless balance (the ridge point itself), so that a tree learns an efficiency that carries
    to hardware newer than any it was trained on; absolute spec values (peak, bandwidth, clock, SM
    count, year) would let it memorise the training devices instead. The shape's own sizes stay."""
    items = _Items.of(rows, catalogue)
    features = _gemm_features(items)
    features.pieces = _pieces(items)
    return features


@dataclass(frozen=True)
class _Items:
    """GEMM items as arrays, one per column: their own fields and what each one's device and dtype fix,
    read off its spec sheet once. A piece is its owner with other sides, so it takes its owner's
    (``pieces``), never looking them up again. The ``names`` that the features' ``meta`` carries as
    they are (device, dtype, kernel) are the items' own, held as a frame's columns hold them; pieces
    share them and keep only their ``root``, the item each one descends from (None: the items)."""

    columns: dict[str, np.ndarray]
    names: dict[str, np.ndarray | pd.api.extensions.ExtensionArray]
    root: np.ndarray | None = None

    @classmethod
    def of(cls, rows: pd.DataFrame, catalogue: Catalogue) -> _Items:
        """From canonical GEMM rows, each distinct device resolved once."""
        dtype = rows["dtype"].astype(str).to_numpy()
        math_dtype = (
            rows["math_dtype"].fillna(rows["dtype"]).astype(str).to_numpy() if "math_dtype" in rows else dtype
        )
        device_index, specs = _devices(rows["device"].to_numpy(), catalogue)
        peak, peak_is_fallback = _peaks(specs, device_index, math_dtype)
        kinds = np.array([s.kind for s in specs], dtype=object)[device_index]
        dies = np.array([s.dies or 1 for s in specs], dtype=float)[device_index]
        spec = {field: v[device_index] for field, v in device.spec_columns(specs).items()}
        kernel = rows["kernel"].astype(str).to_numpy() if "kernel" in rows else np.full(len(rows), "")
        names = {
            **{name: labels([value(s) for s in specs], device_index) for name, value in _META.items()},
            "kernel": labels(kernel),
            "dtype": labels(dtype),
            "math_dtype": labels(math_dtype),
            "working_dtype": labels(_working_dtypes(specs, device_index, math_dtype)),
        }
        return cls(
            {
                **{c: rows[c].to_numpy(dtype=float) for c in ("m", "n", "k", "trans_a", "trans_b")},
                "b": rows["b"].fillna(1).to_numpy(dtype=float) if "b" in rows else np.ones(len(rows)),
                **{f"kernel_{f}": numbers(rows, f) for f in KERNEL_FIELDS},
                **spec,
                "peak": peak * 1e12,
                "peak_is_fallback": peak_is_fallback,
                "matrix": _matrix_units(specs, device_index, math_dtype),
                "vector_peak": _peaks(specs, device_index, np.full(len(rows), Dtype.fp32.value))[0],
                "kind": kinds,
                # one GEMM runs on one die of a multi-die board
                "bandwidth": spec["memory_bandwidth_gbs"] * 1e9 / dies,
                "element_bytes": _each(dtype, lambda d: BYTES_PER_ELEMENT[Dtype(d)], float),
                "dtype_code": _each(dtype, _DTYPE_CODES.__getitem__, int),
                "math_dtype_code": _each(math_dtype, _DTYPE_CODES.__getitem__, int),
                "device_kind": device.kind_codes(specs)[device_index],
                "vendor": device.vendor_codes(specs)[device_index],
                "floor_ms": launch_floor_ms(kinds),
            },
            names,
        )

    def __getitem__(self, column: str) -> np.ndarray:
        return self.columns[column]

    def name(self, column: str) -> np.ndarray | pd.api.extensions.ExtensionArray:
        """Each row's value of one of the ``names``."""
        values = self.names[column]
        return values if self.root is None else values[self.root]

    def pieces(self, owner: np.ndarray, sides: dict[str, np.ndarray]) -> _Items:
        """The items of ``owner`` (positions) with the ``sides`` given (``m``, ``n``, ``k``)."""
        root = owner if self.root is None else self.root[owner]
        return _Items({c: v[owner] for c, v in self.columns.items()} | sides, self.names, root)

    @staticmethod
    def concat(levels: list[_Items]) -> _Items:
        """Pieces of the same items, one after the other."""
        columns = {c: np.concatenate([level[c] for level in levels]) for c in levels[0].columns}
        return _Items(columns, levels[0].names, np.concatenate([level.root for level in levels]))


def _pieces(items: _Items) -> Pieces | None:
    """Other GEMMs a library could run each item as, so that no estimate need exceed theirs:

    - a large GEMM (roofline past ``LARGE_US``, not 1 × 1 × 1) as its eighths, every side halved
      (rounded up), run one after the other: a larger GEMM of an aspect is never less efficient than a
      smaller one. Splitting K adds partial sums: each piece past a K-slice's first reads its output
      once more, at its own memory time for that share of its traffic.
    - a GEMM whose roofline is under its launch floor padded into its container, every side doubled:
      a small GEMM is never slower than a larger one that contains it.

    Pieces have pieces in turn (halves while large, containers while under the floor; a container's
    roofline stays under ``LARGE_US``, so the two never meet), featurized together once every depth
    is known. None where no row has any."""
    levels, owners, counts, extras = [], [], [], []
    level, begin, total = items, 0, 0  # begin: where ``level``'s rows start among the pieces
    while (split := _split(level)) is not None:
        owner, side = split
        piece = level.pieces(owner, side)
        along = {c: np.ceil(level[c][owner] / side[c]) for c in side}  # 1 for a container
        m, n, k = side["m"], side["n"], side["k"]
        rereads = (along["k"] - 1) * along["m"] * along["n"]
        memory_ms = _roofline(piece).memory_s * 1e3
        levels.append(piece)
        owners.append(owner + begin)
        counts.append(along["m"] * along["n"] * along["k"])
        extras.append(rereads * memory_ms * m * n / (m * k + k * n + m * n))
        level, begin, total = piece, total, total + len(owner)
    if not levels:
        return None
    depth = np.concatenate([np.full(len(o), d, dtype=np.int64) for d, o in enumerate(owners, start=1)])
    features = _gemm_features(_Items.concat(levels))
    return Pieces(features, np.concatenate(owners), depth, np.concatenate(counts), np.concatenate(extras))


def _split(items: _Items) -> tuple[np.ndarray, dict[str, np.ndarray]] | None:
    """The rows with pieces (``_pieces``: the large ones halved, then those under the floor padded) and
    their pieces' sides; None where no row has any."""
    whole = {c: items[c] for c in ("m", "n", "k")}
    terms = _roofline(items)
    roofline_ms = np.fmax(terms.compute_s * 1e3, terms.memory_s * 1e3)
    large = (roofline_ms * 1e3 >= LARGE_US) & (np.fmax(np.fmax(whole["m"], whole["n"]), whole["k"]) > 1)
    halved, padded = np.flatnonzero(large), np.flatnonzero(roofline_ms < items["floor_ms"])
    if not len(halved) and not len(padded):
        return None
    side = {c: np.concatenate([np.ceil(v[halved] / 2), 2 * v[padded]]) for c, v in whole.items()}
    return np.concatenate([halved, padded]), side


class _Roofline(NamedTuple):
    """A GEMM's work and traffic, and the time each takes at the device's peak: the performance law's
    terms."""

    flops: np.ndarray
    traffic: np.ndarray
    llc_bytes: np.ndarray
    compute_s: np.ndarray
    memory_s: np.ndarray


def _roofline(items: _Items) -> _Roofline:
    m, n, k, b = (items[c] for c in ("m", "n", "k", "b"))
    flops = 2 * b * m * n * k
    # inputs read once, the output written once in the operands' type: the least a library moves (an
    # fp16 GEMM writing fp32 moves more), so the roofline stays a limit (H200 fp16 runs at 0.73 of the
    # bound that counted a 4-byte output)
    traffic = b * items["element_bytes"] * (m * k + k * n + m * n)
    llc_bytes = items["llc_mb"] * 2**20
    # a working set that fits the last-level cache streams from it, faster than from DRAM
    cached = np.nan_to_num(traffic / b) <= np.nan_to_num(llc_bytes)
    compute_s = flops / items["peak"]
    memory_s = traffic / (items["bandwidth"] * np.where(cached, CACHE_SPEEDUP, 1.0))
    return _Roofline(flops, traffic, llc_bytes, compute_s, memory_s)


def _gemm_features(items: _Items) -> Features:
    m, n, k, b = (items[c] for c in ("m", "n", "k", "b"))
    peak, bandwidth, element_bytes = items["peak"], items["bandwidth"], items["element_bytes"]
    flops, traffic, llc_bytes, compute_s, memory_s = _roofline(items)
    roofline_ms = np.maximum(compute_s, memory_s) * 1e3
    units = items["compute_units"]
    kernel = {f: items[f"kernel_{f}"] for f in KERNEL_FIELDS}
    tile_m, tile_n = _library_tile(m), _library_tile(n)
    tile_flops, tile_bytes = (
        2 * tile_m * tile_n * k,
        element_bytes * k * (tile_m + tile_n) + 4 * tile_m * tile_n,
    )

    X = float_frame(
        {
            "m_log2": np.log2(m),
            "n_log2": np.log2(n),
            "k_log2": np.log2(k),
            "min_dim_log2": np.log2(np.minimum(np.minimum(m, n), k)),
            "aspect_log2": np.log2(m / n),
            "intensity_log2": np.log2(flops / traffic),
            "intensity_over_ridge_log2": np.log2((flops / traffic) / (peak / bandwidth)),
            "tile_intensity_over_ridge_log2": np.log2((tile_flops / tile_bytes) / (peak / bandwidth)),
            "roofline_us_log2": np.log2(np.minimum(roofline_ms * 1e3, SATURATION_US)),
            "working_set_over_llc_log2": np.log2(traffic / b / llc_bytes),
            # the device's balance (FLOP per byte at its ridge point): a dimensionless property, and the
            # handle by which measurements of one device adapt the model to it (few-shot refits)
            "ridge_log2": np.log2(peak / bandwidth),
            "dtype": items["dtype_code"],
            "math_dtype": items["math_dtype_code"],
            "element_bytes": element_bytes,
            "batched": (b > 1).astype(float),
            "trans_a": items["trans_a"],
            "trans_b": items["trans_b"],
            "peak_is_fallback": items["peak_is_fallback"],
            "bound_by_compute": (compute_s >= memory_s).astype(float),
            "device_kind": items["device_kind"],
            "vendor": items["vendor"],
            "library_tile_m_log2": np.log2(tile_m),
            "library_tile_n_log2": np.log2(tile_n),
            **{f"library_{name}": v for name, v in _quantization(b, m, n, tile_m, tile_n, units).items()},
            **{f"kernel_{f}": v for f, v in kernel.items()},
            **{
                f"kernel_{name}": v
                for name, v in _quantization(b, m, n, kernel["block_m"], kernel["block_n"], units).items()
            },
            **{f"kernel_{name}": v for name, v in _tiling(kernel, element_bytes).items()},
        }
    )
    limit_ms = np.maximum(roofline_ms, items["floor_ms"])
    reference = float_frame(
        {"runtime_ms": limit_ms, "power_w": items["tdp_w"], "energy_j": roofline_ms * items["tdp_w"] / 1e3}
    )
    meta = pd.DataFrame(
        {
            **{name: items.name(name) for name in _META},
            "shape": _shapes(b, m, n, k),
            "kernel": items.name("kernel"),
            "dtype": items.name("dtype"),
            "stratum": _strata(items["kind"], np.isnan(kernel["block_m"]), roofline_ms, items["matrix"]),
            # the performance law's terms, for the physics family
            "compute_ms": compute_s * 1e3,
            "memory_ms": memory_s * 1e3,
            "matrix_units": items["matrix"],
            HEADROOM: power_headroom_log2(
                items["tdp_w"], peak / 1e12, items["vector_peak"], items["year"], items["matrix"]
            ),
            "math_dtype": items.name("math_dtype"),
            "working_dtype": items.name("working_dtype"),
        }
    )
    return Features(X=X, reference=reference, meta=meta, monotone=MONOTONE)
