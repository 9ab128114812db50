"""A performance law with learned parts: per-device physical parameters and a bounded shape term.

For a GEMM on device ``d`` in dtype ``τ`` (a *unit*)::

    time = ‖(t0, ‖(C / η_c, M / η_m)‖₈ / g(shape)^α)‖_q

``C`` and ``M`` are the spec sheet's compute and memory times (work over the dtype's GEMM peak,
traffic over the bandwidth; ``compute_ms``/``memory_ms`` of the featurizer's meta), ``η_c, η_m ∈
(0, 1]`` the unit's achievable compute and bandwidth efficiency, ``t0`` its launch floor, and
``g ∈ (0, 1]`` a shape term learned across devices by a tree, monotone non-decreasing in the size
of the work (``SHAPE_MONOTONE``), and ``α > 0`` the unit's ramp: how steeply its efficiency follows
that shape. The Hoppers' tensor cores fit α ≈ 0.25: their boards sit at the 700 W cap from about
10 GFLOP on (the shipped power sweeps), so their large GEMMs gain far less over their medium ones than
a vector unit's do. The 8-norm is a smooth ``max`` that is never below it, so no estimate beats the
roofline, and a larger GEMM of the same aspect is never less efficient. ``q ∈ [1, 8]`` is the unit's
overlap of floor and work: 1 adds them, as a harness that times each call alone measures; a larger q
hides the floor behind the work, as calls launched back to back run (the Hoppers' sweeps, CUDA events
around back-to-back calls: a long call runs while the next one launches).

Units measured in training get their parameters by a maximum a posteriori fit to their rows. Any
other unit takes them from a prior on spec-sheet facts (``Prior``): the compute efficiency falls
with the power headroom of the board (its TDP over what its units would draw at its process node's
energy per FLOP: a power roofline), fitted on the measured fp32 GPU units of library calls; a matrix
unit (tensor cores: no public source measured one; the shipped sweeps measured the H100's and H200's)
starts from ``MATRIX_EFFICIENCY`` of its dense peak, the range public cuBLAS figures give for large
GEMMs, under the same power roofline. Its ramp is the median of the measured units of its class
(the vector units of its kind, or the matrix units; 1 where none was measured), its overlap the
median of the measured GPU units' on a GPU (a harness nobody described) and 1 elsewhere. A unit that
was not measured moves by ``SAME_DEVICE_SHARE`` of its device's measured deviation from the prior, or else by
``SAME_ARCHITECTURE_SHARE`` of its architecture's in training (in its own dtype where one was measured),
and departs from the shape term where the measured units of its dtype and compute-unit design depart, at
that share (``_sibling_corrections``: the same silicon runs the same library kernels).

``adapt`` gives a measured GPU the overlap its shots say, pooled over its dtypes (the harness that
timed them is the same for all), updates the parameters of measured units only (the same MAP fit, with
the unit's current parameters as the prior), never the shape term, and corrects a unit whose shots
depart from its law where on the shape they do (``_shape_correction``): measurements of one device
leave every other device's estimates bit-identical.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from preflight.data.errors import DataError
from preflight.features import Features, Pieces, among, bare, concat, distinct_rows, rows_of_each
from preflight.features.gemm import HEADROOM, LAUNCH_FLOOR_MS
from preflight.models.core.targets import Encoding, Target, encodings_from_state
from preflight.models.families._shape_correction import ANCHOR_ROWS, MIN_SHOTS, Anchor, log_correction
from preflight.models.families.tree import TreeFamily
from scipy.optimize import least_squares, minimize_scalar
from scipy.special import expit

#: Meta columns the law reads (the GEMM featurizer's); a unit is a device's units of one working dtype
#: (``WORKING``: a tf32 GEMM on a V100 runs on its fp32 units, and is that unit).
COMPUTE, MEMORY, MATRIX, WORKING = "compute_ms", "memory_ms", "matrix_units", "working_dtype"
#: The meta column that names a device's compute-unit design (``features.gemm.compute_unit``): devices
#: sharing it are siblings, whose departures from the shape term a unit nobody measured takes.
COMPUTE_UNIT = "compute_unit"
#: ``X`` columns no shape term reads: device identity it could memorise instead of shape.
DEVICE_COLUMNS = ("ridge_log2", "vendor", "peak_is_fallback")
#: Columns a GPU's shape term leaves out besides: the dtype, which the units' parameters carry (a
#: dtype's shape effects learned on vector units would otherwise be applied to matrix units, which no
#: training row measured), and the working set over L2 (tiling hides it on a GPU; it is what made the
#: free tree's efficiency fall as GEMMs grew).
GPU_COLUMNS = ("working_set_over_llc_log2", "dtype", "math_dtype", "element_bytes")
#: Columns a matrix unit's shape term leaves out besides: those measured against the dtype's peak. A
#: tensor core's peak is 8-16x a vector unit's, so on them a large tensor-core GEMM looks like a small
#: vector one (the H200's fp16 GEMMs from the public GPUs: 45% median error with them, 13% on geometry
#: alone; the vector units keep them: the A100 80GB's linear GEMMs go from 9.7 to 24% without).
PEAK_COLUMNS = (
    "roofline_us_log2",
    "intensity_over_ridge_log2",
    "tile_intensity_over_ridge_log2",
    "bound_by_compute",
)
#: A GPU's shape term never falls as the work or its intensity grows, nor as less of a wave or a tile
#: is padding. Other kinds' (a CPU's cache hierarchy makes efficiency rise and fall with size, and an
#: emulated dtype has its own shape) are learned freely, on every column but the device's identity.
SHAPE_MONOTONE = {
    c: 1
    for c in (
        "m_log2",
        "n_log2",
        "k_log2",
        "min_dim_log2",
        "roofline_us_log2",
        "library_waves_log2",
        "intensity_log2",
        "intensity_over_ridge_log2",
        "tile_intensity_over_ridge_log2",
        "kernel_waves_log2",
        "library_wave_efficiency",
        "library_tile_efficiency",
        "kernel_wave_efficiency",
        "kernel_tile_efficiency",
    )
}
#: Columns a GEMM's growth at a fixed aspect changes that have no direction above: a GPU unit's
#: correction from its shots leaves them out (the shape term, learned from thousands of rows, reads
#: them), so that a corrected unit is never less efficient for a larger GEMM either.
GROWING_WITHOUT_DIRECTION = ("bound_by_compute", "library_tile_m_log2", "library_tile_n_log2")
#: The most the shape term slows a GEMM's work past its bound, on the log scale (g^ramp ≥ e^-6, about
#: 1/400): no GEMM on the shipped data with a bound of 1 µs or more was slowed past e^5.7. Below, the
#: time is latency, which the floor carries; read as a shape term it taught g ≈ e^-15 to e^-60, which a
#: device with a faster roofline turned into milliseconds (a 16³ fp32 GEMM on an RTX 4090 at 2.4 ms, its
#: 256³ at 31 µs; docs/BENCHMARKS.md, issue 24, fourteenth session).
MAX_LOG_SLOWDOWN = 6.0
#: The norm that joins compute and memory time: a smooth max, never below the max.
NORM = 8.0
#: A matrix unit's large-GEMM efficiency of its dense peak with no power cap (cuBLAS on A100/H100-class
#: parts reaches roughly 0.6-0.8; the H100 and H200 sweeps measured 0.66-0.72 on fp16/bf16/tf32), and its
#: log-scale uncertainty, wide for a generation never measured.
MATRIX_EFFICIENCY, MATRIX_SIGMA = 0.70, 0.30
#: Share of a measured device's deviation from the prior that its unmeasured dtypes take, and of a
#: measured architecture's that its unmeasured devices take (an A100 80GB from the A100 40GB).
SAME_DEVICE_SHARE, SAME_ARCHITECTURE_SHARE = 0.5, 0.8
#: Launch floors t0 (ms): at least the featurizer's by kind (2 µs on a GPU), else 0.1 µs; at most 10 ms.
MIN_FLOOR_MS, MAX_FLOOR_MS = 1e-4, 10.0
#: Log-scale spread of a trained unit's parameters when a user's shots adapt it (a user's setup may
#: differ from the one measured in training).
TRAINED_SIGMA = 0.15
#: Least log-scale noise of a user's measurement against the law when it adapts a unit: the shape
#: term errs more on a device it never saw than on its training rows.
SHOT_NOISE = 0.1
#: Rows per unit the fit reads at most (seeded sample): a kernel sweep of one shape adds nothing past it.
MAX_ROWS_PER_UNIT = 4000
#: Quantile of the shape term over the training rows that is taken as g = 1 (its top, robust to a few
#: rows faster than their unit's efficiency).
SHAPE_TOP = 0.99
#: Share of the shape term's trees in the first, rough pass of the fit (it only refines the units' start
#: values; the final shape term has them all).
ROUGH_SHARE = 0.25
#: Least efficiency a unit may be fitted to.
MIN_ETA = 1e-4
#: Bounds of a unit's ramp ``α`` (log scale): how steeply its efficiency follows the shape term.
MIN_LOG_RAMP, MAX_LOG_RAMP = np.log(0.25), np.log(2.0)
#: Bounds of a unit's overlap ``q`` (log scale): the norm that joins its floor and its work, from 1 (they
#: add: a lone call timed from launch to finish) towards a max (back-to-back calls, each launch hidden
#: behind the previous call's work).
MIN_LOG_OVERLAP, MAX_LOG_OVERLAP = 0.0, np.log(8.0)
#: How many of a unit's parameters the law reads (log η_c, log η_m, log t0, log α, log q).
LAW_PARAMETERS = 5
#: Where the overlap ``q`` sits among them.
OVERLAP = 4
#: Log-scale spread of a GPU's overlap when its shots move it: loose, since the harness that timed a
#: user's measurements is not an input.
OVERLAP_SIGMA = 1.0


@dataclass
class Unit:
    """One device-dtype's parameters on the log scale, their spread (0: fitted on many rows), the
    shape trees' raw output that is g = 1 for it (``moved``), its ramp ``α``: log g = α · min(0,
    raw - moved), and its overlap ``q`` of floor and work. A unit's ramp is how steeply its efficiency
    follows the shared shape term: a tensor core's large GEMMs gain less over its medium ones than a
    vector unit's do (its board's power cap binds first)."""

    log_eta_c: float
    log_eta_m: float
    log_t0: float
    sigma: float = 0.0
    moved: float = 0.0
    log_ramp: float = 0.0
    log_overlap: float = 0.0

    @property
    def ramp(self) -> float:
        return float(np.exp(self.log_ramp))

    def law(self) -> list[float]:
        """The parameters the law reads (``LAW_PARAMETERS``)."""
        return [self.log_eta_c, self.log_eta_m, self.log_t0, self.log_ramp, self.log_overlap]

    def row(self) -> list[float]:
        """The unit as a row of ``PhysicsFamily.parameters``: the law's parameters, spread, moved."""
        return [*self.law(), self.sigma, self.moved]

    @classmethod
    def from_row(cls, row: np.ndarray) -> Unit:
        c, m, t0, log_ramp, log_overlap, sigma, moved = map(float, row)
        return cls(c, m, t0, sigma=sigma, moved=moved, log_ramp=log_ramp, log_overlap=log_overlap)


