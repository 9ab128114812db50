"""A graph neural network on the architecture itself, for the NAS tasks.

torch-geometric's GIN layers (GIN-0: a node's state plus the sum of its neighbours' through an MLP
ending in a layer norm) run over each row's op graph (``meta["space"]``, ``meta["arch"]``, edges
both ways); the mean and the sum of the node states are the architecture's embedding, which joins
the standardized context columns (``ctx_*``: dataset, device spec sheet, batch size) in an MLP with
one output per target. The flat ``arch_*`` columns are not read: the architecture is learned from
the graph. Each distinct architecture of a minibatch is embedded once and gathered to its rows
(one architecture, many devices).

Each target is encoded as ``targets`` decides (log, or identity for ``accuracy``) and standardized.
The loss is a per-target MSE over the rows that carry the target plus, weighted by ``rank_weight``,
a pairwise logistic ranking loss between rows of the same context (device setting and dataset):
users rank candidates. Training is seeded and runs on one CPU thread, so two fits give identical
predictions. torch is imported inside the functions: importing the family stays cheap.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd
from preflight.data.arch import OPS, parse
from preflight.data.threads import torch_threads
from preflight.features import Features
from preflight.features.arch import CONTEXT_PREFIX, NODE_FEATURES, node_features
from preflight.models.families import targets

#: Kernel, expansion and groups are divided by this to sit near the one-hot's scale.
SIZE_SCALE = 8.0
#: Differences of standardized targets at which the ranking loss stops insisting on an order.
RANK_TEMPERATURE = 0.1
#: Rows per forward pass at prediction time.
PREDICT_ROWS = 8192


@lru_cache(maxsize=100_000)
def _arrays(space: str, notation: str) -> tuple[np.ndarray, np.ndarray]:
    """An architecture's node features (sizes scaled) and its edges in both directions (2 x edges)."""
    g = parse(space, notation)
    x = node_features(g)
    x[:, len(OPS) :] /= SIZE_SCALE
    edges = np.array(g.edges, dtype=np.int64).reshape(-1, 2).T
    return x, np.concatenate([edges, edges[::-1]], axis=1)


def _ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``starts[i], ..., starts[i] + counts[i] - 1`` for every i, concatenated."""
    return np.repeat(starts - np.cumsum(counts) + counts, counts) + np.arange(counts.sum())


class _Graphs:
    """The distinct architectures of a table packed end to end (edges numbered within their graph), and
    each row's index into them."""

    def __init__(self, meta: pd.DataFrame) -> None:
        if not {"space", "arch"} <= set(meta.columns):
            raise ValueError(
                "the gnn family needs the architecture in meta['space'] and meta['arch'] (NAS tasks)"
            )
        self.codes, distinct = pd.factorize(meta["space"].astype(str) + "\0" + meta["arch"].astype(str))
        parts = [_arrays(*key.split("\0", 1)) for key in distinct]
        self.nodes = np.array([len(x) for x, _ in parts], dtype=np.int64)
        self.edges = np.array([e.shape[1] for _, e in parts], dtype=np.int64)
        self.node_start = np.cumsum(self.nodes) - self.nodes
        self.edge_start = np.cumsum(self.edges) - self.edges
        self.x = np.concatenate([x for x, _ in parts]) if parts else np.zeros((0, NODE_FEATURES), np.float32)
        self.edge_index = (
            np.concatenate([e for _, e in parts], axis=1) if parts else np.zeros((2, 0), np.int64)
        )

    def select(self, ids: np.ndarray):
        """Some architectures as one graph: node features, edge index and each node's graph."""
        import torch

        nodes, edges = self.nodes[ids], self.edges[ids]
        first = np.repeat(np.cumsum(nodes) - nodes, edges)  # where each edge's graph starts in the selection
        edge_index = self.edge_index[:, _ranges(self.edge_start[ids], edges)] + first
        return (
            torch.from_numpy(self.x[_ranges(self.node_start[ids], nodes)]),
            torch.from_numpy(edge_index),
            torch.from_numpy(np.repeat(np.arange(len(ids)), nodes)),
        )


