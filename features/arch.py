"""Architecture featurizers: a flat encoding for trees, ``torch_geometric`` graphs for GNNs."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from preflight.data.arch import OPS, SPACES, OpGraph

#: Relative-depth bins of the flat encoding (positions carry meaning in chain spaces like FBNet).
DEPTH_BINS = 8


def flat(graphs: Sequence[OpGraph]) -> pd.DataFrame:
    """A fixed-width encoding for trees: op counts, op counts per relative-depth bin, size and depth."""
    return pd.DataFrame([_flat_one(g) for g in graphs]).fillna(0.0)


def _flat_one(graph: OpGraph) -> dict[str, float]:
    depths = graph.depths()
    bins = np.minimum((depths / max(depths.max(), 1) * DEPTH_BINS).astype(int), DEPTH_BINS - 1)
    row: dict[str, float] = {"n_nodes": len(graph.nodes), "n_edges": len(graph.edges), "depth": int(depths.max()),
                             "space": SPACES.index(graph.space)}
    for node, depth_bin in zip(graph.nodes, bins):
        for key in (f"count_{node.op}", f"d{depth_bin}_{node.op}"):
            row[key] = row.get(key, 0) + 1
        row[f"sum_kernel_{node.op}"] = row.get(f"sum_kernel_{node.op}", 0) + node.kernel
        row[f"sum_expansion_{node.op}"] = row.get(f"sum_expansion_{node.op}", 0) + node.expansion
    return row


NODE_FEATURES = len(OPS) + 3  # one-hot op, then kernel, expansion, groups


def node_features(graph: OpGraph) -> np.ndarray:
    """Per node: a one-hot of the op over the fixed vocabulary, then kernel, expansion and groups."""
    x = np.zeros((len(graph.nodes), NODE_FEATURES), dtype=np.float32)
    for i, node in enumerate(graph.nodes):
        x[i, OPS.index(node.op)] = 1.0
        x[i, len(OPS):] = (node.kernel, node.expansion, node.groups)
    return x


def to_pyg(graph: OpGraph):
    """A ``torch_geometric.data.Data`` with ``x`` (node features) and ``edge_index`` (2 x edges)."""
    import torch
    from torch_geometric.data import Data

    edge_index = torch.tensor(graph.edges, dtype=torch.long).t().reshape(2, -1)  # no edges: shape 2 x 0
    return Data(x=torch.from_numpy(node_features(graph)), edge_index=edge_index)
