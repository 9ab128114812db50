import numpy as np

from preflight.data import arch
from preflight.features import arch as featurize

NB201 = "|nor_conv_3x3~0|+|nor_conv_3x3~0|avg_pool_3x3~1|+|skip_connect~0|none~1|nor_conv_1x1~2|"
FBNET = "k5_e6|skip|k3_e1_g2|skip|k5_e1|skip|skip|skip|k5_e6|k5_e1|k3_e1_g2|k5_e1|k5_e6|k3_e6|k3_e3|k5_e6|k3_e6|k3_e3|k5_e1|k3_e3|k5_e1|k5_e1_g2"


def test_flat_encoding_has_one_width_across_spaces():
    graphs = [arch.from_nb201(NB201), arch.from_fbnet(FBNET), arch.from_nas_bench_graph("0-0-0-0", ["gat"] * 4)]
    table = featurize.flat(graphs)
    assert len(table) == 3 and not table.isna().any().any()
    assert table.loc[0, "count_conv"] == 3 and table.loc[1, "count_mbconv"] == 17 and table.loc[2, "count_gat"] == 4
    assert table.loc[1, "space"] == arch.SPACES.index("fbnet")


def test_pyg_graph_matches_the_op_graph():
    graph = arch.from_nb201(NB201)
    data = featurize.to_pyg(graph)
    assert tuple(data.x.shape) == (8, featurize.NODE_FEATURES) and tuple(data.edge_index.shape) == (2, len(graph.edges))
    assert data.x[:, : len(arch.OPS)].sum(dim=1).eq(1).all()  # exactly one op per node
    lone = arch.OpGraph("nb101", (arch.Node("input"),), ())
    assert tuple(featurize.to_pyg(lone).edge_index.shape) == (2, 0)  # no edges: an empty index, not an error


def test_flat_encoding_is_finite_and_counts_kernels():
    table = featurize.flat([arch.from_nb201(NB201)])
    assert np.isfinite(table.to_numpy(dtype=float)).all()
    assert table.loc[0, "sum_kernel_conv"] == 3 + 3 + 1
