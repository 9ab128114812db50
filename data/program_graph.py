"""Program graphs of HLS kernels: ProGraML graphs (GEXF, as HLSyn publishes them) with pragma
placeholder nodes.

A node is an LLVM instruction, variable, constant or pragma (``type``), with its short ``text``
(``alloca``, ``PARALLEL``) and, for pragma nodes, the placeholder its ``full_text`` names
(``#pragma ACCEL PARALLEL FACTOR=auto{__PARA__L0}`` → ``__PARA__L0``): the knob a design sets.
Edges are directed, with ProGraML's ``flow`` (0 control, 1 data, 2 call; pragmas attach with their
own flow) and ``position``. Reading uses the standard library's XML parser; a file that is not a
well-formed graph is refused with the file named.

A graph may also come as JSON, ``{"nodes": [{"text", "type", "full_text", ...}], "edges": [{"source",
"target", "flow", "position"}]}`` (edge ends are node positions), and ``load_graph`` reads any of the
three forms a canonical row or an API item carries: a file path, GEXF text or JSON text.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd
from preflight.data.errors import DataError

#: A pragma placeholder in a kernel's text (``{__PARA__L0}``), as HLSyn writes it in graphs and sources.
PLACEHOLDER = re.compile(r"\{(__(?:PARA|PIPE|TILE)__L\d+(?:_\d+)*)\}")
_NODE_ATTRIBUTES = ("block", "function", "text", "type", "full_text")
_EDGE_ATTRIBUTES = ("flow", "position")


@dataclass(frozen=True)
class ProgramGraph:
    """``nodes``: one row per node (``text``, ``type``, ``block``, ``function``, ``full_text``,
    ``placeholder``); ``edges``: ``[2, edges]`` node positions; ``flow`` and ``position`` per edge."""

    nodes: pd.DataFrame
    edges: np.ndarray
    flow: np.ndarray
    position: np.ndarray

    @property
    def placeholders(self) -> dict[str, int]:
        """Each pragma placeholder (``__PARA__L0``) and the node that carries it."""
        named = self.nodes["placeholder"]
        return {name: int(i) for i, name in named[named != ""].items()}


#: Graphs kept parsed (a kernel's graph serves all its designs).
GRAPH_CACHE = 64
#: The largest graph accepted (HLSyn's largest has 1,720 nodes and about 2,900 edges).
MAX_NODES, MAX_EDGES = 50_000, 200_000


@lru_cache(maxsize=GRAPH_CACHE)
def load_graph(spec: str) -> ProgramGraph:
    """A program graph from a GEXF file's path, GEXF text (``<...``) or JSON text (``{...}``)."""
    text = spec.lstrip()
    if text.startswith("<"):
        try:
            root = ET.fromstring(text)
        except ET.ParseError as exc:
            raise DataError(f"the graph is not well-formed GEXF: {exc}") from exc
        return parse_gexf(root)
    if text.startswith("{"):
        try:
            document = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DataError(f"the graph is not valid JSON: {exc}") from exc
        return parse_json(document)
    return read_gexf(Path(spec))


def parse_json(document: object) -> ProgramGraph:
    """A program graph from its JSON form, or a DataError saying what is wrong with it."""
    if not isinstance(document, dict) or not isinstance(document.get("nodes"), list):
        raise DataError('a JSON graph is an object with a "nodes" list and an "edges" list')
    nodes_in, edges_in = document["nodes"], document.get("edges", [])
    if not nodes_in:
        raise DataError("graph: the graph has no nodes")
    _check_size(len(nodes_in), len(edges_in) if isinstance(edges_in, list) else 0, "graph")
    if not all(isinstance(n, dict) for n in nodes_in) or not isinstance(edges_in, list):
        raise DataError('graph: each node is an object ({"text", "type", "full_text"}) and "edges" a list')
    nodes = pd.DataFrame([{k: str(n.get(k, "")) for k in _NODE_ATTRIBUTES} for n in nodes_in])
    _mark_placeholders(nodes)
    try:
        ends = np.array([[int(e["source"]), int(e["target"])] for e in edges_in], dtype=np.int64).reshape(
            -1, 2
        )
        flow, position = (
            np.array([int(e.get(k, 0)) for e in edges_in], dtype=np.int64) for k in _EDGE_ATTRIBUTES
        )
    except (KeyError, TypeError, ValueError, OverflowError, AttributeError) as exc:
        raise DataError(f"graph: each edge needs integer source and target node positions ({exc})") from exc
    if ((ends < 0) | (ends >= len(nodes))).any():
        raise DataError(f"graph: edges name nodes the graph lacks (it has {len(nodes)} nodes)")
    return ProgramGraph(nodes, ends.T.copy(), flow, position)