def units(meta: pd.DataFrame) -> np.ndarray:
    """Each row's unit key, ``device/dtype``: the dtype whose units run it (``WORKING``), spelt once per
    distinct unit."""
    index, first = distinct_rows(*(meta[c] for c in ("device_id", WORKING)))
    return _keys(*(meta[c].iloc[first] for c in ("device_id", WORKING)))[index]  # the distinct rows alone


def _keys(device: pd.Series, dtype: pd.Series) -> np.ndarray:
    """Unit keys, ``device/dtype``, of rows' devices and working dtypes."""
    return np.array([f"{d}/{w}" for d, w in zip(device.tolist(), dtype.tolist())], dtype=object)


def _rows_of_each_design(meta: pd.DataFrame) -> dict[tuple[str, str], np.ndarray]:
    """The rows of each compute-unit design (``COMPUTE_UNIT``) and working dtype: siblings' units."""
    return rows_of_each(meta[COMPUTE_UNIT].astype(str), meta[WORKING].astype(str))


def shape_group(meta: pd.DataFrame) -> np.ndarray:
    """Which shape tree reads each row: ``gpu`` (a GPU's vector units), ``matrix`` (its matrix units), or
    ``other`` for every other kind."""
    gpu = meta["device_kind"].astype(str).to_numpy() == "gpu"
    return np.where(gpu, np.where(meta[MATRIX].to_numpy(float) > 0, "matrix", "gpu"), "other")


def _shape_trees(groups: np.ndarray) -> dict[str, tuple[np.ndarray, tuple[str, ...]]]:
    """Each shape tree to fit: the rows it learns from and the columns it leaves out. The matrix units'
    tree learns from every GPU row (the geometry it reads transfers from the vector units, and no
    public source measured a matrix unit), whenever there is one."""
    gpu = np.isin(groups, ("gpu", "matrix"))
    trees = {
        str(group): (np.flatnonzero(groups == group), _left_out(str(group)))
        for group in np.unique(groups)
        if group != "matrix"
    }
    if gpu.any():
        trees["matrix"] = (np.flatnonzero(gpu), _left_out("matrix"))
    return trees


def _left_out(group: str) -> tuple[str, ...]:
    """The columns a shape group's tree leaves out."""
    return DEVICE_COLUMNS + {"gpu": GPU_COLUMNS, "matrix": GPU_COLUMNS + PEAK_COLUMNS}.get(group, ())


def _floor_ms(kind: str) -> float:
    return LAUNCH_FLOOR_MS.get(kind, MIN_FLOOR_MS)


