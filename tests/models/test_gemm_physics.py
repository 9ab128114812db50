"""Physics written down as tests, over every GPU in the catalogue: the GEMM champion's family trained
on the shipped extracts (DeepBench, NeuSight) never answers faster than the roofline, gets no less
efficient as a GEMM grows, has a launch floor, and adapts to one device without moving another."""

import copy
import json
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from preflight.data import sources
from preflight.data.catalogue import Catalogue
from preflight.data.settings import Settings
from preflight.features import Features
from preflight.features.gemm import LARGE_US
from preflight.models.core.datasets import available_sources, task_data
from preflight.models.core.predictor import Predictor
from preflight.models.core.task import get_task
from preflight.models.families.physics import PhysicsFamily, law, law_gradient

GEMM = get_task("gemm")
DTYPES = ("fp32", "fp16", "bf16")
SIZES = (4096, 8192, 16384, 32768)


@pytest.fixture(scope="module")
def shipped(catalogue: Catalogue) -> tuple[pd.DataFrame, object]:
    """Rows of the shipped GPU extracts and their features."""
    rows = pd.concat(
        [GEMM.rows(sources.load(s, sources.default_path(s, None)).rows) for s in ("deepbench", "neusight")],
        ignore_index=True,
    )
    return rows, GEMM.featurize(rows, catalogue)


@pytest.fixture(scope="module")
def predictor(shipped) -> Predictor:
    rows, features = shipped
    groups = GEMM.group_values(features.meta, GEMM.group_key)
    return Predictor(GEMM, "physics").fit(features, GEMM.target_frame(rows), groups)


def _gpus(catalogue: Catalogue) -> list[str]:
    return [d.id for d in catalogue if d.kind == "gpu" and d.peak_tflops and d.memory_bandwidth_gbs]


def _items(devices: list[str], shapes: list[tuple[int, int, int]]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"m": m, "n": n, "k": k, "dtype": dtype, "device": device, "trans_a": False, "trans_b": False}
            for device in devices
            for dtype in DTYPES
            for m, n, k in shapes
        ]
    )


def _estimates(predictor: Predictor, catalogue: Catalogue, items: pd.DataFrame):
    features = GEMM.featurize(GEMM.rows(items), catalogue)
    return features, predictor.predict(features, 0.9)


def test_no_estimate_or_interval_end_beats_the_roofline(predictor, catalogue):
    shapes = [
        (1, 1, 1),
        (64, 64, 64),
        (1, 4096, 4096),
        (4096, 1, 4096),
        (4096, 4096, 1),
        *[(s, s, s) for s in SIZES],
    ]
    features, estimates = _estimates(predictor, catalogue, _items(_gpus(catalogue), shapes))
    roofline = features.reference["runtime_ms"].to_numpy()
    for side in ("value", "low", "high"):
        runtime = getattr(estimates, side)["runtime_ms"].to_numpy()
        assert (runtime >= roofline * (1 - 1e-12)).all(), side


#: How far achieved TFLOP/s may fall from one size to the next, as a share of the lowest (tail waves).
FALL = 0.05


def _tflops(items: pd.DataFrame, runtime_ms: np.ndarray) -> np.ndarray:
    return 2.0 * items.m.to_numpy() * items.n.to_numpy() * items.k.to_numpy() / runtime_ms / 1e9


def _assert_never_less_efficient(items: pd.DataFrame, runtime_ms: np.ndarray) -> None:
    """Achieved TFLOP/s along ``items`` (a GEMM growing at one aspect) never falls by more than ``FALL``."""
    tflops = _tflops(items, runtime_ms)
    assert (np.diff(tflops) >= -FALL * tflops.min()).all(), tflops


def test_a_larger_gemm_is_never_less_efficient(predictor, catalogue):
    items = _items(_gpus(catalogue), [(s, s, s) for s in SIZES])
    _, estimates = _estimates(predictor, catalogue, items)
    tflops = _tflops(items, estimates.value["runtime_ms"].to_numpy())
    table = items.assign(tflops=tflops).pivot_table("tflops", ["device", "dtype"], "m")
    falling = table[table.diff(axis=1).min(axis=1) < -FALL * table.min(axis=1)]
    assert falling.empty, falling


