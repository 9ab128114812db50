import pytest
from preflight.data.catalogue import Catalogue, DeviceSpec
from preflight.data.errors import AmbiguousDevice, DeviceConflict, UnknownDevice
from preflight.data.gemm import Dtype


def test_catalogue_is_broad(catalogue):
    specs = list(catalogue)
    assert len(specs) >= 30
    assert {s.kind for s in specs} >= {"gpu", "cpu", "soc"}
    assert {s.vendor for s in specs} >= {"nvidia", "amd", "intel"}
    assert len({s.id for s in specs}) == len(specs)


@pytest.mark.parametrize(
    "name, expected",
    [
        ("NV_P100", "p100"),
        ("Tesla P100", "p100"),
        ("p100", "p100"),
        ("Tesla V100-SXM2-16GB", "v100-sxm2-16gb"),  # nvidia-smi
        ("NVIDIA GeForce RTX 4070", "rtx-4070"),  # torch.cuda.get_device_name()
        ("Intel(R) Xeon(R) Gold 6226 CPU @ 2.70GHz", "gold-6226"),  # lscpu
        ("AMD EPYC 7763 64-Core Processor", "epyc-7763"),
        ("NV_TitanX", "titan-x-maxwell"),
        ("titanx", "titan-x-pascal"),  # DeepBench vs HELP
        ("NV_V100", "v100-sxm2-16gb"),  # DeepBench names beyond the shared copy
        ("NVIDIA H100 80GB HBM3", "h100"),
        ("Tesla V100-PCIE-32GB", "v100-pcie-32gb"),  # NeuSight
        ("NV_1080Ti", "gtx-1080-ti"),
        ("H100", "h100-sxm5"),  # shorthand in data: the variant the catalogue gives it
        ("A100", "a100-sxm4-40gb"),
        ("IA_KNL7250", "phi-7250"),
        ("iPhone_7", "a10"),
        ("raspi4", "raspberry-pi-4"),  # HELP's meta-test names
        ("pixel2", "snapdragon-835"),
        ("gold_6226", "gold-6226"),
    ],
)
def test_names_resolve(catalogue, name, expected):
    assert expected in catalogue.resolve(name).id


def test_resolution_is_general_not_a_table(catalogue):
    # spelling variants no alias lists: case, punctuation, memory size relaxed
    assert catalogue.resolve("tesla-v100-sxm2-16gb").id == catalogue.resolve("V100-SXM2-16GB").id
    assert "a100" in catalogue.resolve("NVIDIA A100-SXM4-40GB").id
    assert "h100" in catalogue.resolve("h100 sxm5").id


def test_unknown_device_lists_close_matches(catalogue):
    with pytest.raises(UnknownDevice) as info:
        catalogue.resolve("rtx 4070 tii")
    assert "NVIDIA GeForce RTX 4070" in info.value.close
    assert "close matches" in str(info.value)


A100S = ("nvidia-a100-sxm4-40gb", "nvidia-a100-sxm4-80gb", "nvidia-a100-pcie-40gb", "nvidia-a100-pcie-80gb")


@pytest.mark.parametrize(
    "query, fitting",
    [
        ("h100", ("nvidia-h100-sxm5-80gb", "nvidia-h100-pcie-80gb")),
        ("A100", A100S),
        ("a100 sxm4", A100S[:2]),
        ("A100 40GB", A100S[::2]),
        ("NV_P100", ("nvidia-tesla-p100-pcie-16gb", "nvidia-tesla-p100-sxm2-16gb")),
    ],
)
def test_lookup_lists_every_device_a_name_fits(catalogue, query, fitting):
    with pytest.raises(AmbiguousDevice) as info:
        catalogue.lookup(query)
    names = sorted(catalogue.get(device_id).name for device_id in fitting)
    assert info.value.close == names and f"fits {len(names)} devices: {'; '.join(names)}" in str(info.value)
    assert sorted(catalogue.lookup(name).id for name in names) == sorted(fitting)  # each named resolves


