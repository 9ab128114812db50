import numpy as np
import pandas as pd
import pytest
from preflight.data import sources
from preflight.data.catalogue import Catalogue
from preflight.data.errors import UnknownDevice
from preflight.data.gemm import Dtype
from preflight.data.settings import Settings
from preflight.features import gemm
from preflight.models.core.datasets import load_source
from preflight.models.core.task import get_task


def rows(**overrides) -> pd.DataFrame:
    base = {
        "m": [4096],
        "n": [4096],
        "k": [4096],
        "dtype": ["fp32"],
        "trans_a": [False],
        "trans_b": [False],
        "device": ["NV_P100"],
    }
    return pd.DataFrame(base | {k: [v] for k, v in overrides.items()})


def test_roofline_is_the_slower_of_compute_and_traffic(catalogue):
    p100 = catalogue.resolve("NV_P100")
    features = gemm.gemm_on_device(rows(), catalogue)
    compute_ms = 2 * 4096**3 / (p100.peak_tflops["fp32"] * 1e12) * 1e3
    assert features.reference["runtime_ms"][0] == pytest.approx(compute_ms)
    skinny = gemm.gemm_on_device(rows(m=1, n=4096, k=4096), catalogue)  # a GEMV: memory bound
    traffic = 4 * (4096 + 4096 * 4096) + 4 * 4096
    assert skinny.reference["runtime_ms"][0] == pytest.approx(
        traffic / (p100.memory_bandwidth_gbs * 1e9) * 1e3
    )
    assert skinny.X["bound_by_compute"][0] == 0 and features.X["bound_by_compute"][0] == 1


def test_math_dtype_sets_the_peak(catalogue):
    pseudo_fp16 = gemm.gemm_on_device(rows(dtype="fp16", math_dtype="fp32"), catalogue)
    true_fp16 = gemm.gemm_on_device(rows(dtype="fp16", math_dtype="fp16"), catalogue)
    assert pseudo_fp16.reference["runtime_ms"][0] > true_fp16.reference["runtime_ms"][0]
    assert pseudo_fp16.X["intensity_over_ridge_log2"][0] > true_fp16.X["intensity_over_ridge_log2"][0]


def test_features_are_relative_to_the_device(catalogue):
    """The same GEMM at the same share of each device's ridge point, wave count and cache looks the same
    on an old and a new GPU: no absolute spec value reaches the model."""
    X = gemm.gemm_on_device(pd.concat([rows(), rows(device="H100")], ignore_index=True), catalogue).X
    absolute = {
        "peak_tflops_log2",
        "bandwidth_gbs_log2",
        "clock_mhz",
        "tdp_w",
        "device_year",
        "compute_units",
    }
    assert not absolute & set(X.columns)
    assert X["intensity_over_ridge_log2"][0] != X["intensity_over_ridge_log2"][1]


def test_batched_gemm_multiplies_work_and_tiles(catalogue):
    one, batched = (gemm.gemm_on_device(rows(m=256, n=256, k=256, b=b), catalogue) for b in (1, 64))
    assert batched.reference["runtime_ms"][0] == pytest.approx(64 * one.reference["runtime_ms"][0])
    assert batched.X["library_waves_log2"][0] == pytest.approx(one.X["library_waves_log2"][0] + 6)
    assert batched.meta["shape"][0] == "64x256x256x256" and one.meta["shape"][0] == "256x256x256"


def test_waves_and_time_saturate_past_the_training_range(catalogue):
    huge = gemm.gemm_on_device(rows(m=2**20, n=2**20, k=2**16), catalogue).X
    assert huge["library_waves_log2"][0] == np.log2(gemm.MAX_WAVES)
    assert huge["roofline_us_log2"][0] == np.log2(gemm.SATURATION_US)