def _check_size(nodes: int, edges: int, name: str) -> None:
    if nodes > MAX_NODES or edges > MAX_EDGES:
        raise DataError(
            f"{name}: {nodes} nodes and {edges} edges; at most {MAX_NODES} nodes and {MAX_EDGES} edges"
        )


def _mark_placeholders(nodes: pd.DataFrame) -> None:
    nodes["placeholder"] = nodes["full_text"].map(
        lambda t: m.group(1) if (m := PLACEHOLDER.search(t)) else ""
    )


def read_gexf(path: Path) -> ProgramGraph:
    """A program graph from a GEXF file, or a DataError saying what is wrong with it."""
    try:
        root = ET.parse(path).getroot()
    except (ET.ParseError, OSError) as exc:
        raise DataError(f"{path} is not a readable GEXF file: {exc}") from exc
    return parse_gexf(root, str(path))


def parse_gexf(root: ET.Element, name: str = "graph") -> ProgramGraph:
    """A program graph from a parsed GEXF document."""
    namespace = root.tag[: root.tag.index("}") + 1] if root.tag.startswith("{") else ""
    graph = root.find(f"{namespace}graph")
    if graph is None:
        raise DataError(f"{name}: no <graph> element")
    titles = {
        (block.get("class"), a.get("id")): a.get("title")
        for block in graph.findall(f"{namespace}attributes")
        for a in block.findall(f"{namespace}attribute")
    }
    node_elements = graph.findall(f"{namespace}nodes/{namespace}node")
    _check_size(len(node_elements), len(graph.findall(f"{namespace}edges/{namespace}edge")), name)
    if not node_elements:
        raise DataError(f"{name}: the graph has no nodes")
    ids = [node.get("id") for node in node_elements]
    values = [_values(node, "node", titles, namespace) for node in node_elements]
    nodes = pd.DataFrame([{k: v.get(k, "") for k in _NODE_ATTRIBUTES} for v in values])
    _mark_placeholders(nodes)
    index = {node_id: i for i, node_id in enumerate(ids)}
    edge_elements = graph.findall(f"{namespace}edges/{namespace}edge")
    ends = [(edge.get("source"), edge.get("target")) for edge in edge_elements]
    unknown = [end for pair in ends for end in pair if end not in index]
    if unknown:
        raise DataError(f"{name}: edges name nodes the graph lacks: {sorted(set(map(str, unknown)))[:5]}")
    edges = np.array([[index[s] for s, _ in ends], [index[t] for _, t in ends]], dtype=np.int64).reshape(
        2, -1
    )
    attributes = [_values(edge, "edge", titles, namespace) for edge in edge_elements]
    flow, position = (
        np.array([_integer(a.get(k)) for a in attributes], dtype=np.int64) for k in _EDGE_ATTRIBUTES
    )
    return ProgramGraph(nodes, edges, flow, position)


def _values(element: ET.Element, kind: str, titles: dict, namespace: str) -> dict[str, str]:
    """An element's attribute values by title."""
    return {
        titles.get((kind, value.get("for")), str(value.get("for"))): value.get("value") or ""
        for value in element.findall(f"{namespace}attvalues/{namespace}attvalue")
    }


def _integer(text: str | None) -> int:
    """An edge attribute as an int64 (0 where it is not one)."""
    try:
        value = int(text or 0)
    except ValueError:
        return 0
    return value if -(2**63) <= value < 2**63 else 0
