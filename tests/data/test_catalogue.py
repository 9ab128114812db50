import pytest
from preflight.data.catalogue import Catalogue, DeviceSpec
from preflight.data.errors import UnknownDevice
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
        ("IA_KNL7250", "phi-7250"),
        ("iPhone_7", "a10"),
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


def test_peak_falls_back_to_the_units_that_do_the_work(catalogue):
    m40 = catalogue.resolve("NV_M40")
    peak, fallback = m40.peak(Dtype.bf16)
    assert fallback and peak > 0


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