#: Aspects (m, n, k relative to a size s) a GEMM grows at: square, one long side, one short side (a
#: thin linear layer's few tokens, a rank-16 update), two short sides.
ASPECTS = (
    (1, 1, 1),
    (4, 1, 1),
    (1, 4, 1),
    (1, 1, 4),
    (1 / 64, 1, 1),
    (1, 1 / 64, 1),
    (1, 1, 1 / 64),
    (1, 1, 1 / 1024),
    (1 / 16, 1 / 16, 1),
    (16, 1, 1 / 16),
)


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="known miss: the shared shape tree reads whether a GEMM is compute-bound without a direction, "
    "so 86 of 2,640 series still fall where k = s/1024 crosses the ridge (docs/BENCHMARKS.md, issue 24, "
    "twenty-sixth and twenty-seventh sessions); leaving it out, even with containers, costs Titan Xp shots",
)
def test_a_larger_gemm_is_never_less_efficient_at_any_aspect(predictor, catalogue):
    """Past 100 µs of roofline, a GEMM grown at a fixed aspect and layout is never less efficient, on
    every GPU and dtype. Before a GEMM was bound by its pieces, 125 of the 2,640 series fell: a 32768² ×
    32 fp32 GEMM on an A100 40GB ran at 1.4 TFLOP/s, between 2.1 at half and 4.5 at twice its size."""
    sizes = [2**e for e in range(10, 17)]
    items = pd.concat(
        [
            _items(_gpus(catalogue), [tuple(max(1, int(s * r)) for r in aspect) for s in sizes]).assign(
                aspect=i, trans_b=trans_b
            )
            for i, aspect in enumerate(ASPECTS)
            for trans_b in (False, True)
        ],
        ignore_index=True,
    )
    features, estimates = _estimates(predictor, catalogue, items.drop(columns="aspect"))
    large = features.reference["runtime_ms"].to_numpy() >= LARGE_US / 1e3
    items = items.assign(runtime_ms=estimates.value["runtime_ms"].to_numpy())[large]
    for _, series in items.groupby(["device", "dtype", "aspect", "trans_b"]):
        series = series.sort_values(["m", "n", "k"])
        _assert_never_less_efficient(series, series["runtime_ms"].to_numpy())


def test_a_gemm_is_never_slower_than_its_pieces_run_one_after_another(predictor, catalogue):
    """A large GEMM's estimate is at most its pieces' (every side halved, recursively) run back to back,
    their partial sums' extra output traffic included: 8192³ is never slower than eight 4096³."""
    shapes = [(s, s, s) for s in SIZES] + [(64, 16384, 16384), (16384, 16384, 16), (4097, 4097, 4097)]
    items = _items(_gpus(catalogue), shapes)
    features, estimates = _estimates(predictor, catalogue, items)
    pieces = features.pieces
    assert pieces is not None
    first = pieces.depth == 1  # each item's own pieces, asked for as items (with pieces of their own)
    owner, count, extra_ms = pieces.owner[first], pieces.count[first], pieces.extra_ms[first]
    assert len(np.unique(owner)) > len(features.X) / 2
    sides = np.rint(2 ** pieces.features.X.loc[first, ["m_log2", "n_log2", "k_log2"]].to_numpy())
    halves = items.iloc[owner].reset_index(drop=True).assign(m=sides[:, 0], n=sides[:, 1], k=sides[:, 2])
    alone = _estimates(predictor, catalogue, halves)[1].value["runtime_ms"].to_numpy()
    whole = estimates.value["runtime_ms"].to_numpy()[owner]
    assert (whole <= (count * alone + extra_ms) * (1 + 1e-9)).all()


def test_a_tiny_gemm_pays_the_launch_floor(predictor, catalogue):
    _, estimates = _estimates(predictor, catalogue, _items(_gpus(catalogue), [(1, 1, 1)]))
    assert (estimates.low["runtime_ms"] >= 2e-3).all() and (estimates.value["runtime_ms"] >= 2e-3).all()


@pytest.fixture(scope="module")
def champion() -> tuple[Predictor, Catalogue]:
    """The family as the embedded default trains it, on every shipped source (the Hopper sweeps' tiny
    tensor-core GEMMs among them), and a catalogue with the devices that travel with them."""
    catalogue, settings = Catalogue.load(), Settings(datasets=None)
    rows = task_data(GEMM, settings, catalogue, available_sources(GEMM, settings), store=False).rows
    features = GEMM.featurize(rows, catalogue)
    groups = GEMM.group_values(features.meta, GEMM.group_key)
    return Predictor(GEMM, "physics").fit(features, GEMM.target_frame(rows), groups), catalogue


