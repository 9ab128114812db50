"""GEMM runtime, power and energy on GPUs and CPUs, including devices known only by spec sheet."""

from preflight.data.gemm import GemmItem
from preflight.features import gemm as gemm_features
from preflight.models.targets import Target
from preflight.models.task import Task, register

GEMM = register(
    Task(
        name="gemm",
        item=GemmItem,
        targets={"runtime_ms": Target("ms"), "power_w": Target("W"), "energy_j": Target("J")},
        sources=("local-gemm", "gpperf", "deepbench", "uci-sgemm"),
        featurize=gemm_features.tabular,
        # shape-kernel: a tuning sweep of one shape (UCI) is split by kernel family, library calls by shape
        groups={
            "shape": ("shape",),
            "device": ("device_id",),
            "kernel": ("kernel",),
            "shape-kernel": ("shape", "kernel"),
            "shape-device": ("shape", "device_id"),
        },
        group_key="shape-kernel",
        families=("tree", "roofline"),
        default_family="tree",
        baseline="roofline",
        metric="mape",
    )
)
