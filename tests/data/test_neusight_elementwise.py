import json

from preflight.data import sources
from preflight.features import model_latency as features_of
from preflight.models.task import get_task

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
    path = tmp_path / "elementwise.csv"
    path.write_text("\n".join([HEADER, *ROWS]) + "\n")
    loaded = sources.load("neusight-elementwise", path)
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
    features = features_of.tabular(task.rows(loaded.rows), catalogue)
    assert (features.meta["stratum"] == "operator").all()
    assert features.parts.frame[features_of.PART_OBSERVED].tolist() == loaded.rows["latency_ms"].tolist()
