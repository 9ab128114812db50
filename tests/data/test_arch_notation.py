import json

import pandas as pd
import pytest
from preflight.data import arch

from tests.conftest import shared_file

NB201 = "|nor_conv_3x3~0|+|nor_conv_3x3~0|avg_pool_3x3~1|+|skip_connect~0|none~1|nor_conv_1x1~2|"
FBNET = (
    "k5_e6|skip|k3_e1_g2|skip|k5_e1|skip|skip|skip|k5_e6|k5_e1|k3_e1_g2|"
    "k5_e1|k5_e6|k3_e6|k3_e3|k5_e6|k3_e6|k3_e3|k5_e1|k3_e3|k5_e1|k5_e1_g2"
)


def test_nb201_cell_becomes_an_op_graph():
    graph = arch.from_nb201(NB201)
    assert [n.op for n in graph.nodes] == [
        "input",
        "conv",
        "conv",
        "avgpool",
        "skip",
        "zero",
        "conv",
        "output",
    ]
    # the op on edge 1->2 (avg_pool, node 3) reads what node 1 produced: the conv on edge 0->1 (node 1)
    assert (1, 3) in graph.edges and (0, 1) in graph.edges
    # the output reads the three ops that end in cell node 3
    assert {(4, 7), (5, 7), (6, 7)} <= set(graph.edges)
    assert graph.depths()[-1] == 4  # input -> conv -> avgpool -> conv(1x1 on 2->3) -> output


@pytest.mark.parametrize(
    "bad, message",
    [
        ("|nor_conv_3x3~0|+|nor_conv_3x3~0|avg_pool_3x3~1|", "3 cell nodes"),
        ("|nor_conv_3x3~0|+|nor_conv_3x3~0|+|skip_connect~0|none~1|nor_conv_1x1~2|", "needs 2 inputs"),
        (
            "|conv_7x7~0|+|nor_conv_3x3~0|avg_pool_3x3~1|+|skip_connect~0|none~1|nor_conv_1x1~2|",
            "bad NAS-Bench-201 edge",
        ),
        ("|nor_conv_3x3~1|+|nor_conv_3x3~0|avg_pool_3x3~1|+|skip_connect~0|none~1|nor_conv_1x1~2|", "op~0"),
        ("", "3 cell nodes"),
    ],
)
def test_nb201_malformed(bad, message):
    with pytest.raises(ValueError, match=message):
        arch.from_nb201(bad)


def test_fbnet_is_a_chain_with_block_attributes():
    graph = arch.from_fbnet(FBNET)
    assert len(graph.nodes) == 24 and len(graph.edges) == 23
    first = graph.nodes[1]
    assert (first.op, first.kernel, first.expansion, first.groups) == ("mbconv", 5, 6, 1)
    assert graph.nodes[3].groups == 2 and graph.nodes[2].op == "skip"


@pytest.mark.parametrize(
    "bad, message",
    [
        ("k5_e6|skip", "22 layers"),
        (FBNET.replace("k5_e6", "k7_e6", 1), "bad FBNet layer 'k7_e6'"),
        (FBNET.replace("skip", "identity", 1), "bad FBNet layer 'identity'"),
    ],
)
def test_fbnet_malformed(bad, message):
    with pytest.raises(ValueError, match=message):
        arch.from_fbnet(bad)


def test_nb101_cell():
    graph = arch.from_nb101(
        [[0, 1, 1, 0], [0, 0, 1, 0], [0, 0, 0, 1], [0, 0, 0, 0]],
        ["input", "conv3x3-bn-relu", "maxpool3x3", "output"],
    )
    assert [n.op for n in graph.nodes] == ["input", "conv", "maxpool", "output"]
    assert graph.edges == ((0, 1), (0, 2), (1, 2), (2, 3))


@pytest.mark.parametrize(
    "adjacency, ops, message",
    [
        ([[0, 1], [0, 0]], ["input", "conv3x3-bn-relu", "output"], "3x3"),
        ([[0, 1, 0], [1, 0, 1], [0, 0, 0]], ["input", "maxpool3x3", "output"], "upper-triangular"),
        ([[0, 1, 0], [0, 0, 1], [0, 0, 0]], ["input", "conv5x5", "output"], "unknown NAS-Bench-101 ops"),
        (
            [[0, 1, 0], [0, 0, 1], [0, 0, 0]],
            ["conv1x1-bn-relu", "maxpool3x3", "output"],
            "start with 'input'",
        ),
    ],
)
def test_nb101_malformed(adjacency, ops, message):
    with pytest.raises(ValueError, match=message):
        arch.from_nb101(adjacency, ops)