def law(compute: np.ndarray, memory: np.ndarray, unit: np.ndarray, log_g: np.ndarray) -> np.ndarray:
    """log time from the terms, per-row parameters ``unit[rows, LAW_PARAMETERS]`` (``Unit.law``) and the
    shape tree's log g, in log space throughout (no overflow for any GEMM a request can name)."""
    with np.errstate(divide="ignore", invalid="ignore"):  # a term of 0 or ∞ (a hostile GEMM) stays one
        log_compute, log_memory = np.log(compute) - unit[:, 0], np.log(memory) - unit[:, 1]
        log_bound = np.logaddexp(NORM * log_compute, NORM * log_memory) / NORM
        q = np.exp(unit[:, 4])
        return np.logaddexp(q * unit[:, 2], q * (log_bound - np.exp(unit[:, 3]) * log_g)) / q


def _within_pieces(alone: np.ndarray, items: int, pieces: Pieces) -> np.ndarray:
    """Each time of ``alone`` (the ``items``' own, then their ``pieces``'), never past what running it
    as its pieces would take, the deepest first: a piece's time is bounded before it bounds its owner's."""
    time = alone.copy()
    owner = pieces.shifted_owner(0, items)
    for depth in range(int(pieces.depth.max(initial=0)), 0, -1):
        at = np.flatnonzero(pieces.depth == depth)
        bound = np.full(len(time), np.inf)
        np.minimum.at(bound, owner[at], pieces.count[at] * time[items + at] + pieces.extra_ms[at])
        time = np.minimum(time, bound)
    return time


def law_gradient(compute: np.ndarray, memory: np.ndarray, unit: np.ndarray, log_g: np.ndarray) -> np.ndarray:
    """``[rows, LAW_PARAMETERS]``: the derivative of ``law`` by each of the unit's parameters (the fit's
    Jacobian: exact, and five times cheaper than differencing)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        log_compute, log_memory = np.log(compute) - unit[:, 0], np.log(memory) - unit[:, 1]
        compute_share = expit(NORM * (log_compute - log_memory))  # ∂ bound / ∂ log compute term
        log_bound = np.logaddexp(NORM * log_compute, NORM * log_memory) / NORM
        q, ramp = np.exp(unit[:, 4]), np.exp(unit[:, 3])
        work = log_bound - ramp * log_g
        floor_share = expit(q * (unit[:, 2] - work))  # ∂ law / ∂ log t0
        joined = np.logaddexp(q * unit[:, 2], q * work) / q
        through_work = 1 - floor_share
        return np.column_stack(
            [
                -through_work * compute_share,
                -through_work * (1 - compute_share),
                floor_share,
                -through_work * ramp * log_g,
                floor_share * unit[:, 2] + through_work * work - joined,
            ]
        )


def log_work(log_y: np.ndarray, unit: np.ndarray) -> np.ndarray:
    """log of the time past the floor, inverting ``law``'s join of floor and work (at least a tenth of
    the time, where the floor alone would explain it)."""
    q = np.exp(unit[:, 4])
    with np.errstate(divide="ignore"):
        past = log_y + np.log1p(-np.exp(np.minimum(q * (unit[:, 2] - log_y), -1e-12))) / q
    return np.maximum(past, log_y + np.log(0.1))


@dataclass
class Prior:
    """Zero-shot parameters of a unit from its spec-sheet facts, per device kind."""

    slope: float  # log η_c per log2 of power headroom below saturation
    saturation: float  # log2 headroom past which the power cap no longer binds
    vector: dict[str, float]  # kind -> log η_c of an uncapped vector unit
    sigma_c: dict[str, float]
    log_eta_m: dict[str, float]
    log_t0: dict[str, float]
    #: kind (vector units) or ``matrix`` -> log α of the measured units (0 where none; before models had it)
    log_ramp: dict[str, float] = field(default_factory=dict)
    #: log q of a GPU unit: the median of the measured GPU units' (0, floor and work added, before models
    #: had it)
    gpu_log_overlap: float = 0.0

    def cap(self, headroom: np.ndarray) -> np.ndarray:
        return _power_cap(self.slope, self.saturation, headroom)

    def parameters(self, kind: np.ndarray, matrix: np.ndarray, headroom: np.ndarray) -> np.ndarray:
        """``[rows, LAW_PARAMETERS + 1]``: the law's parameters and the spread of log η_c."""
        fallback = "gpu" if "gpu" in self.vector else next(iter(self.vector))
        known = np.array([k if k in self.vector else fallback for k in kind])
        base = np.where(matrix > 0, np.log(MATRIX_EFFICIENCY), _lookup(self.vector, known))
        sigma = np.where(matrix > 0, MATRIX_SIGMA, _lookup(self.sigma_c, known))
        log_eta_c = np.minimum(0.0, base + self.cap(headroom))
        unit_class = np.where(matrix > 0, "matrix", known)
        log_ramp = np.array([self.log_ramp.get(c, 0.0) for c in unit_class])
        log_overlap = np.where(kind == "gpu", self.gpu_log_overlap, 0.0)
        return np.column_stack(
            [
                log_eta_c,
                _lookup(self.log_eta_m, known),
                _lookup(self.log_t0, known),
                log_ramp,
                log_overlap,
                sigma,
            ]
        )

    @classmethod
    def fit(cls, table: pd.DataFrame) -> Prior:
        """From fitted units (``kind, dtype, matrix, headroom, library, log_eta_c, log_eta_m, log_t0``):
        the power roofline on measured fp32 GPU units of library calls (the vector FMA its energy per
        FLOP is about; DP4A int8 is not), medians per kind elsewhere."""
        gpu = table[(table.kind == "gpu") & (table.dtype == "fp32") & table.library & table.headroom.notna()]
        slope, saturation = _power_roofline(gpu.headroom.to_numpy(), gpu.log_eta_c.to_numpy())
        table = table.assign(uncapped=table.log_eta_c - _power_cap(slope, saturation, table.headroom))
        vector, sigma_c, log_eta_m, log_t0 = {}, {}, {}, {}
        log_ramp = _class_medians(table, "log_ramp")
        for kind, part in table.groupby("kind"):
            library = part[part.library] if part.library.any() else part
            vector[kind] = float(np.median(library.uncapped))
            spread = (
                float(np.sqrt(np.mean((library.uncapped - vector[kind]) ** 2))) if len(library) > 1 else 0.3
            )
            sigma_c[kind] = max(spread * np.sqrt(1 + 1 / len(library)), 0.1)
            log_eta_m[kind] = float(np.median(part.log_eta_m))
            log_t0[kind] = float(np.median(part.log_t0))
        overlaps = table.log_overlap[table.kind == "gpu"]
        gpu_log_overlap = float(np.median(overlaps)) if len(overlaps) else 0.0
        return cls(slope, saturation, vector, sigma_c, log_eta_m, log_t0, log_ramp, gpu_log_overlap)


def _class_medians(table: pd.DataFrame, column: str) -> dict[str, float]:
    """A column's median over the measured units of each class: the vector units of each kind, and the
    matrix units."""
    matrix = table.matrix > 0
    medians = {str(k): float(np.median(p)) for k, p in table[~matrix].groupby("kind")[column]}
    if matrix.any():
        medians["matrix"] = float(np.median(table[column][matrix]))
    return medians