def test_amd_fp32_gemms_are_bound_by_the_matrix_cores(catalogue):
    mi100 = catalogue.resolve("AMD Instinct MI100")
    features = gemm.gemm_on_device(rows(device="AMD Instinct MI100"), catalogue)
    assert features.reference["runtime_ms"][0] == pytest.approx(2 * 4096**3 / (46.1e12) * 1e3)
    assert mi100.peak(Dtype.fp32)[0] == 23.1  # the vector peak stays what the spec sheet says


def test_wave_quantization_from_kernel_tiles(catalogue):
    units = catalogue.resolve("NV_P100").compute_units  # 56 SMs
    features = gemm.gemm_on_device(rows(m=128 * 57, n=128, block_m=128, block_n=128), catalogue)
    assert features.X["kernel_waves_log2"][0] == pytest.approx(np.log2(57 / units))
    assert features.X["kernel_wave_efficiency"][0] == pytest.approx(57 / (2 * units))
    assert features.X["kernel_tile_efficiency"][0] == pytest.approx(1.0)
    assert np.isnan(
        gemm.gemm_on_device(rows(), catalogue).X["kernel_waves_log2"][0]
    )  # no kernel given: missing, not zero


def test_features_do_not_mutate_input_and_carry_meta(catalogue):
    frame = rows()
    before = frame.copy()
    features = gemm.gemm_on_device(frame, catalogue)
    pd.testing.assert_frame_equal(frame, before)
    assert features.meta["shape"][0] == "4096x4096x4096"
    assert features.meta["device_id"][0] == catalogue.resolve("NV_P100").id
    assert not features.X.drop(columns=[c for c in features.X if c.startswith("kernel_")]).isna().any().any()


def test_unknown_device_raises(catalogue):
    with pytest.raises(UnknownDevice):
        gemm.gemm_on_device(rows(device="quantum toaster 9000"), catalogue)


def test_tiling_features_describe_one_thread_and_block(catalogue):
    config = {
        "block_m": 64,
        "block_n": 32,
        "block_k": 16,
        "threads_m": 16,
        "threads_n": 8,
        "vector_m": 2,
        "vector_n": 4,
        "cache_a": 1,
        "cache_b": 0,
    }
    X = gemm.gemm_on_device(rows(**config), catalogue).X
    assert X["kernel_threads_log2"][0] == 7  # 128 threads
    assert X["kernel_thread_tile_log2"][0] == 4  # 4 x 4 outputs per thread
    assert X["kernel_shared_kb"][0] == pytest.approx(64 * 16 * 4 / 1024)  # only A is staged
    assert X["kernel_loads_a_per_thread_log2"][0] == pytest.approx(np.log2(64 * 16 / (128 * 2)))


#: How far past its published boost clock a GPU may run (GeForce cards boost beyond it: DeepBench's
#: GTX 1080 Ti reaches 1.07x the peak that clock gives).
BOOST_MARGIN = 0.9


@pytest.mark.parametrize("source", ["local-gemm", "deepbench", "neusight"])
def test_no_shipped_gpu_measurement_beats_its_roofline(source, tmp_path):
    """The roofline is a limit: the H200's fp64 GEMMs (FP64 tensor cores, 1.6x the vector peak) and
    its fp16 GEMMs that write a 2-byte output (0.73x a bound that counted 4 bytes) broke it before."""
    task, catalogue = get_task("gemm"), Catalogue.load()
    path = sources.default_path(source, None)
    loaded, _ = load_source(source, path, Settings(home=tmp_path), catalogue, store=False)
    rows = task.rows(loaded)
    features = task.featurize(rows, catalogue)
    gpu = (features.meta["device_kind"] == "gpu").to_numpy()
    achieved = (rows["runtime_ms"].to_numpy() / features.reference["runtime_ms"].to_numpy())[gpu]
    assert gpu.sum() > 0
    assert achieved.min() >= BOOST_MARGIN, f"{(achieved < BOOST_MARGIN).sum()} rows beat the roofline"