def test_a_gemm_is_never_slower_than_a_larger_one_that_contains_it(champion):
    """A library could pad a small GEMM into a 256³ one (each under its launch floor is bounded by its
    container, every side doubled). The latency of tiny GEMMs, read as a shape term, made a 16³ fp32
    GEMM 78x slower than 256³ on an RTX 4090 (2.4 ms), and the shape term alone still erred by up to
    2.6x at the launch floor."""
    shapes = [(1, 1, 1), (16, 16, 16), (64, 64, 64), (128, 128, 128), (256, 256, 256)]
    predictor, catalogue = champion
    items = _items(_gpus(catalogue), shapes)
    _, estimates = _estimates(predictor, catalogue, items)
    table = items.assign(ms=estimates.value["runtime_ms"].to_numpy()).pivot_table(
        "ms", ["device", "dtype"], "m"
    )
    contained = table[[1, 16, 64, 128]].max(axis=1) / table[256]
    assert (contained <= 1 + 1e-9).all(), contained.sort_values().tail()


def test_a_device_with_matrix_units_runs_fp16_no_slower_than_tf32_nor_tf32_than_fp32(champion):
    """On every device of the catalogue, whatever its kind, whose sheet puts fp16 on matrix units, a large
    fp16 GEMM is no slower than the same GEMM in tf32, and tf32 no slower than fp32. The Jetson AGX Orin,
    read as a phone while its sheet described its GPU, ran fp16 at 13.3 ms and tf32 at 8.5 ms (4096³)."""
    predictor, catalogue = champion
    devices = [d.id for d in catalogue if d.peak_tflops and d.memory_bandwidth_gbs]
    items = pd.DataFrame(
        [
            {"m": s, "n": s, "k": s, "dtype": t, "device": d, "trans_a": False, "trans_b": False}
            for d in devices
            for t in ("fp32", "tf32", "fp16")
            for s in (4096, 8192)
        ]
    )
    features, estimates = _estimates(predictor, catalogue, items)
    table = items.assign(
        ms=estimates.value["runtime_ms"].to_numpy(), matrix=features.meta["matrix_units"].to_numpy()
    )
    fp16_on_matrix = table[(table.dtype == "fp16") & (table.matrix > 0)].device.unique()
    assert "nvidia-jetson-agx-orin-64gb" in fp16_on_matrix
    ms = table[table.device.isin(fp16_on_matrix)].pivot_table("ms", ["device", "m"], "dtype")
    assert (ms.fp16 <= ms.tf32 * 1.001).all(), ms[ms.fp16 > ms.tf32]
    assert (ms.tf32 <= ms.fp32 * 1.001).all(), ms[ms.tf32 > ms.fp32]


def test_a_tensor_core_gemm_is_tens_of_percent_off_its_peak(predictor, catalogue):
    """The matrix-unit prior (no public row measures one): an H100 SXM's 4096³ fp16 within 0.19-0.3 ms
    (the shipped H100 sweep's fp16 GEMMs of the same 137 GFLOP took 0.19-0.21 ms), its 0.9 interval no
    faster than the chip, and an SXM faster than a PCIe card."""
    items = pd.DataFrame(
        [
            {
                "m": 4096,
                "n": 4096,
                "k": 4096,
                "dtype": "fp16",
                "device": d,
                "trans_a": False,
                "trans_b": False,
            }
            for d in ("nvidia-h100-sxm5-80gb", "nvidia-h100-pcie-80gb")
        ]
    )
    features, estimates = _estimates(predictor, catalogue, items)
    sxm, pcie = estimates.value["runtime_ms"].to_numpy()
    assert 0.19 <= sxm <= 0.3 and pcie > 1.2 * sxm
    assert estimates.low["runtime_ms"].iloc[0] >= features.reference["runtime_ms"].iloc[0]


def test_measurements_of_one_device_leave_every_other_answer_bit_identical(predictor, catalogue):
    gpus = _gpus(catalogue)
    items = _items(gpus, [(s, s, s) for s in (64, 1024, 4096)])
    features, before = _estimates(predictor, catalogue, items)
    shots = pd.DataFrame(
        [{"m": s, "n": s, "k": s, "dtype": "fp16", "device": "nvidia-h100-sxm5-80gb", "trans_a": False,
          "trans_b": False, "runtime_ms": 200.0 * s / 4096} for s in (1024, 2048, 4096)]
    )  # fmt: skip
    shot_features = GEMM.featurize(GEMM.rows(shots), catalogue)
    adapted = predictor.adapted(shot_features, GEMM.target_frame(shots))
    after = adapted.predict(features, 0.9)
    others = (items.device != "nvidia-h100-sxm5-80gb").to_numpy()
    for side in ("value", "low", "high"):
        np.testing.assert_array_equal(
            getattr(after, side).to_numpy()[others], getattr(before, side).to_numpy()[others]
        )
    h100 = ~others & (items.dtype == "fp16").to_numpy()
    assert (after.value["runtime_ms"].to_numpy()[h100] > before.value["runtime_ms"].to_numpy()[h100]).all()
    assert adapted.adaptation and adapted.adaptation != predictor.adaptation