def _network(n_context: int, n_targets: int, hidden: int, layers: int, head_hidden: int):
    """The GIN layers (``convs``) and the multi-task MLP (``head``) as one module."""
    from torch import nn
    from torch_geometric.nn import GINConv

    def mlp(width_in: int) -> nn.Module:  # layer norm at the end: trains markedly faster
        return nn.Sequential(
            nn.Linear(width_in, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.LayerNorm(hidden)
        )

    convs = nn.ModuleList(GINConv(mlp(NODE_FEATURES if i == 0 else hidden)) for i in range(layers))
    head = nn.Sequential(
        nn.Linear(2 * hidden + n_context, head_hidden),
        nn.ReLU(),
        nn.Linear(head_hidden, head_hidden),
        nn.ReLU(),
        nn.Linear(head_hidden, n_targets),
    )
    return nn.ModuleDict({"convs": convs, "head": head})


def _forward(net, graphs: _Graphs, rows: np.ndarray, context):
    """Standardized predictions for rows: their distinct architectures embedded once, then gathered.

    A layer is torch-geometric's ``GINConv`` (GIN-0: an MLP of the node plus the sum of its
    neighbours); the graph's embedding is the mean and the sum of its nodes."""
    import torch
    from torch_geometric.nn import global_add_pool, global_mean_pool

    distinct, inverse = np.unique(graphs.codes[rows], return_inverse=True)
    h, edge_index, graph_of_node = graphs.select(distinct)
    for conv in net["convs"]:
        h = torch.relu(conv(h, edge_index))
    size = len(distinct)
    pooled = torch.cat(
        [global_mean_pool(h, graph_of_node, size), global_add_pool(h, graph_of_node, size)], dim=1
    )
    return net["head"](torch.cat([pooled[torch.from_numpy(inverse)], context[rows]], dim=1))


def _loss(predicted, z, weight, context, rank_weight: float):
    """Weighted MSE per target over the rows that carry it, plus ``rank_weight`` times a pairwise ranking loss.

    The ranking loss is RankNet's logistic loss between the rows of one context (device setting and
    dataset) on the sign of their difference, softened by ``RANK_TEMPERATURE``: its optimum is the true
    difference, so it sharpens the order without stretching the scale (a hard sign pushes predictions
    apart and costs latency its absolute error)."""
    import torch
    from torch.nn.functional import binary_cross_entropy_with_logits

    present = ~torch.isnan(z)
    z = torch.nan_to_num(z)
    w = weight[:, None] * present
    loss = ((w * (predicted - z) ** 2).sum(0) / w.sum(0).clamp_min(1e-12)).mean()
    if rank_weight == 0:
        return loss
    pairs = ((context[:, None] == context[None, :]) & ~torch.eye(len(z), dtype=torch.bool))[:, :, None]
    pair_weight = (weight[:, None] * weight[None, :])[:, :, None] * (
        pairs & present[:, None] & present[None, :]
    )
    label = torch.sigmoid((z[:, None] - z[None, :]) / RANK_TEMPERATURE)  # row i above row j
    margin = (predicted[:, None] - predicted[None, :]) / RANK_TEMPERATURE
    rank = binary_cross_entropy_with_logits(margin, label, reduction="none")
    rank = (pair_weight * rank).sum((0, 1)) / pair_weight.sum((0, 1)).clamp_min(1e-12)
    return loss + rank_weight * rank.mean()


class GnnFamily:
    name = "gnn"

    def __init__(
        self,
        *,
        hidden: int = 64,
        layers: int = 3,
        head_hidden: int = 128,
        epochs: int = 100,
        batch_size: int = 128,
        learning_rate: float = 4e-3,
        weight_decay: float = 1e-5,
        rank_weight: float = 1.0,
        seed: int = 0,
    ) -> None:
        self.hidden, self.layers, self.head_hidden = hidden, layers, head_hidden
        self.epochs, self.batch_size, self.learning_rate = epochs, batch_size, learning_rate
        self.weight_decay, self.rank_weight, self.seed = weight_decay, rank_weight, seed

    def get_params(self) -> dict:
        return {
            k: getattr(self, k)
            for k in (
                "hidden",
                "layers",
                "head_hidden",
                "epochs",
                "batch_size",
                "learning_rate",
                "weight_decay",
                "rank_weight",
                "seed",
            )
        }

    def _build(self) -> None:
        self.net_ = _network(
            len(self.context_columns_), len(self.targets_), self.hidden, self.layers, self.head_hidden
        )

    def _context(self, X: pd.DataFrame) -> np.ndarray:
        """The ``ctx_*`` columns standardized with the training scalers, missing values at 0."""
        values = X.reindex(columns=self.context_columns_).to_numpy(dtype=float, na_value=np.nan)
        return np.nan_to_num((values - self.context_center_) / self.context_scale_).astype(np.float32)

    def _fit_context(self, X: pd.DataFrame) -> np.ndarray:
        """Learns the context scalers and returns the standardized training context."""
        self.context_columns_ = [c for c in X.columns if c.startswith(CONTEXT_PREFIX)]
        table = X[self.context_columns_].astype(float)
        self.context_center_ = table.mean().fillna(0.0).to_numpy(dtype=float)  # never given (all NaN): 0
        spread = table.std(ddof=0).to_numpy(dtype=float)
        self.context_scale_ = np.where(np.isfinite(spread) & (spread > 0), spread, 1.0)
        return self._context(X)

    def _fit_targets(self, features: Features, Y: pd.DataFrame) -> np.ndarray:
        """The targets learned (two rows at least), encoded and standardized; NaN where a row lacks one."""
        self.targets_, self.transforms_, self.target_center_, self.target_scale_ = [], {}, [], []
        columns = []
        for target in Y.columns:
            rows = targets.present(target, Y[target])
            if rows.sum() < 2:
                continue
            transform = targets.choose(target, "log", features.reference[target][rows])
            z = np.full(len(Y), np.nan)
            z[rows] = targets.encode(Y[target][rows], features.reference[target][rows], transform)
            center, scale = float(z[rows].mean()), float(z[rows].std())
            self.targets_.append(target)
            self.transforms_[target] = transform
            self.target_center_.append(center)
            self.target_scale_.append(scale if scale > 0 else 1.0)
            columns.append((z - center) / self.target_scale_[-1])
        if not columns:
            raise ValueError(f"no target among {list(Y.columns)} has two usable rows to learn from")
        return np.stack(columns, axis=1).astype(np.float32)

    def fit(
        self, features: Features, Y: pd.DataFrame, sample_weight: np.ndarray | None = None
    ) -> GnnFamily:
        import torch

        graphs = _Graphs(features.meta)
        Z = torch.from_numpy(self._fit_targets(features, Y))
        context = torch.from_numpy(self._fit_context(features.X))
        meta = features.meta
        setting = torch.from_numpy(
            pd.factorize(meta["device_id"].astype(str) + "\0" + meta["dataset"].astype(str))[0]
        )
        weight = np.ones(len(Y)) if sample_weight is None else np.asarray(sample_weight)
        weight = torch.tensor(weight, dtype=torch.float32)
        rows = np.flatnonzero(~Z.isnan().all(dim=1).numpy())
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            self._build()
        optimizer = torch.optim.Adam(
            self.net_.parameters(), lr=self.learning_rate, weight_decay=self.weight_decay, fused=True
        )
        schedule = torch.optim.lr_scheduler.CosineAnnealingLR(
            optimizer, self.epochs * -(-len(rows) // self.batch_size)
        )
        rng = np.random.default_rng(self.seed)
        with torch_threads(1):
            for _ in range(self.epochs):
                order = rng.permutation(rows)
                for batch in np.array_split(order, range(self.batch_size, len(order), self.batch_size)):
                    predicted = _forward(self.net_, graphs, batch, context)
                    loss = _loss(predicted, Z[batch], weight[batch], setting[batch], self.rank_weight)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                    schedule.step()
        return self

    def predict(self, features: Features) -> pd.DataFrame:
        import torch

        graphs = _Graphs(features.meta)
        context = torch.from_numpy(self._context(features.X))
        chunks = np.array_split(np.arange(len(context)), range(PREDICT_ROWS, len(context), PREDICT_ROWS))
        with torch.inference_mode():
            z = (
                torch.cat([_forward(self.net_, graphs, rows, context) for rows in chunks])
                .numpy()
                .astype(float)
            )
        z = z * np.asarray(self.target_scale_) + np.asarray(self.target_center_)
        out = {
            t: targets.decode(z[:, j], features.reference[t], self.transforms_[t])
            for j, t in enumerate(self.targets_)
        }
        return pd.DataFrame(out, index=features.X.index)

    def save(self, directory: Path) -> None:
        import torch

        directory.mkdir(parents=True, exist_ok=True)
        torch.save(self.net_.state_dict(), directory / "gnn.pt")
        state = {
            "params": self.get_params(),
            "targets": self.targets_,
            "transforms": self.transforms_,
            "target_center": self.target_center_,
            "target_scale": self.target_scale_,
            "context_columns": self.context_columns_,
            "context_center": self.context_center_.tolist(),
            "context_scale": self.context_scale_.tolist(),
        }
        (directory / "gnn.json").write_text(json.dumps(state, indent=2))

    @classmethod
    def load(cls, directory: Path) -> GnnFamily:
        import torch

        state = json.loads((directory / "gnn.json").read_text())
        family = cls(**state["params"])
        family.targets_, family.transforms_ = state["targets"], state["transforms"]
        family.target_center_, family.target_scale_ = state["target_center"], state["target_scale"]
        family.context_columns_ = state["context_columns"]
        family.context_center_ = np.array(state["context_center"])
        family.context_scale_ = np.array(state["context_scale"])
        family._build()
        family.net_.load_state_dict(torch.load(directory / "gnn.pt", weights_only=True))
        return family