def test_nas_bench_graph_links_and_leaves():
    graph = arch.from_nas_bench_graph("0-0-1-3", ["gat", "gcn", "gin", "sage"])
    # op1, op2 read the input; op3 reads op1; op4 reads op3; op2 and op4 are unread, so they feed the output
    assert set(graph.edges) == {(0, 1), (0, 2), (1, 3), (3, 4), (2, 5), (4, 5)}


@pytest.mark.parametrize(
    "link, ops, message",
    [
        ("0-0-1", ["gat", "gcn", "gin", "sage"], "one source per op"),
        ("0-2-1-3", ["gat", "gcn", "gin", "sage"], "op 2 must read"),
        ("0-0-1-3", ["gat", "gcn", "gin", "transformer"], "unknown NAS-Bench-Graph ops"),
    ],
)
def test_nas_bench_graph_malformed(link, ops, message):
    with pytest.raises(ValueError, match=message):
        arch.from_nas_bench_graph(link, ops)


def test_explicit_op_graph_and_the_json_notations():
    text = arch.notation(
        "opgraph",
        {
            "nodes": [{"op": "input"}, {"op": "conv", "kernel": 3}, {"op": "output"}],
            "edges": [[1, 2], [0, 1]],
        },
    )
    graph = arch.parse("opgraph", text)
    assert graph.edges == ((0, 1), (1, 2)) and graph.nodes[1] == arch.Node("conv", kernel=3)
    assert arch.notation("fbnet", ["skip"] * 22) == "|".join(["skip"] * 22)


@pytest.mark.parametrize(
    "space, text, message",
    [
        ("opgraph", '{"nodes": [{"op": "input"}, {"op": "output"}], "edges": [[1, 0]]}', "run forward"),
        (
            "opgraph",
            '{"nodes": [{"op": "input"}, {"op": "warp"}, {"op": "output"}], "edges": []}',
            "unknown op",
        ),
        (
            "opgraph",
            '{"nodes": [{"op": "input"}, {"op": "conv", "size": 3}, {"op": "output"}], "edges": []}',
            "unknown node fields",
        ),
        (
            "opgraph",
            '{"nodes": [{"op": "input"}, {"op": "conv", "kernel": "big"}, {"op": "output"}], "edges": []}',
            "invalid literal",
        ),
        ("opgraph", '{"nodes": [{"op": "input"}, {"op": "output"}], "edges": [[0, 1, 2]]}', "pair"),
        ("nb101", '{"ops": ["input", "output"]}', "fields"),
        ("nasbench-graph", "not json", "JSON object"),
        ("darts", "x", "unknown search space"),
    ],
)
def test_json_notations_malformed(space, text, message):
    with pytest.raises(ValueError, match=message):
        arch.parse(space, text)


@pytest.mark.integration
def test_every_published_architecture_parses():
    nb201 = pd.read_csv(shared_file("nas/nb201_index_to_arch_str.csv"))["arch_str"]
    fbnet = pd.read_csv(shared_file("nas/help_fbnet_latency.csv"), usecols=["op_str_list"])["op_str_list"]
    ec = pd.read_csv(
        shared_file("nas/ec_nas_bench_energy.csv"), usecols=["adjacency", "ops"]
    ).drop_duplicates()
    graph = pd.read_csv(
        shared_file("nas/nas_bench_graph_light.csv"), usecols=["link", "op1", "op2", "op3", "op4"]
    ).drop_duplicates()
    assert len(nb201) == 15_625 and all(arch.from_nb201(s).space == "nb201" for s in nb201)
    assert all(len(arch.from_fbnet(s).nodes) == 24 for s in fbnet)
    assert all(
        arch.from_nb101(json.loads(a), json.loads(o)).nodes[0].op == "input"
        for a, o in zip(ec["adjacency"], ec["ops"])
    )
    ops = graph[["op1", "op2", "op3", "op4"]].to_numpy()
    assert all(arch.from_nas_bench_graph(link, list(row)) for link, row in zip(graph["link"], ops))