def test_a_dtype_without_units_runs_on_those_of_its_fallback(catalogue):
    def matrix(device: str) -> float:
        return gemm.gemm_on_device(rows(dtype="fp8", device=device), catalogue).meta["matrix_units"][0]

    assert matrix("NVIDIA A10") == 1.0  # fp8 on Ampere: its fp16 tensor cores
    assert matrix("NVIDIA GeForce GTX 1080") == 0.0  # on Pascal: its vector units


def test_devices_of_one_chip_share_a_compute_unit_and_other_chips_of_its_architecture_do_not(catalogue):
    """The A100s' SMs do 128 fp32 FLOPs a clock, an A10's (another Ampere chip) 256: siblings are
    told apart from the spec sheet, and a sheet without units or a clock names its architecture."""
    names = ["nvidia-a100-pcie-40gb", "nvidia-a100-sxm4-80gb", "nvidia-a10", "nvidia-b200-sxm-180gb"]
    items = pd.concat([rows(device=name) for name in names], ignore_index=True)
    unit = gemm.gemm_on_device(items, catalogue).meta["compute_unit"].tolist()
    assert unit[0] == unit[1] == "Ampere, 128 FLOP/clock a unit"
    assert unit[2] == "Ampere, 256 FLOP/clock a unit" and unit[3] == "Blackwell"


def test_a_large_gemm_comes_with_its_halves_and_those_with_theirs(catalogue):
    features = gemm.gemm_on_device(rows(m=4096, n=4096, k=33), catalogue)
    pieces = features.pieces
    assert pieces is not None and pieces.owner.tolist() == [0] and pieces.count.tolist() == [8.0]
    assert pieces.features.X[["m_log2", "n_log2"]].iloc[0].tolist() == [11.0, 11.0]
    assert pieces.features.X["k_log2"][0] == np.log2(17)  # 33 rounded up: two slices of 17 cover it
    # the second K-slice reads the partial sums once more: its output's share of the piece's traffic
    piece_traffic = 2048 * 17 + 17 * 2048 + 2048 * 2048
    share = 2048 * 2048 / piece_traffic
    assert pieces.extra_ms[0] == pytest.approx(4 * pieces.features.meta["memory_ms"][0] * share)
    pieces = gemm.gemm_on_device(rows(), catalogue).pieces  # 4096³: 15 ms, 1.8 ms, 230 µs, 29 µs
    assert pieces is not None and pieces.depth.tolist() == [1, 2, 3] and pieces.owner.tolist() == [0, 0, 1]
    assert (
        pieces.count.tolist() == [8.0] * 3
        and pieces.features.reference["runtime_ms"][2] * 1e3 < gemm.LARGE_US
    )


def test_a_gemm_between_its_launch_floor_and_large_or_a_batch_of_scalars_has_no_pieces(catalogue):
    assert gemm.gemm_on_device(rows(m=512, n=512, k=512), catalogue).pieces is None  # 29 µs
    scalars = rows(m=1, n=1, k=1).assign(b=2**30)
    assert gemm.gemm_on_device(scalars, catalogue).reference["runtime_ms"][0] * 1e3 >= gemm.LARGE_US
    assert gemm.gemm_on_device(scalars, catalogue).pieces is None


def test_a_gemm_under_its_launch_floor_is_padded_into_containers_until_one_reaches_it(catalogue):
    pieces = gemm.gemm_on_device(rows(m=64, n=64, k=64), catalogue).pieces  # 0.06 µs, 0.45 µs, 3.6 µs
    assert pieces is not None and pieces.depth.tolist() == [1, 2] and pieces.owner.tolist() == [0, 0]
    assert pieces.count.tolist() == [1.0, 1.0] and pieces.extra_ms.tolist() == [0.0, 0.0]
    assert pieces.features.X["m_log2"].tolist() == [7.0, 8.0]
    meta = pieces.features.meta
    assert max(meta["compute_ms"][1], meta["memory_ms"][1]) >= gemm.LAUNCH_FLOOR_MS["gpu"]
