"""NeuSight kernel files: bmm/linear GEMMs for the gemm task, elementwise kernels for model-latency."""

import json

from preflight.data import sources
from preflight.features import model_latency as features_of
from preflight.models.core.task import get_task

from tests.conftest import write

HEADER = "OPName,Latency,Device,Kernel Name,B,H"
ROWS = [
    "add,0.30,Tesla P100-PCIE-16GB,vectorized_elementwise_kernel,1024,4096",
    "softmax,0.20,Tesla T4,softmax_warp_forward,512,1024",
    "ln,0.10,Tesla T4,layer_norm_kernel,256,1024",
    "mulu,0.05,Tesla T4,vectorized_elementwise_kernel,64,512",
    "conv,0.05,Tesla T4,implicit_gemm,64,512",
    "add,0.05,Tesla T4,vectorized_elementwise_kernel,0,512",
    "add,-1,Tesla T4,vectorized_elementwise_kernel,64,512",
]


def test_elementwise_kernels_become_one_operator_items(tmp_path, catalogue):
    loaded = sources.load("neusight-elementwise", write(tmp_path, "elementwise.csv", [HEADER, *ROWS]))
    assert loaded.reject_counts() == {
        "OPName not one of add, addu, mul, mulu, div, divu, pow, powu, gelu, relu, tanh, ln, softmax": 1,
        "B not a positive integer": 1,
        "Latency not positive": 1,
    }
    ops = [json.loads(o)[0] for o in loaded.rows["ops"]]
    assert [o["op"] for o in ops] == ["add", "softmax", "layer_norm", "mul"]
    assert len(ops[0]["input_shapes"]) == 2 and len(ops[3]["input_shapes"]) == 1  # mulu: a scalar operand
    assert "Kernel Name" not in loaded.rows  # observed by a profiler after the run: never an input
    task = get_task("model-latency")
    features = features_of.model_on_device(task.rows(loaded.rows), catalogue)
    assert (features.meta["stratum"] == "operator.fp32").all()
    assert features.parts.frame[features_of.PART_OBSERVED].tolist() == loaded.rows["latency_ms"].tolist()


GEMM_HEADER = "OPName,Latency,Device,Kernel Name,Warps per SM,Grid x,B,M,N,K"
GEMM_ROWS = [
    "bmm,0.036,NVIDIA A100-PCIE-40GB,ampere_sgemm_128x128_nn,1.7,4,6,27,21,390",
    "linear,0.12,Tesla T4,turing_sgemm_64x64_tn,3.2,8,1,512,1024,768",
    "linear,0.30,Tesla T4,turing_sgemm_64x64_tn,3.2,8,1,1024,1024,768",
    "bmm,0.20,Tesla P4,maxwell_sgemm_128x64_nn,3.2,8,16,128,128,64",
    "conv,0.05,Tesla T4,implicit_gemm,1,1,1,64,64,64",
    "linear,0.05,Tesla T4,turing_sgemm,1,1,4,64,64,64",
    "bmm,0.05,Tesla T4,turing_sgemm,1,1,2,0,64,64",
]


def test_neusight_gemms_keep_the_batch_and_drop_what_a_profiler_saw(tmp_path, catalogue):
    loaded = sources.load("neusight", write(tmp_path, "gemm.csv", [GEMM_HEADER, *GEMM_ROWS]))
    assert loaded.reject_counts() == {
        "OPName not one of bmm/linear": 1,
        "linear with B other than 1": 1,
        "m not a positive integer": 1,
    }
    rows = loaded.rows
    assert rows["b"].tolist() == [6, 1, 1, 16] and rows["kernel"].tolist()[:2] == ["bmm", "linear"]
    assert rows["trans_b"].tolist() == [False, True, True, False]  # linear is x @ Wᵀ
    assert not {"Kernel Name", "Warps per SM", "Grid x"} & set(rows.columns)
    features = get_task("gemm").featurize(rows, catalogue)
    assert features.meta["shape"].tolist()[:2] == ["6x27x21x390", "512x1024x768"]
