"""HLS designs as model inputs: the kernel's program graph with the design's pragma values on its
placeholder nodes (for a GNN), and a flat encoding of graph statistics and pragma values (for trees).

Graph nodes carry their kind (instruction, variable, constant, pragma), their opcode or type class,
and the size a constant or an array type states (loop bounds, buffer sizes: what unrolling multiplies
and what BRAM holds). Edges run both ways, so a pragma node hears its loop and the loop hears it.
A design's values sit in ``Graphs.slots`` on the placeholder nodes: log2 of the parallel and tile
factors and the pipeline mode, one-hot. The graph is only read from the path or text a row carries
(``program_graph.load_graph``, parsed once per graph). Where a row also carries its kernel's C source
(``code``: a path from the dataset loader or C text from an item), the ``src_*`` columns say what
the design's knobs do to the loops they annotate (``fpga_source.py``); NaN without one.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from preflight.data.catalogue import Catalogue
from preflight.data.errors import DataError
from preflight.data.fpga import BOARD, PIPELINE_MODES, factor, knob_kind, pipeline_mode, with_defaults
from preflight.data.program_graph import ProgramGraph, load_graph
from preflight.features import CONTEXT_PREFIX, Features, GraphArrays, Graphs, Slots
from preflight.features.fpga_source import SOURCE_COLUMNS, load_source, log2_count, source_statistics

TARGETS = ("cycles", "lut", "ff", "dsp", "bram", "valid")
NODE_KINDS = 4  # ProGraML: 0 instruction, 1 variable, 2 constant, 3 pragma
FLOAT_OPS = ("fadd", "fsub", "fmul", "fdiv", "fneg", "fcmp", "sitofp", "fptosi", "fpext", "fptrunc")
INT_OPS = ("add", "sub", "mul", "sdiv", "srem", "udiv", "urem", "shl", "ashr", "lshr", "and", "or", "xor")
MEMORY_OPS = ("load", "store", "getelementptr", "alloca")
CONTROL_OPS = ("br", "icmp", "phi", "select", "call", "ret", "switch")
CAST_OPS = ("sext", "zext", "trunc", "bitcast")
TYPES = ("i1", "i8", "i32", "i64", "float", "double")
PRAGMAS = ("PARALLEL", "PIPELINE", "TILE")
#: The text classes a node is one-hot encoded by: opcodes, scalar types, pointer, array, pragma, other.
VOCABULARY: tuple[str, ...] = (
    FLOAT_OPS + INT_OPS + MEMORY_OPS + CONTROL_OPS + CAST_OPS + TYPES + ("pointer", "array") + PRAGMAS
)
NODE_CHANNELS = NODE_KINDS + len(VOCABULARY) + 1 + 1  # + other text, + log2 of the stated size
#: Slot channels: log2 parallel factor, log2 tile factor, pipeline mode one-hot.
SLOT_CHANNELS = 2 + len(PIPELINE_MODES)
#: Sizes a graph states (constants, array elements) are read up to this (2^64: beyond any FPGA's memory).
MAX_SIZE = 2.0**64
#: Knobs of each kind given a column of their own, by position (the rest enter the statistics only).
POSITIONS = {"PARA": 8, "PIPE": 6, "TILE": 3}
_ARRAY = re.compile(r"\[(\d+) x ")
#: A number ending a node's text; not begun inside a run of digits (each such start scanned the run).
_CONSTANT = re.compile(r"(?<!\d)(-?\d+(?:\.\d+)?(?:e[+-]?\d+)?)\s*$")


def design(rows: pd.DataFrame, catalogue: Catalogue) -> Features:
    """Features of HLS design rows (``kernel``, ``graph``, ``pragmas``, ``tool``)."""
    specs = rows["graph"].astype(str).reset_index(drop=True)
    keys = list(dict.fromkeys(specs))
    graphs = [load_graph(spec) for spec in keys]
    trips = [loop_trips(g) for g in graphs]
    index = specs.map({k: i for i, k in enumerate(keys)}).to_numpy(dtype=np.int64)
    pragmas = [with_defaults(_as_dict(p), graphs[i].placeholders) for p, i in zip(rows["pragmas"], index)]
    tool = (rows["tool"].astype(str) == "v20").to_numpy(dtype=float)
    X = pd.concat(
        [
            graph_statistics(graphs, trips).iloc[index].reset_index(drop=True),
            pragma_statistics(pragmas, [trips[i] for i in index]),
            source_columns(rows, pragmas),
            pd.DataFrame({f"{CONTEXT_PREFIX}tool_v20": tool}),
        ],
        axis=1,
    )
    meta = pd.DataFrame(
        {
            "device_id": boards(rows, catalogue),
            "kernel": rows["kernel"].astype(str).to_numpy(),
            "tool": rows["tool"].astype(str).to_numpy(),
            "design": rows["design"].astype(str).to_numpy() if "design" in rows else np.full(len(rows), ""),
            "stratum": rows["tool"].astype(str).to_numpy(),  # the two tools err differently
        }
    )
    slots = design_slots([graphs[i] for i in index], pragmas)
    return Features(
        X=X,
        reference=pd.DataFrame(np.nan, index=X.index, columns=list(TARGETS)),
        meta=meta,
        graphs=Graphs(keys, index, lambda spec: node_arrays(load_graph(spec)), slots=slots),
    )


def source_columns(rows: pd.DataFrame, pragmas: Sequence[Mapping[str, object]]) -> pd.DataFrame:
    """Each design's ``src_*`` columns from its kernel's C source (``code``, each parsed once; NaN for a
    row without one, or rows without a ``code`` column)."""
    specs = rows["code"].fillna("").astype(str) if "code" in rows else pd.Series([""] * len(rows))
    sources = {spec: load_source(spec) for spec in dict.fromkeys(specs)}
    return pd.DataFrame(
        [source_statistics(p, sources[spec]) for p, spec in zip(pragmas, specs)], columns=list(SOURCE_COLUMNS)
    )


def boards(rows: pd.DataFrame, catalogue: Catalogue) -> np.ndarray:
    """Each row's FPGA board (catalogue id), refused unless the catalogue knows it as an FPGA."""
    names = rows["device"].astype(str) if "device" in rows else pd.Series([BOARD] * len(rows))
    resolved = {name: catalogue.resolve(name) for name in dict.fromkeys(names)}
    if wrong := [f"{n} ({d.kind})" for n, d in resolved.items() if d.kind != "fpga"]:
        raise DataError(f"device: an HLS design is synthesized for an FPGA, not {', '.join(wrong)}")
    return names.map({n: d.id for n, d in resolved.items()}).to_numpy()


