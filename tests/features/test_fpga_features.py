"""HLS designs as inputs: pragma values on their placeholder nodes, loop bounds read from the graph,
the same graph as GEXF or JSON, and pragmas the graph cannot take refused by name."""

import json

import numpy as np
import pandas as pd
import pytest
from preflight.data.catalogue import Catalogue
from preflight.data.errors import DataError
from preflight.data.fpga import FpgaItem, design_pragmas
from preflight.data.program_graph import load_graph
from preflight.features import fpga
from pydantic import ValidationError

from tests.fpga import KERNELS, kernel_gexf

GEMM = kernel_gexf(*KERNELS["k-gemm"])


def _as_json(gexf: str) -> dict:
    graph = load_graph(gexf)
    nodes = graph.nodes[["text", "type", "full_text"]].to_dict("records")
    edges = [
        {"source": int(s), "target": int(t), "flow": int(f)} for (s, t), f in zip(graph.edges.T, graph.flow)
    ]
    return {"nodes": nodes, "edges": edges}


def _rows(*pragmas: dict, graph: str = GEMM) -> pd.DataFrame:
    return pd.DataFrame(
        {"kernel": "k-gemm", "graph": graph, "tool": "v20", "pragmas": [json.dumps(p) for p in pragmas]}
    )


def test_pragma_values_sit_on_their_placeholder_nodes():
    features = fpga.design(_rows({"__PARA__L1": 8, "__PIPE__L2": "flatten"}, {}), Catalogue.load())
    graph, slots = load_graph(GEMM), features.graphs.slots
    assert features.graphs.index.tolist() == [0, 0]  # one graph for both designs
    where = {name: slot for slot, name in enumerate(sorted(graph.placeholders, key=fpga.loop_order))}
    assert slots.node[0, where["__PARA__L1"]] == graph.placeholders["__PARA__L1"]
    assert slots.values[0, where["__PARA__L1"], 0] == 3  # log2 8
    assert slots.values[1, where["__PARA__L1"], 0] == 0  # not set: the loop as written
    flatten = 2 + ("off", "", "cg", "fg", "flatten").index("flatten")
    assert slots.values[0, where["__PIPE__L2"], flatten] == 1
    assert features.meta["device_id"].tolist() == ["xilinx-alveo-u200"] * 2


def test_loop_bounds_and_unrolling_are_read_from_the_graph():
    assert fpga.loop_trips(load_graph(GEMM)) == {
        "__PARA__L0": 64, "__PIPE__L0": 64, "__TILE__L0": 64, "__PARA__L1": 64, "__PIPE__L1": 64,
        "__PARA__L2": 32, "__PIPE__L2": 32,
    }  # fmt: skip
    X = fpga.design(_rows({"__PARA__L2": 32, "__PARA__L0": 4}), Catalogue.load()).X.iloc[0]
    assert X["fully_unrolled_loops"] == 1 and X["unrolled_share_max"] == 1
    assert X["sequential_log2"] == np.log2(64 / 4) + np.log2(64)
    assert X["graph_loop_trip_log2"] == 6 + 6 + 5
    assert (X["para_0"], X["para_1"], X["para_2"], X["para_2_trip_log2"]) == (2, 0, 5, 5)  # by position
    assert X["pipe_0"] == 0 and np.isnan(X["tile_1"]) and np.isnan(X["para_3"])  # past the last knob


def test_a_graph_as_json_gives_the_features_of_its_gexf():
    as_json = json.dumps(_as_json(GEMM))
    a = fpga.design(_rows({"__PARA__L0": 2}), Catalogue.load())
    b = fpga.design(_rows({"__PARA__L0": 2}, graph=as_json), Catalogue.load())
    pd.testing.assert_frame_equal(a.X, b.X)
    np.testing.assert_array_equal(a.graphs.arrays[0][0], b.graphs.arrays[0][0])
    np.testing.assert_array_equal(a.graphs.slots.values, b.graphs.slots.values)


@pytest.mark.parametrize(
    ("pragmas", "message"),
    [
        ({"__PARA__L9": 2}, "pragmas.__PARA__L9: the graph has no placeholder for it"),
        ({"__PIPE__L0": "fast"}, "pragmas.__PIPE__L0: a pipeline mode is one of"),
        ({"__PARA__L0": 0}, "pragmas.__PARA__L0: a factor lies in"),
        ({"__TILE__L0": "two"}, "pragmas.__TILE__L0: a tile factor is an integer"),
        ({"UNROLL": 2}, "pragmas.UNROLL: the graph has no placeholder"),
    ],
)
def test_pragmas_the_graph_cannot_take_are_refused_by_name(pragmas, message):
    with pytest.raises(ValueError, match=message.replace(".", r"\.")):
        design_pragmas(pragmas, load_graph(GEMM).placeholders)


@pytest.mark.parametrize(
    ("graph", "message"),
    [
        ("<gexf><graph><nodes>", "not well-formed GEXF"),
        ({"nodes": []}, "no nodes"),
        ({"nodes": [{"text": "load"}], "edges": [{"source": 0, "target": 5}]}, "edges name nodes"),
        ({"nodes": [{"text": "load"}], "edges": [{"source": "a"}]}, "integer source and target"),
        ("/etc/passwd", "GEXF text"),
        ({"nodes": [{"text": "load"}], "edges": [{"source": float("inf"), "target": 0}]}, "integer source"),
        ({"nodes": [{"text": "load"}] * 50_001}, "at most 50000 nodes"),
    ],
)
def test_malformed_graphs_are_refused(graph, message):
    with pytest.raises(ValidationError, match=message):
        FpgaItem(kernel="mine", graph=graph)


def test_an_unnamed_graph_gets_a_name_of_its_own_and_a_design_every_knob():
    item = FpgaItem(graph=GEMM, pragmas={"__PARA__L0": 4})
    assert item.kernel.startswith("graph:") and item.kernel == FpgaItem(graph=GEMM).kernel
    assert item.pragmas["__PARA__L0"] == 4 and item.pragmas["__PIPE__L1"] == "off"
    assert len(item.pragmas) == len(load_graph(GEMM).placeholders)


def test_a_design_is_for_an_fpga():
    rows = _rows({}).assign(device="NVIDIA A100-SXM4-40GB")
    with pytest.raises(DataError, match="synthesized for an FPGA"):
        fpga.design(rows, Catalogue.load())


def test_stated_sizes_stay_finite():
    assert fpga.stated_size("[0 x i32]*", "", 1) == 0
    assert fpga.stated_size("[99999999999999999999 x [9999999999 x i32]]*", "", 1) == 64
    assert fpga.stated_size("i32", "i32 1e999", 2) == 64
    assert fpga.loop_order("__PARA__L10") > fpga.loop_order("__PARA__L2")