def raw(unit: Unit) -> np.ndarray:
    """A unit's law parameters against the shape trees' raw output (undoing ``bounded``)."""
    shift = unit.ramp * unit.moved
    return np.array(unit.law()) - [shift, shift, 0.0, 0.0, 0.0]


def bounded(unit: Unit, shift: float) -> Unit:
    """A unit fitted against the shape trees' raw output, made physical: the trees' top (``shift``)
    becomes g = 1 and what that takes from the time moves into the efficiencies, as far as they stay
    ≤ 1 (a unit already at its roofline keeps g clipped at 1 instead)."""
    moved = min(shift, -unit.log_eta_c / unit.ramp)
    return replace(
        unit,
        log_eta_c=min(0.0, unit.log_eta_c + unit.ramp * moved),
        log_eta_m=min(0.0, unit.log_eta_m + unit.ramp * moved),
        moved=moved,
    )


def predicts_better(left_out: Sequence[float], current: Sequence[float]) -> bool:
    """Whether a fit to a device's measurements predicts each one left out (its absolute log errors,
    ``left_out``) better than the current parameters predict them (``current``): the guard that keeps
    a few noisy shots from making a device's answers worse than none."""
    return bool(np.median(left_out) < np.median(current))


def _power_cap(slope: float, saturation: float, headroom: np.ndarray | pd.Series) -> np.ndarray:
    """log η_c lost to the power cap (0 without a TDP or year)."""
    return np.nan_to_num(slope * np.minimum(0.0, headroom - saturation))


def _lookup(by_kind: dict[str, float], kinds: np.ndarray) -> np.ndarray:
    return np.array([by_kind[k] for k in kinds], dtype=float)


def _power_roofline(headroom: np.ndarray, log_eta: np.ndarray) -> tuple[float, float]:
    """Slope and saturation of log η = a + slope · min(0, headroom - saturation), by least squares
    over a grid of saturations (the slope kept in [0, 1]); no slope with fewer than four units."""
    if len(headroom) < 4:
        return 0.0, 0.0
    best = (np.inf, 0.0, 0.0)
    for saturation in np.linspace(np.min(headroom), np.max(headroom), 25):
        x = np.minimum(0.0, headroom - saturation)
        design = np.column_stack([np.ones_like(x), x])
        (intercept, slope), *_ = np.linalg.lstsq(design, log_eta, rcond=None)
        slope = float(np.clip(slope, 0.0, 1.0))
        error = float(np.sum((log_eta - np.mean(log_eta - slope * x) - slope * x) ** 2))
        if error < best[0]:
            best = (error, slope, float(saturation))
    return best[1], best[2]