def _as_dict(pragmas: object) -> Mapping[str, object]:
    return pragmas if isinstance(pragmas, Mapping) else json.loads(str(pragmas) or "{}")


def stated_size(text: str, full_text: str, kind: int) -> float:
    """log2 of the size a node states: a constant's magnitude, an array type's element count."""
    if kind == 2 and (m := _CONSTANT.search(full_text)):
        return min(math.log2(1 + min(abs(float(m.group(1))), MAX_SIZE)), math.log2(MAX_SIZE))
    return min(sum(log2_count(int(d)) for d in _ARRAY.findall(text)), math.log2(MAX_SIZE))


def text_class(text: str) -> str:
    """The vocabulary entry of a node's text ("" for none)."""
    if text in VOCABULARY:
        return text
    if text.startswith("["):
        return "array"
    if text.endswith("*"):
        return "pointer"
    return ""


def node_arrays(graph: ProgramGraph) -> GraphArrays:
    """Node features ``[nodes, NODE_CHANNELS]`` and edges both ways ``[2, 2 * edges]``."""
    nodes = graph.nodes
    x = np.zeros((len(nodes), NODE_CHANNELS), dtype=np.float32)
    kinds = pd.to_numeric(nodes["type"], errors="coerce").fillna(0).astype(int).clip(0, NODE_KINDS - 1)
    x[np.arange(len(nodes)), kinds.to_numpy()] = 1
    position = {word: NODE_KINDS + i for i, word in enumerate(VOCABULARY)}
    other = NODE_KINDS + len(VOCABULARY)
    for i, (text, full_text, kind) in enumerate(zip(nodes["text"], nodes["full_text"], kinds)):
        x[i, position.get(text_class(text), other)] = 1
        x[i, -1] = stated_size(text, full_text, kind)
    edges = np.concatenate([graph.edges, graph.edges[::-1]], axis=1)
    return x, edges