def test_a_unit_moves_on_two_measurements_not_on_one(predictor, catalogue):
    """One measurement cannot be checked against another: the unit keeps its answers, intervals
    included, until a second one agrees with it."""
    items = _items(["nvidia-h100-sxm5-80gb"], [(s, s, s) for s in (512, 2048, 8192)])
    features, before = _estimates(predictor, catalogue, items)
    shots = pd.DataFrame(
        [{"m": s, "n": s, "k": s, "dtype": "fp16", "device": "nvidia-h100-sxm5-80gb", "trans_a": False,
          "trans_b": False} for s in (1024, 4096)]
    )  # fmt: skip
    shot_features = GEMM.featurize(GEMM.rows(shots), catalogue)
    slower = 1.6 * predictor.predict(shot_features, 0.9).value["runtime_ms"].to_numpy()
    measured = GEMM.target_frame(shots.assign(runtime_ms=slower))
    fp16 = (items.dtype == "fp16").to_numpy()

    def runtimes(estimates) -> np.ndarray:
        return np.stack([getattr(estimates, s)["runtime_ms"].to_numpy() for s in ("value", "low", "high")])

    def answers(rows: list[int]) -> np.ndarray:
        adapted = predictor.adapted(shot_features.take(rows), measured.iloc[rows].reset_index(drop=True))
        return runtimes(adapted.predict(features, 0.9))

    unmeasured = runtimes(before)
    np.testing.assert_array_equal(answers([1]), unmeasured)  # its interval too: the shots answer nothing
    assert (answers([0, 1])[0, fp16] > 1.2 * unmeasured[0, fp16]).all()


@pytest.fixture(scope="module")
def deepbench(shipped) -> tuple[pd.DataFrame, Features]:
    """The shipped DeepBench rows alone and their features: the benchmark's leave-one-device-out set."""
    rows, features = shipped
    at = np.flatnonzero((rows["source"] == "deepbench").to_numpy())
    return rows.iloc[at].reset_index(drop=True), features.take(at)


@pytest.mark.parametrize("device", ["nvidia-tesla-m40", "amd-radeon-instinct-mi25", "nvidia-titan-xp"])
def test_ten_shots_are_no_worse_than_none_over_five_draws(deepbench, device):
    """A DeepBench device held out of DeepBench, then adapted with 10 of its rows drawn five ways (as
    ``bench/gpu_physics.py --only deepbench-draws``): on average the rest are no worse off. One draw
    alone is noise: the first draw of the MI25 held out of every shipped source loses 0.2 points."""
    rows, features = deepbench
    held = (features.meta["device_id"] == device).to_numpy()
    family = PhysicsFamily(targets=GEMM.targets).fit(
        features.take(np.flatnonzero(~held)), GEMM.target_frame(rows[~held]).reset_index(drop=True)
    )
    at = np.flatnonzero(held)
    zero, adapted = [], []
    for seed in range(5):
        shots = np.random.default_rng(seed).choice(at, 10, replace=False)
        rest = np.setdiff1d(at, shots)
        measured = rows["runtime_ms"].to_numpy()[rest]

        shot_rows = GEMM.target_frame(rows.iloc[shots]).reset_index(drop=True)
        for answers, f in ((zero, family), (adapted, family.adapt(features.take(shots), shot_rows))):
            estimate = f.predict(features.take(rest))["runtime_ms"].to_numpy()
            answers.append(np.median(np.abs(estimate - measured) / measured))
    assert np.mean(adapted) <= np.mean(zero), (zero, adapted)


@pytest.fixture(scope="module")
def hoppers(shipped, catalogue) -> tuple[PhysicsFamily, pd.DataFrame]:
    """The family trained on the shipped public extracts and the shipped H200 sweep; the H100 sweep."""
    public, _ = shipped
    local = GEMM.rows(sources.load("local-gemm", sources.default_path("local-gemm", None)).rows)
    h200, h100 = (local[local.device == d] for d in ("nvidia-h200-sxm-141gb", "nvidia-h100-sxm5-80gb"))
    train = pd.concat([public, h200], ignore_index=True)
    family = PhysicsFamily(targets=GEMM.targets).fit(
        GEMM.featurize(train, catalogue), GEMM.target_frame(train)[["runtime_ms"]]
    )
    return family, h100.reset_index(drop=True)