@pytest.mark.parametrize(
    "name, expected",
    [
        ("nvidia-a100-sxm4-40gb", "nvidia-a100-sxm4-40gb"),  # an id
        ("NVIDIA A100 PCIe 80 GB", "nvidia-a100-pcie-80gb"),  # a name
        ("H100 SXM5", "nvidia-h100-sxm5-80gb"),  # an alias no other device fits
        ("NVIDIA H100 80GB HBM3", "nvidia-h100-sxm5-80gb"),  # nvidia-smi
        ("Tesla V100-PCIE-32GB", "nvidia-tesla-v100-pcie-32gb"),
        ("NV_1080Ti", "nvidia-geforce-gtx-1080-ti"),
        ("rtx 4070", "nvidia-geforce-rtx-4070"),
    ],
)
def test_lookup_resolves_a_name_one_device_fits_directly(catalogue, name, expected):
    assert catalogue.lookup(name).id == expected


def test_lookup_of_an_unknown_name_lists_close_matches(catalogue):
    with pytest.raises(UnknownDevice) as info:
        catalogue.lookup("rtx 4070 tii")
    assert type(info.value) is UnknownDevice and "NVIDIA GeForce RTX 4070" in info.value.close


def test_peak_falls_back_to_the_units_that_do_the_work(catalogue):
    m40 = catalogue.resolve("NV_M40")
    peak, fallback = m40.peak(Dtype.bf16)
    assert fallback and peak > 0
    v100 = catalogue.resolve("Tesla V100-PCIE-32GB")  # fp16 tensor cores, no bf16 units: fp32 does it
    assert v100.peak(Dtype.bf16) == (v100.peak_tflops[Dtype.fp32], True)
    assert v100.peak(Dtype.fp16) == (v100.peak_tflops[Dtype.fp16], False)


def test_a_fallback_dtype_runs_at_the_gemm_rate_of_the_dtype_doing_the_work(catalogue):
    gtx1080 = catalogue.resolve("NVIDIA GeForce GTX 1080")  # fp16 GEMMs at the fp32 rate, not 1/64
    assert gtx1080.gemm_peak(Dtype.fp8) == (gtx1080.gemm_peak_tflops[Dtype.fp16], True)
    a10 = catalogue.resolve("NVIDIA A10")  # no fp8 units: its fp16 tensor cores do it
    assert (
        a10.working_dtype(Dtype.fp8) == Dtype.fp16
        and a10.gemm_peak(Dtype.fp8)[0] == a10.peak_tflops[Dtype.fp16]
    )


def test_registered_devices_persist(tmp_path):
    user_file = tmp_path / "devices.json"
    spec = DeviceSpec(
        id="lab-gpu",
        name="Lab GPU X1",
        kind="gpu",
        memory_bandwidth_gbs=900,
        peak_tflops={"fp32": 20.0},
        aliases=["labx1"],
    )
    Catalogue.load(user_file).register(spec)
    assert Catalogue.load(user_file).resolve("LabX1").id == "lab-gpu"


def test_spec_without_fp32_peak_is_refused():
    with pytest.raises(ValueError, match="fp32"):
        DeviceSpec(id="x", name="x", kind="gpu", memory_bandwidth_gbs=1, peak_tflops={"fp16": 1.0})


def lab_gpu(**fields) -> DeviceSpec:
    """A valid user spec sheet, with ``fields`` replacing its values."""
    sheet = {
        "id": "lab-gpu",
        "name": "Lab GPU X1",
        "kind": "gpu",
        "memory_bandwidth_gbs": 900,
        "peak_tflops": {"fp32": 20.0},
    }
    return DeviceSpec.model_validate(sheet | fields)


@pytest.mark.parametrize(
    "fields, catalogue_name",
    [
        ({"name": "nvidia h100 sxm5 80 gb"}, "NVIDIA H100 SXM5 80 GB"),  # exact, other case
        ({"name": "nvidia h100 sxm5 80gb"}, "NVIDIA H100 SXM5 80 GB"),  # normalised
        ({"name": "Tesla-H100 (SXM5) 80GB"}, "NVIDIA H100 SXM5 80 GB"),  # normalised
        ({"name": "H100 SXM5 94GB"}, "NVIDIA H100 SXM5 80 GB"),  # relaxed: memory size dropped
        ({"aliases": ["mine", "NV_P100"]}, "NVIDIA Tesla P100 PCIe 16 GB"),  # an alias
        ({"id": "nvidia-tesla-p100-pcie-16gb"}, "NVIDIA Tesla P100 PCIe 16 GB"),  # an id
    ],
)
def test_user_names_never_shadow_the_catalogue(tmp_path, fields, catalogue_name):
    catalogue = Catalogue.load(tmp_path / "devices.json")
    with pytest.raises(DeviceConflict, match="taken by the catalogue") as info:
        catalogue.register(lab_gpu(**fields))
    assert catalogue_name in str(info.value)
    assert "lab-gpu" not in {spec.id for spec in catalogue}
    assert not (tmp_path / "devices.json").exists()
    assert catalogue.resolve("nvidia h100 sxm5 80gb").id == "nvidia-h100-sxm5-80gb"