def design_slots(graphs: list[ProgramGraph], pragmas: Sequence[Mapping[str, object]]) -> Slots:
    """Each design's values on its graph's placeholder nodes."""
    width = max((len(g.placeholders) for g in graphs), default=0)
    node = np.full((len(graphs), width), -1, dtype=np.int64)
    values = np.zeros((len(graphs), width, SLOT_CHANNELS), dtype=np.float32)
    for row, (graph, design_values) in enumerate(zip(graphs, pragmas)):
        for slot, name in enumerate(sorted(graph.placeholders, key=loop_order)):
            position = graph.placeholders[name]
            node[row, slot] = position
            values[row, slot] = slot_values(name, design_values.get(name))
    return Slots(node, values)


def loop_order(placeholder: str) -> tuple[int, ...]:
    """A placeholder's loop as numbers (``__PARA__L0_10`` → (0, 10)): outer loops first, L2 before L10."""
    return tuple(int(part) for part in placeholder[9:].split("_") if part.isdigit())


def slot_values(placeholder: str, value: object) -> np.ndarray:
    """A knob's value as slot channels (a knob not set: the loop as written)."""
    out = np.zeros(SLOT_CHANNELS, dtype=np.float32)
    kind = knob_kind(placeholder)
    if kind == "PIPE":
        out[2 + PIPELINE_MODES.index(pipeline_mode(value))] = 1
    else:
        out[0 if kind == "PARA" else 1] = log2_count(factor(value))
    return out


def loop_trips(graph: ProgramGraph) -> dict[str, float]:
    """Each placeholder's loop trip count, read from the bound its loop compares against (the ``icmp``
    its pragma node is joined to); 0 where the bound is not a constant."""
    nodes, trips = graph.nodes, {}
    for name, node in graph.placeholders.items():
        joined = np.concatenate(
            [graph.edges[1, graph.edges[0] == node], graph.edges[0, graph.edges[1] == node]]
        )
        bounds = [
            float(m.group(1))
            for j in joined.tolist()
            if nodes["text"].iat[j] == "icmp" and (m := _CONSTANT.search(nodes["full_text"].iat[j]))
        ]
        trips[name] = min(max(bounds, default=0.0), MAX_SIZE)
    return trips


def graph_statistics(graphs: list[ProgramGraph], trips: list[dict[str, float]]) -> pd.DataFrame:
    """Per graph: its size, loops, operations by class, and the sizes its constants and arrays state."""
    return pd.DataFrame([_graph_statistics(g, t) for g, t in zip(graphs, trips)])


def _graph_statistics(graph: ProgramGraph, trips: dict[str, float]) -> dict[str, float]:
    nodes = graph.nodes
    kinds = pd.to_numeric(nodes["type"], errors="coerce").fillna(0).astype(int)
    text = nodes["text"]
    sizes = np.array([stated_size(t, f, k) for t, f, k in zip(text, nodes["full_text"], kinds)])
    constants, arrays = sizes[kinds.to_numpy() == 2], sizes[text.str.startswith("[").to_numpy()]
    kinds_of_knob = pd.Series([knob_kind(p) for p in graph.placeholders], dtype=str)
    return {
        "graph_nodes": log2_count(len(nodes)),
        "graph_edges": log2_count(graph.edges.shape[1]),
        "graph_instructions": float((kinds == 0).sum()),
        "graph_parallel_knobs": float((kinds_of_knob == "PARA").sum()),
        "graph_pipeline_knobs": float((kinds_of_knob == "PIPE").sum()),
        "graph_tile_knobs": float((kinds_of_knob == "TILE").sum()),
        "graph_float_ops": float(text.isin(FLOAT_OPS).sum()),
        "graph_int_ops": float(text.isin(INT_OPS).sum()),
        "graph_loads": float((text == "load").sum()),
        "graph_stores": float((text == "store").sum()),
        "graph_branches": float(text.isin(("br", "icmp")).sum()),
        "graph_calls": float((text == "call").sum()),
        "graph_largest_constant": float(constants.max(initial=0.0)),
        "graph_constant_sizes": float(constants.sum()),
        "graph_loop_trip_log2": float(sum(log2_count(t) for n, t in trips.items() if knob_kind(n) == "PARA")),
        "graph_largest_array": float(arrays.max(initial=0.0)),
        "graph_array_elements": log2_count(float((2.0 ** arrays[arrays > 0]).sum())),
    }