def test_a_hopper_from_its_measured_sibling_keeps_its_large_gemms_in_the_envelope(hoppers, catalogue):
    """The shipped H100 sweep estimated with only the H200's (same silicon, more bandwidth) in training:
    the tensor cores' ramp is fitted gentler than the vector units' shape (their board's power cap binds
    before size stops paying), so nine in ten of its GEMMs of ≥ 1 ms are estimated no more than 20% too
    fast (0.77 at the tenth percentile without the ramp) and the median error stays under 11% (14.3%
    before the ramp, 11.7% before the overlap)."""
    family, h100 = hoppers
    matrix = [
        u.ramp for key, u in family.units_.items() if key.startswith("nvidia-h200") and "/fp32" not in key
    ]
    assert max(matrix) < 1.0
    features = GEMM.featurize(h100, catalogue)
    ratio = family.predict(features)["runtime_ms"].to_numpy() / h100["runtime_ms"].to_numpy()
    large = features.reference["runtime_ms"].to_numpy() >= 1.0
    assert np.median(np.abs(ratio - 1)) < 0.11 and np.quantile(ratio[large], 0.1) > 0.8


def test_hoppers_nobody_measured_are_estimated_within_a_quarter(shipped, catalogue):
    """The shipped H100 and H200 sweeps (tensor cores, timed in a stream of launches) from the public
    GPUs alone (vector units, most of their calls timed alone): the mean of the per-dtype median errors
    stays within 27% (32.7% while every unit added its launch floor to its work, 25.6% since each fits
    how its floor overlaps its work; the issue's target is 25%)."""
    public, features = shipped
    family = PhysicsFamily(targets=GEMM.targets).fit(features, GEMM.target_frame(public)[["runtime_ms"]])
    local = GEMM.rows(sources.load("local-gemm", sources.default_path("local-gemm", None)).rows)
    hoppers = local[local.device.isin(["nvidia-h200-sxm-141gb", "nvidia-h100-sxm5-80gb"])]
    estimate = family.predict(GEMM.featurize(hoppers, catalogue))["runtime_ms"].to_numpy()
    error = hoppers.assign(ape=np.abs(estimate / hoppers["runtime_ms"].to_numpy() - 1))
    assert error.groupby(["device", "dtype"]).ape.median().mean() <= 0.27


def test_a_model_saved_before_units_had_a_ramp_loads_with_a_ramp_of_one(hoppers, catalogue, tmp_path):
    """A registered model from before the ramp and the overlap (no ``log_ramp`` or ``log_overlap``
    anywhere, three-part deviations) loads and answers as the law did then: every unit, measured or not,
    follows the shape term at α = 1 and adds its floor to its work (q = 1)."""
    family, h100 = hoppers
    family.save(tmp_path)
    state = json.loads((tmp_path / "physics.json").read_text())
    for unit in state["units"].values():
        del unit["log_ramp"], unit["log_overlap"]
    del state["prior"]["log_ramp"], state["prior"]["gpu_log_overlap"]
    for measured in state["measured"].values():
        measured["deviation"] = measured["deviation"][:3]
    (tmp_path / "physics.json").write_text(json.dumps(state))
    old = PhysicsFamily.load(tmp_path)
    expected = copy.copy(family)
    expected.units_ = {k: replace(u, log_ramp=0.0, log_overlap=0.0) for k, u in family.units_.items()}
    expected.prior_ = replace(family.prior_, log_ramp={}, gpu_log_overlap=0.0)
    expected.measured_ = {k: m | {"deviation": m["deviation"][:3]} for k, m in family.measured_.items()}
    items = _items(["nvidia-h100-sxm5-80gb", "nvidia-a100-sxm4-80gb"], [(s, s, s) for s in (64, 4096)])
    features = GEMM.featurize(GEMM.rows(items), catalogue)
    np.testing.assert_allclose(old.predict(features).to_numpy(), expected.predict(features).to_numpy())


