"""Small HLSyn-layout data the tests make: program graphs of loop nests (a loop bound per loop, its
pragma nodes joined to its compare) and designs whose latency and resources follow the pragmas."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np

#: name -> (trip counts of its loops, floating-point operations in the body)
KERNELS: dict[str, tuple[tuple[int, ...], int]] = {
    "k-gemm": ((64, 64, 32), 2),
    "k-mvt": ((128, 128), 1),
    "k-stencil": ((32, 32, 8), 5),
    "k-atax": ((96, 64), 2),
}
HEADER = "tool_version,kernel,design_key,valid,perf_cycles,util_BRAM,util_DSP,util_LUT,util_FF,pragmas"


def _node(i: int, text: str, kind: int, full_text: str = "") -> str:
    values = f'<attvalue for="0" value="{text}" /><attvalue for="1" value="{kind}" />'
    values += f'<attvalue for="2" value="{full_text}" />'
    return f'<node id="{i}"><attvalues>{values}</attvalues></node>'


def kernel_gexf(trips: tuple[int, ...], float_ops: int) -> str:
    """A ProGraML-like graph: per loop a bound constant, a compare and PARALLEL/PIPELINE pragma nodes
    (a TILE on the outer loop), then the body's loads, float ops and a store, in control order."""
    nodes, edges = [], []
    control = []
    for loop, trip in enumerate(trips):
        constant, compare = len(nodes), len(nodes) + 1
        nodes += [
            _node(constant, "i32", 2, f"i32 {trip}"),
            _node(compare, "icmp", 0, f"icmp slt i32 %i, {trip}"),
        ]
        edges.append((constant, compare, 1))
        control.append(compare)
        knobs = [("PARALLEL", "PARA"), ("PIPELINE", "PIPE")] + ([("TILE", "TILE")] if loop == 0 else [])
        for text, tag in knobs:
            pragma = len(nodes)
            nodes.append(_node(pragma, text, 3, f"#pragma ACCEL {text} auto{{__{tag}__L{loop}}}"))
            edges += [(pragma, compare, 3), (compare, pragma, 3)]
    body = ["load", "load", *(["fmul", "fadd"] * float_ops)[:float_ops], "store"]
    for text in body:
        control.append(len(nodes))
        nodes.append(_node(len(nodes), text, 0))
    edges += [(a, b, 0) for a, b in itertools.pairwise(control)]
    flow = '<attvalues><attvalue for="3" value="{}" /></attvalues>'
    edge_xml = "".join(
        f'<edge id="{i}" source="{s}" target="{t}">{flow.format(f)}</edge>'
        for i, (s, t, f) in enumerate(edges)
    )
    return (
        '<?xml version="1.0" encoding="utf-8"?><gexf version="1.2" xmlns="http://www.gexf.net/1.2draft">'
        '<graph defaultedgetype="directed"><attributes class="node">'
        '<attribute id="0" title="text" type="string" /><attribute id="1" title="type" type="long" />'
        '<attribute id="2" title="full_text" type="string" /></attributes>'
        '<attributes class="edge"><attribute id="3" title="flow" type="long" /></attributes>'
        f"<nodes>{''.join(nodes)}</nodes><edges>{edge_xml}</edges></graph></gexf>"
    )


def design_outcome(trips: tuple[int, ...], float_ops: int, pragmas: dict, tool: str) -> dict:
    """Latency shrinks with unrolling and pipelining, resources grow with them; over 0.8 does not fit."""
    parallel = [min(int(pragmas[f"__PARA__L{i}"]), t) for i, t in enumerate(trips)]
    pipelined = sum(pragmas[f"__PIPE__L{i}"] != "off" for i in range(len(trips)))
    lanes = float(np.prod(parallel))
    cycles = (
        float(np.prod(trips)) * (float_ops + 2) / lanes / (1 + pipelined) * (1.2 if tool == "v18" else 1.0)
    )
    dsp = min(0.002 * float_ops * lanes * (1 + pipelined), 1.0)
    lut = min(0.05 + 0.004 * lanes * (float_ops + 1), 1.0)
    ff, bram = min(0.6 * lut, 1.0), min(0.01 * len(trips) * np.sqrt(lanes), 1.0)
    valid = max(dsp, lut, ff, bram) <= 0.8
    return {"valid": valid, "cycles": cycles, "lut": lut, "ff": ff, "dsp": dsp, "bram": bram}


def write_hlsyn(
    folder: Path, designs_per_kernel: int = 36, seed: int = 0, kernels: tuple[str, ...] = tuple(KERNELS)
) -> Path:
    """``fpga/hlsyn_designs.csv`` (designs of ``kernels``) and every kernel's graph under ``folder``;
    the designs file's path."""
    root = folder / "fpga"
    graphs = root / "hlsyn_raw" / "graphs"
    graphs.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    lines = [HEADER]
    for kernel, (trips, float_ops) in KERNELS.items():
        (graphs / f"{kernel}_processed_result.gexf").write_text(kernel_gexf(trips, float_ops))
        for d in range(designs_per_kernel if kernel in kernels else 0):
            pragmas = {f"__PARA__L{i}": int(rng.choice([1, 2, 4, 8, 16])) for i in range(len(trips))}
            pragmas |= {f"__PIPE__L{i}": str(rng.choice(["off", "", "flatten"])) for i in range(len(trips))}
            pragmas["__TILE__L0"] = int(rng.choice([1, 2, 4]))
            tool = "v18" if d % 2 else "v20"
            out = design_outcome(trips, float_ops, pragmas, tool)
            noise = float(np.exp(rng.normal(0, 0.05)))
            targets = (
                [out["cycles"] * noise, out["bram"], out["dsp"], out["lut"], out["ff"]]
                if out["valid"]
                else [0.0] * 5
            )
            quoted = '"' + json.dumps(pragmas).replace('"', '""') + '"'
            values = ",".join(f"{v:.6g}" for v in targets)
            lines.append(f"{tool},{kernel},{kernel}-{d},{out['valid']},{values},{quoted}")
    path = root / "hlsyn_designs.csv"
    path.write_text("\n".join(lines) + "\n")
    return path