def pragma_statistics(pragmas: Sequence[Mapping[str, object]], trips: list[dict[str, float]]) -> pd.DataFrame:
    """Per design: how far it unrolls, tiles and pipelines its loops (given their trip counts)."""
    return pd.DataFrame([_pragma_statistics(p, t) for p, t in zip(pragmas, trips)])


def _positional(pragmas: Mapping[str, object], trips: dict[str, float]) -> dict[str, float]:
    """Each kind's first knobs in placeholder order (outer loops first), by position: the value (log2
    of a factor, the index of a pipeline mode) and the loop's trip count (log2); NaN past a kernel's
    last knob. Positions mean different loops in different kernels, but within a kernel they say
    which loop a value is set on."""
    out = {}
    for kind, count in POSITIONS.items():
        names = sorted((n for n in pragmas if knob_kind(n) == kind), key=loop_order)
        for i in range(count):
            name = names[i] if i < len(names) else None
            value = pragmas[name] if name else None
            code = PIPELINE_MODES.index(pipeline_mode(value))
            out[f"{kind.lower()}_{i}"] = (
                np.nan if name is None else float(code) if kind == "PIPE" else log2_count(factor(value))
            )
            out[f"{kind.lower()}_{i}_trip_log2"] = (
                np.nan if name is None else log2_count(trips.get(name, 0.0))
            )
    return out


def _pragma_statistics(pragmas: Mapping[str, object], trips: dict[str, float]) -> dict[str, float]:
    """Unrolling as log2 factors and as the share of each loop unrolled; the iterations left to run in
    sequence (log2 of trip over factor, summed: a latency scale); pipelining by mode, and the trip
    counts of the loops a ``flatten`` unrolls into one pipeline."""
    factors: dict[str, list[float]] = {"PARA": [], "TILE": []}
    shares, remaining, modes, flattened = [], 0.0, dict.fromkeys(PIPELINE_MODES, 0.0), 0.0
    for name, value in pragmas.items():
        kind, trip = knob_kind(name), trips.get(name, 0.0)
        if kind == "PIPE":
            mode = pipeline_mode(value)
            modes[mode] += 1
            flattened += log2_count(trip) if mode == "flatten" else 0.0
            continue
        times = factor(value)
        factors[kind].append(log2_count(times))
        if kind == "PARA" and trip > 0:
            shares.append(min(times / trip, 1.0))
            remaining += log2_count(trip / min(times, trip))
    parallel, tile, unrolled = np.array(factors["PARA"]), np.array(factors["TILE"]), np.array(shares)
    return {
        "parallel_log2_sum": float(parallel.sum()),
        "parallel_log2_max": float(parallel.max(initial=0.0)),
        "parallel_loops": float((parallel > 0).sum()),
        "unrolled_share_max": float(unrolled.max(initial=0.0)),
        "unrolled_share_mean": float(unrolled.mean()) if len(unrolled) else 0.0,
        "fully_unrolled_loops": float((unrolled >= 1).sum()),
        "sequential_log2": remaining,
        "tile_log2_sum": float(tile.sum()),
        "tile_loops": float((tile > 0).sum()),
        "flattened_trip_log2": flattened,
        **{f"pipeline_{mode or 'on'}": count for mode, count in modes.items()},
        **_positional(pragmas, trips),
    }
