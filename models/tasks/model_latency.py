"""Whole-model latency (transformers, inference and training) on GPUs, as the sum of kernel estimates."""

from preflight.data.model_latency import OPERATOR_COST, ModelLatencyItem, item_cost
from preflight.data.sources import neusight_traces
from preflight.features import model_latency as model_latency_features
from preflight.models.core.targets import Target
from preflight.models.core.task import Task, register

register(
    Task(
        name="model-latency",
        item=ModelLatencyItem,
        # no run beats the summed roofline of its kernels: estimates and intervals are kept at or above it
        targets={
            "latency_ms": Target(
                "ms", description="end to end; training = forward + backward", at_least_reference=True
            )
        },
        sources=(neusight_traces.SOURCE, "neusight-elementwise"),
        featurize=model_latency_features.model_on_device,
        groups={"device": ("device_id",), "model": ("model",), "model-device": ("model", "device_id")},
        group_key="device",
        families=("kernel-sum", "roofline"),
        default_family="kernel-sum",
        baseline="roofline",
        examples=(
            {"model": "gpt2_large", "batch": 4, "seq": 1024, "mode": "inf", "device": "Tesla T4"},
            {
                "ops": [
                    {
                        "op": "linear",
                        "input_shapes": [[8, 512, 1024], [4096, 1024]],
                        "output_shape": [8, 512, 4096],
                    }
                ],
                "dtype": "fp16",
                "device": "NVIDIA A100 80GB PCIe",
            },
        ),
        metric="mape",
        # no trace measured fp16 or bf16: such items are flagged, and their stratum is uncalibrated
        seen_columns=("dtype",),
        cost=item_cost,
        cost_unit=f"{OPERATOR_COST} units an operator",
    )
)
