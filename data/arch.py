"""One architecture representation for every search space: a DAG of operations.

This is the canonical form loaders validate against and featurizers read (``features/arch.py``).

Nodes are operations (with a kernel size, expansion and group count where the op has them), edges
carry data, node 0 is the input and the last node the output. NAS-Bench-201 cells (``arch_str``),
FBNet layer lists (``op_str_list``), NAS-Bench-101-style cells (adjacency + ops, as in EC-NAS) and
NAS-Bench-Graph GNN architectures (link pattern + ops) all parse into it, so one model can learn
across spaces. Parsers raise ``ValueError`` saying what was wrong with the notation.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache, wraps
from typing import Any, TypeVar

import numpy as np

#: The fixed operation vocabulary shared by every space (fixed here, never fitted per split).
OPS = (
    "input",
    "output",
    "zero",
    "skip",
    "conv",
    "mbconv",
    "avgpool",
    "maxpool",
    "gat",
    "gcn",
    "gin",
    "cheb",
    "sage",
    "arma",
    "graph",
    "fc",
)
SPACES = ("nb201", "fbnet", "nb101", "nasbench-graph", "opgraph")  # opgraph: an explicit graph, no space


@dataclass(frozen=True)
class Node:
    op: str
    kernel: int = 0
    expansion: int = 0
    groups: int = 0


@dataclass(frozen=True)
class OpGraph:
    """An architecture: operations in topological order and the edges between them."""

    space: str
    nodes: tuple[Node, ...]
    edges: tuple[tuple[int, int], ...]

    def __post_init__(self) -> None:
        if any(node.op not in OPS for node in self.nodes):
            raise ValueError(f"unknown op in {[n.op for n in self.nodes]}; known: {OPS}")
        if any(not 0 <= a < b < len(self.nodes) for a, b in self.edges):
            raise ValueError("edges must run forward between existing nodes (a DAG in topological order)")

    def depths(self) -> np.ndarray:
        """Longest path from the input to each node."""
        depth = np.zeros(len(self.nodes), dtype=int)
        for a, b in sorted(self.edges):
            depth[b] = max(depth[b], depth[a] + 1)
        return depth


# -- parsers, one per notation --------------------------------------------------------------------

_NB201_OPS = {
    "none": "zero",
    "skip_connect": "skip",
    "nor_conv_1x1": "conv",
    "nor_conv_3x3": "conv",
    "avg_pool_3x3": "avgpool",
}


def from_nb201(arch_str: str) -> OpGraph:
    """``|op~0|+|op~0|op~1|+|op~0|op~1|op~2|``: ops on the edges of a 4-node cell become nodes."""
    groups = arch_str.strip().strip("|").split("|+|")
    if len(groups) != 3:
        raise ValueError(f"NAS-Bench-201 arch_str needs 3 cell nodes separated by '+', got {len(groups)}")
    nodes, edges, ends = [Node("input")], [], {0: [0]}  # feature-map node -> graph nodes that produce it
    for target, group in enumerate(groups, start=1):
        entries = group.split("|")
        if len(entries) != target:
            raise ValueError(f"cell node {target} needs {target} inputs, got {len(entries)}: {group!r}")
        ends[target] = []
        for source, entry in enumerate(entries):
            match = re.fullmatch(r"(\w+)~(\d+)", entry)
            if not match or match[1] not in _NB201_OPS or int(match[2]) != source:
                raise ValueError(
                    f"bad NAS-Bench-201 edge {entry!r}: expected op~{source} with op in {list(_NB201_OPS)}"
                )
            kernel = {"nor_conv_1x1": 1, "nor_conv_3x3": 3, "avg_pool_3x3": 3}.get(match[1], 0)
            nodes.append(Node(_NB201_OPS[match[1]], kernel=kernel))
            edges += [(producer, len(nodes) - 1) for producer in ends[source]]
            ends[target].append(len(nodes) - 1)
    nodes.append(Node("output"))
    edges += [(producer, len(nodes) - 1) for producer in ends[3]]
    return OpGraph("nb201", tuple(nodes), tuple(sorted(edges)))


FBNET_LAYERS = 22


def from_fbnet(op_str_list: str | Sequence[str]) -> OpGraph:
    """``k5_e6|skip|k3_e1_g2|...``: 22 searchable layers in a chain."""
    layers = op_str_list.split("|") if isinstance(op_str_list, str) else list(op_str_list)
    if len(layers) != FBNET_LAYERS:
        raise ValueError(f"FBNet needs {FBNET_LAYERS} layers, got {len(layers)}")
    nodes = [Node("input")]
    for layer in layers:
        if layer == "skip":
            nodes.append(Node("skip"))
            continue
        match = re.fullmatch(r"k(3|5)_e(1|3|6)(_g2)?", layer)
        if not match:
            raise ValueError(f"bad FBNet layer {layer!r}: expected 'skip' or k{{3,5}}_e{{1,3,6}}[_g2]")
        nodes.append(
            Node("mbconv", kernel=int(match[1]), expansion=int(match[2]), groups=2 if match[3] else 1)
        )
    nodes.append(Node("output"))
    return OpGraph("fbnet", tuple(nodes), tuple((i, i + 1) for i in range(len(nodes) - 1)))


_NB101_OPS = {
    "conv3x3-bn-relu": Node("conv", kernel=3),
    "conv1x1-bn-relu": Node("conv", kernel=1),
    "maxpool3x3": Node("maxpool", kernel=3),
}


def from_nb101(adjacency: Sequence[Sequence[int]], ops: Sequence[str]) -> OpGraph:
    """A NAS-Bench-101 cell: an upper-triangular adjacency matrix and one op per node."""
    matrix = np.asarray(adjacency)
    if matrix.ndim != 2 or matrix.shape != (len(ops), len(ops)):
        raise ValueError(
            f"adjacency must be {len(ops)}x{len(ops)} to match {len(ops)} ops, got shape {matrix.shape}"
        )
    if not np.isin(matrix, (0, 1)).all() or np.tril(matrix).any():
        raise ValueError("adjacency must hold 0/1 and be strictly upper-triangular (a DAG in order)")
    if len(ops) < 2 or ops[0] != "input" or ops[-1] != "output":
        raise ValueError("ops must start with 'input' and end with 'output'")
    unknown = [op for op in ops[1:-1] if op not in _NB101_OPS]
    if unknown:
        raise ValueError(f"unknown NAS-Bench-101 ops {unknown}; known: {list(_NB101_OPS)}")
    nodes = (Node("input"), *(_NB101_OPS[op] for op in ops[1:-1]), Node("output"))
    return OpGraph("nb101", nodes, tuple((int(a), int(b)) for a, b in zip(*np.nonzero(matrix))))


_GRAPH_OPS = ("gat", "gcn", "gin", "cheb", "sage", "arma", "graph", "fc", "skip")


def from_nas_bench_graph(link: str | Sequence[int], ops: Sequence[str]) -> OpGraph:
    """NAS-Bench-Graph: op i reads the output of node ``link[i]`` (0 = input, j = op j); unread ops feed
    the output."""
    sources = [int(x) for x in link.split("-")] if isinstance(link, str) else [int(x) for x in link]
    if len(sources) != len(ops) or not ops:
        raise ValueError(f"link pattern needs one source per op: {len(sources)} sources for {len(ops)} ops")
    if any(not 0 <= s <= i for i, s in enumerate(sources)):
        raise ValueError(
            f"link {sources}: op {1 + next(i for i, s in enumerate(sources) if not 0 <= s <= i)} "
            "must read the input or an earlier op"
        )
    unknown = [op for op in ops if op not in _GRAPH_OPS]
    if unknown:
        raise ValueError(f"unknown NAS-Bench-Graph ops {unknown}; known: {list(_GRAPH_OPS)}")
    nodes = (Node("input"), *(Node(op) for op in ops), Node("output"))
    edges = [(s, i + 1) for i, s in enumerate(sources)]
    read = set(sources)
    edges += [(i, len(nodes) - 1) for i in range(1, len(ops) + 1) if i not in read]
    return OpGraph("nasbench-graph", nodes, tuple(sorted(edges)))


def from_opgraph(nodes: Sequence[dict], edges: Sequence[Sequence[int]]) -> OpGraph:
    """An explicit op graph: ``nodes`` as ``{"op", "kernel", "expansion", "groups"}`` in topological
    order (input first, output last), ``edges`` as ``[from, to]`` pairs."""
    if not all(isinstance(node, dict) for node in nodes):
        raise ValueError('each node is an object such as {"op": "conv", "kernel": 3}')
    if len(nodes) > MAX_NODES:
        raise ValueError(f"an op graph has at most {MAX_NODES} nodes, got {len(nodes)}")
    if len(nodes) < 2 or nodes[0].get("op") != "input" or nodes[-1].get("op") != "output":
        raise ValueError("an op graph needs at least an 'input' node first and an 'output' node last")
    extra = sorted({key for node in nodes for key in node} - {"op", "kernel", "expansion", "groups"})
    if extra:
        raise ValueError(f"unknown node fields {extra}; a node has op, kernel, expansion, groups")
    if any(len(edge) != 2 for edge in edges):
        raise ValueError("each edge is a [from, to] pair of node positions")
    sizes = ("kernel", "expansion", "groups")
    parsed = tuple(Node(str(node["op"]), **{k: int(node[k]) for k in sizes if k in node}) for node in nodes)
    # an edge given twice carries the same data once: repeats collapse (they would multiply the paths)
    return OpGraph("opgraph", parsed, tuple(sorted({(int(a), int(b)) for a, b in edges})))


#: Largest explicit op graph accepted (FBNet, the largest space, has 24 nodes).
MAX_NODES = 256
_JSON_FIELDS = {
    "nb101": ("adjacency", "ops"),
    "nasbench-graph": ("link", "ops"),
    "opgraph": ("nodes", "edges"),
}


#: Architectures kept parsed and featurized: a search space's short notations, met again and again by
#: a search loop. One longer than ``CACHED_CHARS`` (a client's explicit graph, a dense one ~400 kB) is
#: computed each time: unique large graphs would otherwise fill memory that is never given back.
CACHED_ARCHITECTURES, CACHED_CHARS = 100_000, 4_096

R = TypeVar("R")


def cached_when_short(function: Callable[..., R]) -> Callable[..., R]:
    """``function`` of string arguments, cached (LRU) where its last argument is a short notation."""
    cached = lru_cache(maxsize=CACHED_ARCHITECTURES)(function)

    @wraps(function)
    def call(*args: str) -> R:
        return cached(*args) if len(args[-1]) <= CACHED_CHARS else function(*args)

    return call


#: What malformed notation raises in the parsers (a value, a missing field, a wrong type, an overflow).
NOTATION_ERRORS = (ValueError, KeyError, TypeError, AttributeError, IndexError, OverflowError)


@cached_when_short
def parse(space: str, arch: str) -> OpGraph:
    """An architecture from its space's native notation as stored in canonical tables (cached: a
    search loop or the service sees the same architectures again and again; the graph is immutable).

    ``nb201``: the ``arch_str``; ``fbnet``: the ``op_str_list``; ``nb101``: JSON
    ``{"adjacency": [[...]], "ops": [...]}``; ``nasbench-graph``: JSON ``{"link": "0-0-1-3", "ops": [...]}``;
    ``opgraph``: JSON ``{"nodes": [{"op": "conv", "kernel": 3}, ...], "edges": [[0, 1], ...]}``.
    """
    if space == "nb201":
        return from_nb201(arch)
    if space == "fbnet":
        return from_fbnet(arch)
    if space not in _JSON_FIELDS:
        raise ValueError(f"unknown search space {space!r}; known: {', '.join(SPACES)}")
    try:
        spec = json.loads(arch)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{space} architecture must be a JSON object: {exc}") from exc
    except RecursionError as exc:  # nested deeper than the decoder recurses: no architecture is
        raise ValueError(f"{space} architecture must be a JSON object, not nested past {exc}") from exc
    fields = _JSON_FIELDS[space]
    if not isinstance(spec, dict) or any(f not in spec for f in fields):
        raise ValueError(f"{space} architecture must be a JSON object with fields {list(fields)}")
    _check_size(spec)
    parsers: dict[str, Callable[..., OpGraph]] = {
        "nb101": from_nb101,
        "nasbench-graph": from_nas_bench_graph,
        "opgraph": from_opgraph,
    }
    return parsers[space](*(spec[f] for f in fields))


def notation(space: str, arch: str | list | dict) -> str:
    """The canonical text of an architecture given as text, a layer list (FBNet) or an object."""
    if isinstance(arch, str):
        return arch
    if space == "fbnet" and isinstance(arch, list):
        return "|".join(map(str, arch))
    _check_size(arch)
    return json.dumps(arch, separators=(",", ":"))


#: Work units of an architecture (``models/core/budget.py``): a search space's notation is a few units, an
#: explicit graph a unit per eight nodes, edges or adjacency cells (a dense 256-node graph ~4,000).
NOTATION_COST, ELEMENTS_PER_UNIT = 4, 8


def cost(arch: Any) -> float:
    """The work of featurizing an architecture as sent (raw JSON), from the lengths of its lists."""
    if not isinstance(arch, dict):
        return NOTATION_COST
    elements = 0
    for value in arch.values():
        if isinstance(value, list):
            elements += len(value) + sum(len(row) for row in value[: MAX_NODES + 1] if isinstance(row, list))
    return NOTATION_COST + elements / ELEMENTS_PER_UNIT


def _check_size(arch: list | dict) -> None:
    """Refuse a graph past :data:`MAX_NODES` before any work is spent on it (a 3000x3000 adjacency)."""
    fields = arch if isinstance(arch, dict) else {"nodes": arch}
    edges = fields.get("edges")
    lists = [value for key, value in fields.items() if isinstance(value, list) and key != "edges"]
    rows = [row for value in lists if len(value) <= MAX_NODES for row in value if isinstance(row, list)]
    if any(len(value) > MAX_NODES for value in lists + rows):
        raise ValueError(f"an architecture has at most {MAX_NODES} nodes (rows of an adjacency, ops, layers)")
    if isinstance(edges, list) and len(edges) > MAX_NODES * (MAX_NODES - 1) // 2:
        raise ValueError(f"an op graph of at most {MAX_NODES} nodes has fewer edges than {len(edges)}")


def valid(space: str, arches: Iterable[str]) -> list[bool]:
    """Whether each architecture parses (each distinct notation is parsed once)."""
    verdict: dict[str, bool] = {}
    out = []
    for text in arches:
        if text not in verdict:
            try:
                parse(space, text)
                verdict[text] = True
            except NOTATION_ERRORS:
                verdict[text] = False
        out.append(verdict[text])
    return out