def test_a_user_device_can_be_updated_under_its_own_id(tmp_path):
    catalogue = Catalogue.load(tmp_path / "devices.json")
    catalogue.register(lab_gpu(aliases=["labx1"]))
    catalogue.register(lab_gpu(aliases=["labx1", "lab x one"], memory_bandwidth_gbs=1000))
    again = Catalogue.load(tmp_path / "devices.json").resolve("lab x one")
    assert again.id == "lab-gpu" and again.memory_bandwidth_gbs == 1000


@pytest.mark.parametrize(
    "fields",
    [
        {"peak_tflops": {"fp32": float("nan")}},
        {"peak_tflops": {"fp32": float("inf")}},
        {"peak_tflops": {"fp32": 1e-300}},
        {"gemm_peak_tflops": {"fp32": 1e6}},
        {"memory_bandwidth_gbs": float("nan")},
        {"memory_bandwidth_gbs": 1e-300},
        {"memory_gb": 1e-300},
        {"boost_clock_mhz": float("inf")},
        {"tdp_w": 1e-300},
        {"launch_price_usd": 1e300},
        {"compute_units": 10**8},
        {"year": 1800},
        {"llc_mb": float("nan")},
        {"resources": {"lut": float("inf")}},
        {"resources": {"lut": 1e13}},
        {"resources": {f"r{i}": 1.0 for i in range(17)}},
        {"id": "a" * 1_000_000},
        {"id": "a" * 65},
        {"name": "n" * 129},
        {"vendor": "v" * 65},
        {"architecture": "a" * 65},
        {"aliases": [f"lab {i}" for i in range(17)]},
        {"aliases": [""]},
        {"aliases": ["a" * 129]},
    ],
)
def test_spec_values_are_finite_and_bounded(fields):
    with pytest.raises(ValueError):
        lab_gpu(**fields)


def test_spec_values_at_the_bounds_are_accepted():
    spec = lab_gpu(
        id="a" * 64,
        name="n" * 128,
        aliases=["a" * 128] * 16,
        peak_tflops={"fp32": 1e-4, "fp16": 1e5},
        resources={"lut": 1e12, "dsp": 0},
        year=2100,
    )
    assert spec.peak_tflops["fp32"] == 1e-4


def test_unregister_removes_a_user_device_and_persists(tmp_path):
    user_file = tmp_path / "devices.json"
    catalogue = Catalogue.load(user_file)
    catalogue.register(lab_gpu())
    assert catalogue.unregister("lab-gpu").name == "Lab GPU X1"
    with pytest.raises(UnknownDevice):
        catalogue.resolve("Lab GPU X1")
    assert len(Catalogue.load(user_file)) == len(Catalogue.shipped())


def test_unregister_refuses_catalogue_entries_and_unknown_ids(tmp_path):
    catalogue = Catalogue.load(tmp_path / "devices.json")
    with pytest.raises(DeviceConflict, match="a catalogue entry cannot be deleted"):
        catalogue.unregister("nvidia-h100-sxm5-80gb")
    with pytest.raises(UnknownDevice) as info:
        catalogue.unregister("nvidia-h100-sxm5-80g")
    assert "NVIDIA H100 SXM5 80 GB" in info.value.close
    assert catalogue.resolve("H100 SXM5").id == "nvidia-h100-sxm5-80gb"


def test_a_name_of_punctuation_alone_matches_no_device(tmp_path):
    catalogue = Catalogue.load(tmp_path / "devices.json")
    catalogue.register(lab_gpu(name="¤"))  # normalises to nothing, as "!!!" does
    assert catalogue.resolve("¤").id == "lab-gpu"  # its exact name still works
    with pytest.raises(UnknownDevice):
        catalogue.resolve("!!!")


@pytest.mark.parametrize("fields", [{"llc_mb": False}, {"tdp_w": True}, {"peak_tflops": {"fp32": True}}])
def test_a_boolean_is_not_a_number_on_a_spec_sheet(fields):
    with pytest.raises(ValueError, match="boolean"):
        lab_gpu(**fields)