def test_the_laws_gradient_is_its_derivative():
    """The fits' exact Jacobian agrees with central differences of the law, floor- and work-bound rows
    and every parameter alike."""
    rng = np.random.default_rng(0)
    n = 400
    compute, memory = np.exp(rng.normal(0, 3, n)), np.exp(rng.normal(0, 3, n))
    log_g = rng.normal(0, 0.3, n)
    unit = np.column_stack(
        [rng.uniform(-2, 0, n), rng.uniform(-2, 0, n), rng.uniform(-5, 0, n), rng.uniform(-1, 1, n)]
        + [rng.uniform(-1, 2, n)]
    )
    gradient, step = law_gradient(compute, memory, unit, log_g), 1e-6
    for column in range(unit.shape[1]):
        shift = np.zeros_like(unit)
        shift[:, column] = step
        differences = (
            law(compute, memory, unit + shift, log_g) - law(compute, memory, unit - shift, log_g)
        ) / (2 * step)
        np.testing.assert_allclose(gradient[:, column], differences, atol=1e-7)


def _measured(items: pd.DataFrame, runtimes: np.ndarray, catalogue: Catalogue) -> tuple:
    rows = GEMM.rows(items.assign(runtime_ms=runtimes))
    return GEMM.featurize(rows, catalogue), GEMM.target_frame(rows)