class PhysicsFamily:
    name = "physics"
    concurrent = True

    def __init__(
        self,
        *,
        targets: dict[str, Target],
        n_estimators: int = 200,
        num_leaves: int = 31,
        learning_rate: float = 0.05,
        max_rows_per_unit: int = MAX_ROWS_PER_UNIT,
        seed: int = 0,
    ) -> None:
        self.targets, self.seed = targets, seed
        self.n_estimators, self.num_leaves, self.learning_rate = n_estimators, num_leaves, learning_rate
        self.max_rows_per_unit = max_rows_per_unit

    def get_params(self) -> dict:
        keys = ("n_estimators", "num_leaves", "learning_rate", "max_rows_per_unit", "seed")
        return {k: getattr(self, k) for k in keys}

    # fitting -------------------------------------------------------------------------------------------

    def fit(
        self, features: Features, Y: pd.DataFrame, sample_weight: np.ndarray | None = None
    ) -> PhysicsFamily:
        measured = [t for t in Y.columns if self.targets[t].present(Y[t]).sum() >= 2]
        if len(measured) > 1:
            raise DataError(f"the physics family learns one time target, got {measured}")
        if not measured:
            raise DataError(f"too few rows with {', '.join(Y.columns)} to learn it ({len(Y)} rows in all)")
        self.target_name_ = str(measured[0])
        target = self.targets[self.target_name_]
        self.encodings_ = {self.target_name_: Encoding(target, relative=False)}
        rows = self._sample(features, Y, sample_weight)
        features, y = features.take(rows), Y[self.target_name_].to_numpy(dtype=float)[rows]
        weight = np.ones(len(rows)) if sample_weight is None else np.asarray(sample_weight, float)[rows]
        keys = units(features.meta)
        params = self._initial(features, y, keys)
        for rough in (True, False):  # shape term given the units, then the units given the shape term
            self.shape_ = self._fit_shape(features, y, keys, params, weight, rough=rough)
            raw = self._raw_log_g(features)
            params = {
                key: self._map_fit(
                    features, y, raw, keys == key, prior=params[key], prior_sigma=1.0, weight=weight
                )
                for key in np.unique(keys)
            }
        # g ≤ 1 with the efficiencies as upper envelopes: each tree's top moves into its units, as far
        # as their efficiency allows
        self.shift_ = self._tops(raw, features.meta)
        tree_of = dict(zip(keys, self._tree_names(features.meta)))
        self.units_ = {key: bounded(u, self.shift_[tree_of[key]]) for key, u in params.items()}
        self.prior_ = Prior.fit(self._unit_table(features, keys))
        self.measured_ = self._measured(features, keys, self.units_)
        self.adapted_: dict[str, Unit] = {}
        self.adapted_measured_: dict[str, dict] = {}
        self.harness_: dict[str, float] = {}
        self.moved_: set[str] = set()
        # none while the law's own residuals on the training rows are read: they are what siblings learn
        self.sibling_corrections_: dict[tuple[str, str], TreeFamily] = {}
        log_residual = np.log(y) - self._log_time(features, raw)
        self.residual_sigma_ = float(np.sqrt(np.average(log_residual**2, weights=weight)))
        self.anchor_: Anchor | None = Anchor.sample(
            features.X, shape_group(features.meta), log_residual, self.seed
        )
        self.corrections_: dict[str, TreeFamily] = {}
        self.sibling_corrections_ = self._sibling_corrections(features, log_residual)
        return self

    def _sibling_corrections(
        self, features: Features, log_residual: np.ndarray
    ) -> dict[tuple[str, str], TreeFamily]:
        """Per compute-unit design (``COMPUTE_UNIT``) and working dtype measured in training, where on the
        shape its units depart from the law (``log_residual`` on the training rows): a correction as a
        unit's shots learn one, from at most ``ANCHOR_ROWS`` of its rows (seeded). A unit of that design
        nobody measured takes ``SAME_ARCHITECTURE_SHARE`` of it (``_sibling_offsets``), as it takes
        that share of its architecture's parameter deviation: the same silicon runs the same library
        kernels (an A100 80GB from the A100 40GB's rows, but not an A10, whose SMs do twice the fp32
        work; docs/BENCHMARKS.md, issue 24, sixteenth session)."""
        groups, rng = shape_group(features.meta), np.random.default_rng(self.seed)
        each = _rows_of_each_design(features.meta)
        out = {}
        for key in sorted(each):
            rows = each[key]
            if len(rows) < MIN_SHOTS:
                continue
            if len(rows) > ANCHOR_ROWS:
                rows = np.sort(rng.choice(rows, ANCHOR_ROWS, replace=False))
            tree = self._correction(str(groups[rows[0]]), features.X.iloc[rows], log_residual[rows])
            if tree is not None:
                out[(str(key[0]), str(key[1]))] = tree
        return out

    def _sample(self, features: Features, Y: pd.DataFrame, weight: np.ndarray | None) -> np.ndarray:
        """Usable rows, at most ``max_rows_per_unit`` per unit (seeded)."""
        y = Y[self.target_name_].to_numpy(dtype=float)
        meta = features.meta
        usable = (
            np.isfinite(y)
            & (y > 0)
            & (meta[COMPUTE].to_numpy(float) > 0)
            & (meta[MEMORY].to_numpy(float) > 0)
        )
        if weight is not None:
            usable &= np.asarray(weight, float) > 0
        rng = np.random.default_rng(self.seed)
        keys = units(meta)
        chosen = []
        for key in np.unique(keys[usable]):
            at = np.flatnonzero(usable & (keys == key))
            chosen.append(
                rng.choice(at, self.max_rows_per_unit, replace=False)
                if len(at) > self.max_rows_per_unit
                else at
            )
        if not chosen:
            raise DataError("no GEMM rows with a runtime and a spec-sheet roofline to learn from")
        return np.sort(np.concatenate(chosen))

    def _initial(self, features: Features, y: np.ndarray, keys: np.ndarray) -> dict[str, Unit]:
        """Start values: a high quantile of the achieved efficiency (compute- or memory-bound rows), and
        half the fastest small GEMM as the floor."""
        compute, memory = (features.meta[c].to_numpy(float) for c in (COMPUTE, MEMORY))
        kinds = features.meta["device_kind"].astype(str).to_numpy()
        out = {}
        for key in np.unique(keys):
            at = keys == key
            c, m, t = compute[at], memory[at], y[at]
            eta_c = np.quantile(c / t, 0.9) if (c >= m).sum() >= 3 else 0.5
            eta_m = np.quantile((m / t)[m > c], 0.9) if (m > c).sum() >= 3 else 0.5
            small = t[np.maximum(c, m) < 0.1 * t]
            floor = _floor_ms(kinds[at][0])
            t0 = 0.5 * float(np.min(small)) if len(small) else 10 * floor
            out[key] = Unit(
                float(np.log(np.clip(eta_c, MIN_ETA, 1))),
                float(np.log(np.clip(eta_m, MIN_ETA, 1))),
                float(np.log(np.clip(t0, floor, MAX_FLOOR_MS))),
            )
        return out

    def _fit_shape(
        self,
        features: Features,
        y: np.ndarray,
        keys: np.ndarray,
        params: dict[str, Unit],
        weight: np.ndarray,
        rough: bool = False,
    ) -> dict[str, TreeFamily]:
        """The shape term, one tree per group (``shape_group``, ``_shape_trees``): log g = log(bound at the
        unit's efficiencies / time past the floor) / the unit's ramp. A ``rough`` one (``ROUGH_SHARE`` of
        the trees, each learning as much more) only refines the units' start values."""
        share = ROUGH_SHARE if rough else 1
        unit = np.array([params[k].law() for k in keys])
        compute, memory = (features.meta[c].to_numpy(float) for c in (COMPUTE, MEMORY))
        no_floor = unit.copy()
        no_floor[:, 2] = -np.inf
        log_bound = law(compute, memory, no_floor, np.zeros(len(y)))
        log_slowdown = np.maximum(log_bound - log_work(np.log(y), unit), -MAX_LOG_SLOWDOWN)
        log_g = log_slowdown / np.exp(unit[:, 3])
        trees = {}
        for group, (rows, excluded) in _shape_trees(shape_group(features.meta)).items():
            gpu = group != "other"
            columns = [c for c in features.X.columns if c not in excluded]
            shape = bare(
                features.X[columns].iloc[rows].reset_index(drop=True),
                "log_g",
                {c: d for c, d in SHAPE_MONOTONE.items() if c in columns and gpu},
            )
            tree = TreeFamily(
                targets={"log_g": Target("", "identity")},
                n_estimators=max(1, round(self.n_estimators * share)),
                num_leaves=self.num_leaves,
                learning_rate=self.learning_rate / share,
                seed=self.seed,
            )
            trees[group] = tree.fit(shape, pd.DataFrame({"log_g": log_g[rows]}), sample_weight=weight[rows])
        return trees

    def _map_fit(
        self,
        features: Features,
        y: np.ndarray,
        log_g: np.ndarray,
        rows: np.ndarray,
        *,
        prior: Unit,
        prior_sigma: float,
        weight: np.ndarray | None = None,
        noise: float = 0.2,
        shape: bool = True,
    ) -> Unit:
        """The unit's parameters that best explain its rows under the law (``log_g`` before its ramp),
        shrunk to ``prior`` with a log-scale spread ``prior_sigma`` (the residual spread of the shape term
        as the noise); the ramp and the overlap stay the prior's unless ``shape``."""
        kind = str(features.meta["device_kind"].iloc[np.flatnonzero(rows)[0]])
        compute, memory = (features.meta[c].to_numpy(float) for c in (COMPUTE, MEMORY))
        with np.errstate(divide="ignore", invalid="ignore"):
            rows = rows & np.isfinite(np.log(y) + np.log(compute) + np.log(memory) + log_g)
        if not rows.any():  # nothing the law can read: the prior stands
            return replace(prior, sigma=0.0)
        compute, memory, log_y, g = compute[rows], memory[rows], np.log(y[rows]), log_g[rows]
        w = np.sqrt(np.ones(len(log_y)) if weight is None else np.asarray(weight, float)[rows])
        free = LAW_PARAMETERS if shape else 3
        start = np.array(prior.law())
        lower = np.array(
            [np.log(MIN_ETA), np.log(MIN_ETA), np.log(_floor_ms(kind)), MIN_LOG_RAMP, MIN_LOG_OVERLAP]
        )[:free]
        upper = np.array([0.0, 0.0, np.log(MAX_FLOOR_MS), MAX_LOG_RAMP, MAX_LOG_OVERLAP])[:free]

        def per_row(theta: np.ndarray) -> np.ndarray:
            return np.broadcast_to(np.r_[theta, start[free:]], (len(log_y), LAW_PARAMETERS))

        def residual(theta: np.ndarray) -> np.ndarray:
            fitted = law(compute, memory, per_row(theta), g)
            return np.r_[w * (log_y - fitted) / noise, (theta - start[:free]) / prior_sigma]

        def jacobian(theta: np.ndarray) -> np.ndarray:
            rows_part = -(w / noise)[:, None] * law_gradient(compute, memory, per_row(theta), g)[:, :free]
            return np.vstack([rows_part, np.eye(free) / prior_sigma])

        solution = least_squares(
            residual,
            np.clip(start[:free], lower, upper),
            jac=jacobian,
            bounds=(lower, upper),
            method="trf",
            loss="soft_l1",
        )
        log_eta_c, log_eta_m, log_t0, log_ramp, log_overlap = map(float, np.r_[solution.x, start[free:]])
        return Unit(
            log_eta_c,
            log_eta_m,
            log_t0,
            sigma=0.0,
            moved=prior.moved,
            log_ramp=log_ramp,
            log_overlap=log_overlap,
        )

    def _unit_table(self, features: Features, keys: np.ndarray) -> pd.DataFrame:
        """Per fitted unit: its kind, dtype, class, headroom, whether library calls measured it, and its
        raw parameters (what ``Prior.fit`` reads)."""
        first = (
            features.meta.assign(unit=keys)
            .groupby("unit", sort=True)
            .agg(
                kind=("device_kind", "first"),
                dtype=(WORKING, "first"),
                matrix=(MATRIX, "first"),
                headroom=(HEADROOM, "first"),
                library=("stratum", lambda s: bool(s.str.contains(".library", regex=False).mean() > 0.5)),
            )
        )
        params = pd.DataFrame(
            {k: raw(u) for k, u in self.units_.items()},
            index=["log_eta_c", "log_eta_m", "log_t0", "log_ramp", "log_overlap"],
        ).T
        return first.join(params)

    # predicting ----------------------------------------------------------------------------------------

    def _tree_names(self, meta: pd.DataFrame) -> np.ndarray:
        """The shape tree that reads each row: its group's, or another's where training had none."""
        groups = shape_group(meta)
        return np.where(among(groups, list(self.shape_)), groups, next(iter(self.shape_)))

    def _tree_log_g(self, tree: str, features: Features, rows: np.ndarray) -> np.ndarray:
        """The tree's output on the rows; 0 (g = 1: the unit's efficiencies alone) where the tree learned
        nothing, its group having had fewer than two training rows."""
        predicted = self.shape_[tree].predict(bare(features.X.iloc[rows], "log_g"))
        return predicted["log_g"].to_numpy() if "log_g" in predicted else np.zeros(len(rows))

    def _tops(self, raw: np.ndarray, meta: pd.DataFrame) -> dict[str, float]:
        """Each shape tree's top (``SHAPE_TOP`` quantile) over the rows it learned from (``raw``, the
        trees' output on the training rows): g = 1 there."""
        return {
            tree: float(np.quantile(raw[rows], SHAPE_TOP))
            for tree, (rows, _) in _shape_trees(shape_group(meta)).items()
        }

    def _raw_log_g(self, features: Features) -> np.ndarray:
        """The shape trees' output, before it is shifted and bounded."""
        out = np.zeros(len(features.X))
        for tree, rows in rows_of_each(self._tree_names(features.meta)).items():
            out[rows] = self._tree_log_g(str(tree), features, rows)
        return out

    def parameters(self, meta: pd.DataFrame) -> np.ndarray:
        """Each row's unit parameters ``[rows, LAW_PARAMETERS + 2]`` (``Unit.row``: the law's, the spread of
        log η_c, moved):
        adapted, else fitted in training, else the prior (fitted on the raw parameters of the training
        units) moved by the measured deviation of the same device's, or else the same architecture's,
        units of its class (vector or matrix), then bounded."""
        index, first = distinct_rows(*(meta[c] for c in ("device_id", WORKING)))
        head = meta.iloc[first]
        distinct = _keys(head["device_id"], head[WORKING])
        prior, trees = self._prior(head), self._tree_names(head)
        facts = {column: head[column].tolist() for column in (MATRIX, "device_id", "architecture", WORKING)}
        known = self.units_ | self.adapted_
        out = np.empty((len(distinct), LAW_PARAMETERS + 2))
        for i, key in enumerate(distinct):
            if key in known:
                out[i] = known[key].row()
            else:
                c, m, t0, log_ramp, log_overlap = prior[i, :LAW_PARAMETERS] + self._deviation(
                    {column: values[i] for column, values in facts.items()}
                )
                guess = Unit(
                    float(c),
                    float(m),
                    float(t0),
                    sigma=float(prior[i, LAW_PARAMETERS]),
                    log_ramp=float(np.clip(log_ramp, MIN_LOG_RAMP, MAX_LOG_RAMP)),
                    log_overlap=float(np.clip(log_overlap, MIN_LOG_OVERLAP, MAX_LOG_OVERLAP)),
                )
                out[i] = bounded(guess, self.shift_[trees[i]]).row()
        devices = head["device_id"].astype(str).to_numpy()
        for device, log_overlap in self.harness_.items():
            out[devices == device, OVERLAP] = log_overlap
        return out[index]

    def _prior(self, meta: pd.DataFrame) -> np.ndarray:
        return self.prior_.parameters(
            meta["device_kind"].astype(str).to_numpy(),
            meta[MATRIX].to_numpy(float),
            meta[HEADROOM].to_numpy(float),
        )

    def _measured(self, features: Features, keys: np.ndarray, fitted: dict[str, Unit]) -> dict[str, dict]:
        """Per fitted unit: its device, architecture, class and deviation from the prior (raw)."""
        _, first = np.unique(keys, return_index=True)
        head = features.meta.iloc[first]
        prior = self._prior(head)
        return {
            key: {
                "device": str(row["device_id"]),
                "architecture": str(row["architecture"]),
                "dtype": str(row[WORKING]),
                "matrix": float(row[MATRIX]),
                "deviation": (raw(fitted[key]) - prior[i, :LAW_PARAMETERS]).tolist(),
            }
            for i, (key, (_, row)) in enumerate(zip(keys[first], head.iterrows()))
            if key in fitted
        }

    def _deviation(self, row: Mapping[str, Any]) -> np.ndarray:
        """What measured units of the same class (vector or matrix) say about the row's parameters: their
        mean deviation from their prior (the law's parameters), from the nearest evidence there is:
        the row's device (share ``SAME_DEVICE_SHARE``), else its architecture's units in training in the
        same dtype, else in any dtype (``SAME_ARCHITECTURE_SHARE``; an H100's fp64 from the H200's fp64,
        not from the mean of its fp16, tf32 and fp64). A user's measurements move their own device only."""
        same_class = float(row[MATRIX])
        device, architecture, dtype = (str(row[c]) for c in ("device_id", "architecture", WORKING))
        sources = (
            (SAME_DEVICE_SHARE, self.measured_ | self.adapted_measured_, {"device": device}),
            (SAME_ARCHITECTURE_SHARE, self.measured_, {"architecture": architecture, "dtype": dtype}),
            (SAME_ARCHITECTURE_SHARE, self.measured_, {"architecture": architecture}),
        )
        for share, measured, match in sources:
            same = [
                np.pad(m["deviation"], (0, LAW_PARAMETERS - len(m["deviation"])))  # saved before a ramp
                for m in measured.values()
                if m["matrix"] == same_class and all(m.get(k) == v for k, v in match.items())
            ]
            if same:
                return share * np.mean(same, axis=0)
        return np.zeros(LAW_PARAMETERS)

    def _log_g(self, raw: np.ndarray, params: np.ndarray) -> np.ndarray:
        """Each row's shape term before its unit's ramp, log g ≤ 0, from the trees' output (``raw``) and
        its unit's parameters (``parameters``), slowing no GEMM more than ``MAX_LOG_SLOWDOWN``."""
        least = -MAX_LOG_SLOWDOWN / np.exp(params[:, 3])
        return np.clip(raw - params[:, LAW_PARAMETERS + 1], least, 0.0)

    def _log_time(self, features: Features, raw: np.ndarray) -> np.ndarray:
        """The law's log time, with its siblings' departure where a unit was not measured in training,
        never faster than the roofline (the featurizer's reference)."""
        compute, memory = (features.meta[c].to_numpy(float) for c in (COMPUTE, MEMORY))
        params = self.parameters(features.meta)
        log_time = law(compute, memory, params[:, :LAW_PARAMETERS], self._log_g(raw, params))
        offsets = self._sibling_offsets(features)
        if not offsets.any():
            return log_time
        return np.where(offsets != 0, np.fmax(log_time + offsets, self._log_roofline(features)), log_time)

    def _log_roofline(self, features: Features) -> np.ndarray:
        """log of the featurizer's reference: the roofline no corrected estimate goes below."""
        with np.errstate(divide="ignore"):
            return np.log(features.reference[self.target_name_].to_numpy(float))

    def _sibling_offsets(self, features: Features) -> np.ndarray:
        """Each row's log-time departure from the law that the units of its compute-unit design measured
        in training show (``_sibling_corrections``), at ``SAME_ARCHITECTURE_SHARE``, where its own
        unit was not measured in training; 0 elsewhere."""
        out = np.zeros(len(features.X))
        if not self.sibling_corrections_:
            return out
        meta = features.meta
        unmeasured = ~among(units(meta), list(self.units_))
        for key, rows in _rows_of_each_design(meta).items():
            tree, rows = self.sibling_corrections_.get(key), rows[unmeasured[rows]]
            if tree is not None and len(rows):
                out[rows] = SAME_ARCHITECTURE_SHARE * log_correction(tree, features.X.iloc[rows])
        return out

    def predict(self, features: Features) -> pd.DataFrame:
        """The law's time for each row, never past what running it as its pieces would take
        (``Features.pieces``): the rows and every depth of their pieces are estimated in one pass, then
        each depth bounds the one above it."""
        pieces = features.pieces
        rows = (
            features
            if pieces is None
            else concat([Features(features.X, features.reference, features.meta), pieces.features])
        )
        alone = np.exp(self._corrected(rows, self._log_time(rows, self._raw_log_g(rows))))
        time = alone if pieces is None else _within_pieces(alone, len(features.X), pieces)
        return pd.DataFrame({self.target_name_: time[: len(features.X)]}, index=features.X.index)

    def _corrected(self, features: Features, log_time: np.ndarray) -> np.ndarray:
        """``log_time`` with each corrected unit's correction added (``adapt``), never faster than the
        roofline (the featurizer's reference)."""
        keys = units(features.meta)
        out = log_time.copy()
        corrected = sorted(set(keys) & set(self.corrections_))
        if not corrected:
            return out
        roofline = self._log_roofline(features)
        for key in corrected:
            rows = np.flatnonzero(keys == key)
            moved = log_time[rows] + log_correction(self.corrections_[key], features.X.iloc[rows])
            out[rows] = np.fmax(moved, roofline[rows])
        return out

    # adapting ------------------------------------------------------------------------------------------

    def adapt(self, features: Features, Y: pd.DataFrame) -> PhysicsFamily:
        """A copy whose measured GPUs take the overlap of floor and work their measurements say
        (``_harness_overlaps``), whose measured units' parameters are updated by the measurements (MAP,
        with their current parameters as the prior), and a unit with ``MIN_SHOTS`` of them corrected
        where on the shape it departs from the shape term (``_shape_correction``); the shape term and
        every other device are shared unchanged. A unit's siblings' departure (``_log_time``) stays: its
        parameters are fitted to the shots with it taken out."""
        new = copy.copy(self)
        new.adapted_, new.adapted_measured_, new.moved_ = {}, {}, set()
        y = Y[self.target_name_].to_numpy(dtype=float)
        usable = np.isfinite(y) & (y > 0)
        raw = self._raw_log_g(features)
        # the shots as the law alone would have them: their siblings' departure taken out
        y_law = y * np.exp(-self._sibling_offsets(features))
        new.harness_ = self._harness_overlaps(features, y_law, usable, raw)
        keys, current = units(features.meta), new.parameters(features.meta)
        log_g = self._log_g(raw, current)
        for key in np.unique(keys[usable]):
            rows = usable & (keys == key)
            prior = Unit.from_row(current[np.flatnonzero(rows)[0]])
            new.adapted_[key] = self._posterior(features, y_law, log_g, rows, prior)
            if new.adapted_[key] is not prior:
                new.moved_.add(str(key))
        new.adapted_measured_ = new._measured(features, keys, new.adapted_)
        new.corrections_ = new._corrections(features.take(np.flatnonzero(usable)), y[usable])
        new.moved_ |= set(new.corrections_)
        return new

    def _harness_overlaps(
        self, features: Features, y: np.ndarray, usable: np.ndarray, raw: np.ndarray
    ) -> dict[str, float]:
        """Per GPU with ``MIN_SHOTS`` usable measurements over all its dtypes, the log overlap q of floor
        and work they say, one for the whole device: it is a fact of the harness that timed them (lone
        calls add the floor, calls launched back to back hide it behind the work), which no spec sheet
        holds and a unit's few shots cannot pin down alone. Fitted with every unit's other parameters as
        they are and kept only where it predicts each measurement left out better than the current
        overlaps do, as ``_posterior`` keeps a unit's (docs/BENCHMARKS.md, issue 24, thirteenth
        session: the Hoppers' ten shots). ``raw``: the shape trees' output on the measurements."""
        meta = features.meta
        params = self.parameters(meta)
        compute, memory = (meta[c].to_numpy(float) for c in (COMPUTE, MEMORY))
        log_g = self._log_g(raw, params)
        noise = max(self.residual_sigma_, SHOT_NOISE)

        def log_error(rows: np.ndarray, log_overlap: float | None = None) -> np.ndarray:
            theta = params[rows, :LAW_PARAMETERS].copy()
            if log_overlap is not None:
                theta[:, OVERLAP] = log_overlap
            return np.log(y[rows]) - law(compute[rows], memory[rows], theta, log_g[rows])

        def fit(rows: np.ndarray, start: float) -> float:
            def loss(log_overlap: float) -> float:
                z = (log_error(rows, log_overlap) / noise) ** 2  # soft L1, as the units' MAP fits
                return float(np.sum(2 * (np.sqrt(1 + z) - 1)) + ((log_overlap - start) / OVERLAP_SIGMA) ** 2)

            return float(minimize_scalar(loss, bounds=(MIN_LOG_OVERLAP, MAX_LOG_OVERLAP), method="bounded").x)

        out = {}
        gpus = np.flatnonzero(usable & (meta["device_kind"] == "gpu").to_numpy())
        for device, at in rows_of_each(meta["device_id"].astype(str).to_numpy()[gpus]).items():
            rows = gpus[at]
            if len(rows) < MIN_SHOTS:
                continue
            start = float(np.mean(params[rows, OVERLAP]))
            left_out = [abs(log_error(np.array([i]), fit(rows[rows != i], start))[0]) for i in rows]
            if predicts_better(left_out, np.abs(log_error(rows))):
                out[str(device)] = fit(rows, start)
        return out

    def _corrections(self, features: Features, y: np.ndarray) -> dict[str, TreeFamily]:
        """Per unit with ``MIN_SHOTS`` usable measurements that depart from its adapted law by more than
        the law's own error on its training rows (RMS on the log scale: below it they hold nothing the
        law does not miss everywhere), the correction of that law (``_correction``)."""
        if self.anchor_ is None:
            return {}
        with np.errstate(divide="ignore", invalid="ignore"):
            log_residual = np.log(y) - self._log_time(features, self._raw_log_g(features))
        readable = np.flatnonzero(np.isfinite(log_residual))
        features, log_residual = features.take(readable), log_residual[readable]
        groups = shape_group(features.meta)
        out = {}
        for key, rows in rows_of_each(units(features.meta)).items():
            departs = np.sqrt(np.mean(log_residual[rows] ** 2)) > self.residual_sigma_
            if len(rows) < MIN_SHOTS or not departs:
                continue
            tree = self._correction(str(groups[rows[0]]), features.X.iloc[rows], log_residual[rows])
            if tree is not None:
                out[str(key)] = tree
        return out

    def _correction(self, group: str, X: pd.DataFrame, log_residual: np.ndarray) -> TreeFamily | None:
        """The law's correction for rows ``X`` of one shape group at their ``log_residual``, over the
        group's shape columns (on a GPU less ``GROWING_WITHOUT_DIRECTION``), in the shape term's monotone
        directions on every kind, anchored by the anchor's rows of the group. None where the anchor has
        no row of the group (a tensor core where no matrix unit trained; docs/DESIGN-NOTES.md, issue 24)."""
        if self.anchor_ is None:
            return None
        anchor_rows = np.flatnonzero(self.anchor_.groups == group)
        if not len(anchor_rows):
            return None
        excluded = _left_out(group) + (() if group == "other" else GROWING_WITHOUT_DIRECTION)
        columns = [c for c in self.anchor_.X.columns if c not in excluded]
        monotone = {c: d for c, d in SHAPE_MONOTONE.items() if c in columns}
        return self.anchor_.correction(anchor_rows, columns, monotone, X, log_residual, self.seed)

    def moved(self, meta: pd.DataFrame) -> np.ndarray:
        """Whether each row's unit answers from measurements (``adapt`` moved its parameters or
        corrected it); a unit measured but kept at its prior, its device's overlap aside, keeps the
        prior's interval (its error is the prior's, not the shots' spread)."""
        return np.isin(units(meta), sorted(self.moved_))

    def _posterior(
        self, features: Features, y: np.ndarray, log_g: np.ndarray, rows: np.ndarray, prior: Unit
    ) -> Unit:
        """The unit's MAP parameters given its measurements, kept only where they predict each
        measurement left out better than the prior does (median absolute log error, leave-one-out):
        a few noisy shots must never make a device's answers worse than none. A unit measured once
        keeps its prior, since one measurement cannot be checked against another (docs/BENCHMARKS.md,
        issue 24: drawing DeepBench's 10 shots, a GPU measured mostly in fp32 often gets one int8 shot,
        which moved its int8 answers unchecked and made 3 of 15 draws worse than none). The ramp
        stays: a handful of shapes cannot tell how steeply a unit's efficiency rises with size."""
        at = np.flatnonzero(rows)
        if len(at) < 2:
            return prior
        fit = partial(
            self._map_fit,
            features,
            y,
            log_g,
            prior=prior,
            prior_sigma=max(prior.sigma, TRAINED_SIGMA),
            noise=max(self.residual_sigma_, SHOT_NOISE),
            shape=False,
        )
        posterior = fit(rows)
        compute, memory = (features.meta[c].to_numpy(float) for c in (COMPUTE, MEMORY))

        def error(unit: Unit, i: int) -> float:
            theta = np.array([unit.law()])
            return abs(np.log(y[i]) - law(compute[[i]], memory[[i]], theta, log_g[[i]])[0])

        left_out = [error(fit(rows & (np.arange(len(rows)) != i)), int(i)) for i in at]
        return posterior if predicts_better(left_out, [error(prior, int(i)) for i in at]) else prior

    # saving --------------------------------------------------------------------------------------------

    def save(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        for group, tree in self.shape_.items():
            tree.save(directory / f"shape-{group}")
        designs = sorted(self.sibling_corrections_)
        for i, key in enumerate(designs):
            self.sibling_corrections_[key].save(directory / f"sibling-{i}")
        state = {
            "params": self.get_params(),
            "target": self.target_name_,
            "encodings": {t: e.state() for t, e in self.encodings_.items()},
            "shape_groups": sorted(self.shape_),
            "residual_sigma": self.residual_sigma_,
            "shift": self.shift_,
            "units": {k: asdict(u) for k, u in self.units_.items()},
            "prior": asdict(self.prior_),
            "measured": self.measured_,
            "sibling_corrections": [list(key) for key in designs],
        }
        (directory / "physics.json").write_text(json.dumps(state, indent=2))
        if self.anchor_ is not None:
            self.anchor_.save(directory)

    @classmethod
    def load(cls, directory: Path) -> PhysicsFamily:
        state = json.loads((directory / "physics.json").read_text())
        encodings = encodings_from_state(state)
        family = cls(targets={t: e.target for t, e in encodings.items()}, **state["params"])
        family.target_name_, family.encodings_ = state["target"], encodings
        family.residual_sigma_, shift = state["residual_sigma"], state["shift"]
        # a model saved before the matrix units had a tree of their own shifted every tree alike
        family.shift_ = shift if isinstance(shift, dict) else dict.fromkeys(state["shape_groups"], shift)
        family.units_ = {k: Unit(**u) for k, u in state["units"].items()}
        family.prior_ = Prior(**state["prior"])
        family.shape_ = {
            group: TreeFamily.load(directory / f"shape-{group}") for group in state["shape_groups"]
        }
        family.measured_ = state["measured"]
        # a model saved before siblings had corrections has none
        family.sibling_corrections_ = {
            (str(design), str(dtype)): TreeFamily.load(directory / f"sibling-{i}")
            for i, (design, dtype) in enumerate(state.get("sibling_corrections", []))
        }
        family.adapted_, family.adapted_measured_, family.harness_, family.moved_ = {}, {}, {}, set()
        family.anchor_, family.corrections_ = Anchor.load(directory), {}
        return family
