"""FPGA synthesis: the latency and resource use of an HLS design, and whether it fits at all, before
hours of synthesis.

A design is a kernel's program graph with a value for each of its pragmas (``data/fpga.py``). A
hardware engineer exploring pragma settings brings a kernel the model has not seen, so the split
holds kernels out by default. Resources are fractions of the board's (a catalogue device of kind
``fpga``); ``valid`` is the probability that synthesis succeeds within them, and the other targets are
learned on the designs that did (only those have a latency and a footprint).
"""

from __future__ import annotations

from preflight.data.fpga import FpgaItem, item_cost
from preflight.features import fpga as fpga_features
from preflight.models.core.actions import Action
from preflight.models.core.targets import Target
from preflight.models.core.task import Task, register
from preflight.models.tools import explore


def _resource(name: str) -> Target:
    return Target(
        "fraction of the device",
        "log1p",
        lower=0.0,
        upper=1.0,
        zero_ok=True,
        description=f"{name} used, as a fraction of the board's",
    )


#: A loop of 64 iterations (y[i] = a * x[i]) as a program graph: its bound, its compare, the PARALLEL
#: and PIPELINE pragmas on it, and the body, in ProGraML's JSON form.
_VSCALE = {
    "nodes": [
        {"text": "i32", "type": 2, "full_text": "i32 64"},
        {"text": "icmp", "type": 0, "full_text": "icmp slt i32 %i, 64"},
        {"text": "PARALLEL", "type": 3, "full_text": "#pragma ACCEL PARALLEL auto{__PARA__L0}"},
        {"text": "PIPELINE", "type": 3, "full_text": "#pragma ACCEL PIPELINE auto{__PIPE__L0}"},
        {"text": "load", "type": 0},
        {"text": "fmul", "type": 0},
        {"text": "store", "type": 0},
    ],
    "edges": [
        {"source": 0, "target": 1, "flow": 1},
        {"source": 2, "target": 1, "flow": 3},
        {"source": 3, "target": 1, "flow": 3},
        {"source": 1, "target": 4, "flow": 0},
        {"source": 4, "target": 5, "flow": 0},
        {"source": 5, "target": 6, "flow": 0},
    ],
}


def with_graph(table):
    """Designs whose kernel's program graph was found (every family reads the graph's statistics)."""
    return table[table["graph"].astype(str) != ""]


register(
    Task(
        name="fpga",
        item=FpgaItem,
        targets={
            "cycles": Target("cycles", "log", lower=0.0, description="latency of the design in clock cycles"),
            "lut": _resource("look-up tables"),
            "ff": _resource("flip-flops"),
            "dsp": _resource("DSP slices"),
            "bram": _resource("block RAM"),
            "valid": Target(
                "probability",
                "binary",
                lower=0.0,
                upper=1.0,
                description="synthesis succeeds and the design fits the board",
            ),
        },
        sources=("hlsyn",),
        featurize=fpga_features.design,
        # design: every design its own group, i.e. a random split (kernels seen), for scale only
        groups={
            "kernel": ("kernel",),
            "tool": ("tool",),
            "kernel-tool": ("kernel", "tool"),
            "design": ("design",),
        },
        group_key="kernel",
        families=("tree", "gnn", "linear"),
        default_family="tree",
        baseline="linear",
        examples=(
            {"kernel": "vscale", "graph": _VSCALE, "pragmas": {"__PARA__L0": 8, "__PIPE__L0": "flatten"}},
            {"kernel": "vscale", "graph": _VSCALE, "pragmas": {"__PARA__L0": 1}, "tool": "v18"},
        ),
        metric="rmse_log10",
        # the board is an input, not a device to adapt to; a kernel's synthesized designs adapt its
        # estimates by their residuals (a design's neighbours in pragma space err alike)
        device_column=None,
        adapt_column="kernel",
        adaptation="residual",
        seen_columns=("kernel", "device_id"),
        max_rows_per_source=40_000,
        select=with_graph,
        # a design is a row: 8 epochs over ~25k designs (~80 s on one core) learn what 100 over a few
        # thousand architectures do
        family_params={"gnn": {"epochs": 8, "batch_size": 256}},
        cost=item_cost,
        cost_unit="20 units a design, one more per four nodes or edges of its graph",
        actions=(
            Action(
                "explore",
                "/v1/fpga/explore",
                explore.ExploreRequest,
                explore.ExploreResponse,
                explore.explore_designs,
                examples={
                    "graph": {
                        "summary": "unrolling and pipelining of a loop, from its program graph",
                        "value": {
                            "kernel": "vscale",
                            "graph": _VSCALE,
                            "designs": [
                                {"__PARA__L0": 1},
                                {"__PARA__L0": 4, "__PIPE__L0": "flatten"},
                                {"__PARA__L0": 16, "__PIPE__L0": "cg"},
                            ],
                            "limits": {"lut": 0.6},
                        },
                    }
                },
            ),
        ),
    )
)