def test_three_shots_of_a_unit_correct_it_where_on_the_shape_they_depart(predictor, catalogue):
    """An A100 SXM's fp32 GEMMs with a short reduction (k = 64 to 256, still compute-bound) measured
    twice as slow as estimated, its cubes as estimated: no compute efficiency explains both, so the unit
    learns where on the shape it departs from the shared shape term. An unmeasured short GEMM among them
    follows them, a large cube keeps its estimate, every other unit answers bit for bit as before, and
    the corrected family itself (before any clip of the predictor's) never beats the roofline nor gets
    less efficient as a GEMM grows, across the memory/compute boundary too."""
    device = "nvidia-a100-sxm4-80gb"
    short, cubes = [(4096, 4096, k) for k in (64, 128, 256)], [(s, s, s) for s in (1024, 2048, 4096)]
    shots = _items([device], short + cubes).query("dtype == 'fp32'").reset_index(drop=True)
    _, estimated = _estimates(predictor, catalogue, shots)
    slower = np.where(shots.k < 512, 2.0, 1.0) * estimated.value["runtime_ms"].to_numpy()
    adapted = predictor.adapted(*_measured(shots, slower, catalogue))
    assert set(adapted.family_.corrections_) == {f"{device}/fp32"}
    fixed_aspect = [(s, s, s // 1024) for s in (4096, 8192, 16384, 32768, 65536)]
    shapes = [(4096, 4096, 96), *[(s, s, s) for s in SIZES], *fixed_aspect]
    asked = _items([device, "nvidia-a100-pcie-80gb"], shapes)
    features, before = _estimates(predictor, catalogue, asked)
    after = adapted.predict(features, 0.9)
    corrected = (asked.device == device).to_numpy() & (asked.dtype == "fp32").to_numpy()
    for side in ("value", "low", "high"):
        np.testing.assert_array_equal(
            getattr(after, side).to_numpy()[~corrected], getattr(before, side).to_numpy()[~corrected]
        )
    ratio = after.value["runtime_ms"].to_numpy()[corrected] / before.value["runtime_ms"].to_numpy()[corrected]
    # the parameters alone leave the short GEMM at 1.00x
    assert abs(ratio[0] / 2.0 - 1) < 0.1 and (np.abs(ratio[1 : 1 + len(SIZES)] - 1) < 0.1).all(), ratio
    own = adapted.family_.predict(features.take(np.flatnonzero(corrected)))["runtime_ms"].to_numpy()
    assert (own >= features.reference["runtime_ms"].to_numpy()[corrected] * (1 - 1e-12)).all()
    for part in (slice(1, 1 + len(SIZES)), slice(1 + len(SIZES), None)):
        _assert_never_less_efficient(asked[corrected].iloc[part], own[part])


def test_a_gpu_nobody_measured_departs_from_the_shape_term_where_its_measured_sibling_does(
    shipped, catalogue
):
    """NeuSight's A100 80GB kernels from its five training GPUs (the benchmark's protocol, on the shipped
    extract), among them the A100 40GB, the same silicon: the architecture's departure from the shared
    shape term, learned on the 40GB's rows, makes the 80GB's bmm and linear kernels more accurate than
    the law alone (13.6 / 9.9% MAPE without it, 12.2 / 7.8% with), never faster than the roofline; an
    A10 (Ampere too, but SMs that do twice the fp32 work: another chip) and a GPU of an architecture
    nobody measured (the H100: no Hopper trained) answer bit for bit as without it."""
    rows, features = shipped
    at = np.flatnonzero((rows["source"] == "neusight").to_numpy())
    family = PhysicsFamily(targets=GEMM.targets).fit(
        features.take(at), GEMM.target_frame(rows.iloc[at]).reset_index(drop=True)
    )
    alone = copy.copy(family)
    alone.sibling_corrections_ = {}
    path = sources.default_path("neusight", None)
    test = GEMM.rows(sources.load("neusight", path.parent / "gemm_test.csv.gz").rows)
    test = test[test.device == "NVIDIA A100 80GB PCIe"].reset_index(drop=True)
    test_features = GEMM.featurize(test, catalogue)
    assert (test_features.meta["compute_unit"].iloc[0], "fp32") in family.sibling_corrections_
    measured = test["runtime_ms"].to_numpy()
    with_it, without = (f.predict(test_features)["runtime_ms"].to_numpy() for f in (family, alone))
    for kernel in ("bmm", "linear"):
        on = (test["kernel"] == kernel).to_numpy()
        mape = [np.mean(np.abs(e[on] / measured[on] - 1)) for e in (with_it, without)]
        assert mape[0] < mape[1], (kernel, mape)
    assert (with_it >= test_features.reference["runtime_ms"].to_numpy() * (1 - 1e-12)).all()
    others = _items(["nvidia-a10", "nvidia-h100-sxm5-80gb"], [(64, 64, 64), (4096, 4096, 4096)])
    others = GEMM.featurize(GEMM.rows(others), catalogue)
    np.testing.assert_array_equal(family.predict(others).to_numpy(), alone.predict(others).to_numpy())


def test_a_saved_family_corrects_as_it_did_and_one_saved_without_an_anchor_adapts_parameters(
    hoppers, catalogue, tmp_path
):
    """The anchor the corrections learn against is saved with the family: a loaded family adapts to
    three shots exactly as the one that was saved; a family saved before it had one moves the unit's
    parameters only."""
    family, h100 = hoppers
    fp32 = h100[h100.dtype == "fp32"].reset_index(drop=True)
    shots, rest = fp32.iloc[:3], fp32.iloc[3:40]
    shot_features = GEMM.featurize(shots, catalogue)
    # measurements no set of its parameters explains: the unit is corrected
    measured = GEMM.target_frame(shots)[["runtime_ms"]] * np.array([[2.0], [1.0], [0.5]])
    features = GEMM.featurize(rest, catalogue)
    family.save(tmp_path)
    adapted, reloaded = (f.adapt(shot_features, measured) for f in (family, PhysicsFamily.load(tmp_path)))
    assert set(adapted.corrections_) == set(reloaded.corrections_) == {"nvidia-h100-sxm5-80gb/fp32"}
    np.testing.assert_array_equal(reloaded.predict(features).to_numpy(), adapted.predict(features).to_numpy())
    (tmp_path / "anchor.parquet").unlink()
    old = PhysicsFamily.load(tmp_path).adapt(shot_features, measured)
    parameters_only = copy.copy(family)
    parameters_only.anchor_ = None
    assert not old.corrections_
    np.testing.assert_array_equal(
        old.predict(features).to_numpy(),
        parameters_only.adapt(shot_features, measured).predict(features).to_numpy(),
    )


def test_a_correction_never_answers_faster_than_the_roofline(hoppers, catalogue):
    """Shots five times faster than the H100's fp32 law at some shapes pull its correction down there;
    the corrected family's answers stop at the roofline."""
    family, h100 = hoppers
    fp32 = h100[h100.dtype == "fp32"].reset_index(drop=True)
    shots, rest = fp32.iloc[:4], fp32.iloc[4:200]
    measured = GEMM.target_frame(shots)[["runtime_ms"]] * np.array([[0.2], [1.0], [0.2], [1.0]])
    adapted = family.adapt(GEMM.featurize(shots, catalogue), measured)
    assert adapted.corrections_
    features = GEMM.featurize(rest, catalogue)
    roofline = features.reference["runtime_ms"].to_numpy()
    assert (adapted.predict(features)["runtime_ms"].to_numpy() >= roofline * (1 - 1e-12)).all()


def test_a_corrected_unit_is_never_less_efficient_for_a_larger_gemm(predictor, catalogue):
    """Shots that ask for the opposite (an A100 SXM's fp32 GEMMs of one aspect, the memory-bound ones
    twice as fast as estimated and the compute-bound ones twice as slow) cannot make a larger GEMM of
    that aspect less efficient: the correction reads no column that grows with a GEMM without a
    direction (whether it is compute-bound, the library's tile)."""
    device, sizes = "nvidia-a100-sxm4-80gb", (2048, 4096, 8192, 16384, 32768, 65536)
    items = (
        _items([device], [(s, s, s // 1024) for s in sizes]).query("dtype == 'fp32'").reset_index(drop=True)
    )
    features, estimated = _estimates(predictor, catalogue, items)
    shots = np.array([1, 2, 4, 5])
    measured = np.where(items.m < 16384, 0.5, 2.0) * estimated.value["runtime_ms"].to_numpy()
    adapted = predictor.adapted(
        *_measured(items.iloc[shots].reset_index(drop=True), measured[shots], catalogue)
    )
    assert adapted.family_.corrections_
    _assert_never_less_efficient(items, adapted.family_.predict(features)["runtime_ms"].to_numpy())


def test_a_gpus_shots_timed_back_to_back_move_its_overlap_for_every_dtype(predictor, catalogue):
    """An H100 timed as calls launched back to back hide its launch floor (overlap q = 4, where the
    public GPUs' lone calls fit about 1.3): its fp16 and fp32 shots move the whole device's overlap,
    so its bf16, never measured, follows them; the CPU measured beside it keeps its own (a CPU's calls
    do not overlap), and every other device answers bit for bit as before."""
    family, device = predictor.base_family_, "nvidia-h100-sxm5-80gb"
    back_to_back = copy.copy(family)
    back_to_back.harness_ = {device: float(np.log(4.0))}
    cubes = [(s, s, s) for s in (256, 512, 1024, 2048, 4096)]
    gpu = _items([device], cubes)
    cpu = _items(["intel-xeon-phi-7250"], cubes[:3]).query("dtype == 'fp32'")
    shots = pd.concat([gpu[gpu.dtype != "bf16"], cpu], ignore_index=True)
    shot_features = GEMM.featurize(GEMM.rows(shots), catalogue)
    truth = back_to_back.predict(shot_features)["runtime_ms"].to_numpy()
    adapted = family.adapt(*_measured(shots, truth, catalogue))
    assert set(adapted.harness_) == {device} and np.log(2.0) < adapted.harness_[device] < np.log(4.5)
    asked = _items([device, "nvidia-a100-sxm4-80gb"], cubes)
    features = GEMM.featurize(GEMM.rows(asked), catalogue)
    before, after = (f.predict(features)["runtime_ms"].to_numpy() for f in (family, adapted))
    expected = back_to_back.predict(features)["runtime_ms"].to_numpy()
    miss_before, miss_after = (np.abs(np.log(answer / expected)) for answer in (before, after))
    bf16 = (asked.device == device).to_numpy() & (asked.dtype == "bf16").to_numpy() & (miss_before > 0.01)
    assert bf16.sum() >= 2 and (miss_after[bf16] < 0.5 * miss_before[bf16]).all(), (miss_before, miss_after)
    others = (asked.device != device).to_numpy()
    np.testing.assert_array_equal(after[others], before[others])


def test_shots_the_current_overlap_explains_leave_it(predictor, catalogue):
    """Measurements that the device's overlap already predicts do not move it (each left out is no
    better predicted by an overlap fitted to the rest)."""
    family = predictor.base_family_
    shots = _items(["nvidia-h100-sxm5-80gb"], [(s, s, s) for s in (256, 1024, 4096)])
    features = GEMM.featurize(GEMM.rows(shots), catalogue)
    own = family.predict(features)["runtime_ms"].to_numpy()
    assert family.adapt(*_measured(shots, own, catalogue)).harness_ == {}


def test_a_shape_group_with_one_training_row_reads_g_of_one(shipped):
    """A group of the shape term (here the CPUs and phones) with a single training row learns no tree:
    its rows answer by their unit's efficiencies alone instead of failing (`report --rows 10` did)."""
    rows, features = shipped
    gpu = (features.meta["device_kind"] == "gpu").to_numpy()
    cpu = np.flatnonzero(~gpu)[:1]
    keep = np.r_[np.flatnonzero(gpu)[:2000], cpu]
    family = PhysicsFamily(targets=GEMM.targets).fit(
        features.take(keep), GEMM.target_frame(rows.iloc[keep]).reset_index(drop=True)
    )
    estimate = family.predict(features.take(cpu))["runtime_ms"].to_numpy()
    assert np.isfinite(estimate).all() and (estimate > 0).all()
