"""A graph neural network on graph-shaped inputs (an architecture's op graph, a program's graph).

torch-geometric's GIN layers (GIN-0: a node's state plus the sum of its neighbours' through an MLP
ending in a layer norm) run over each row's graph from ``Features.graphs``; the mean and the sum of
the node states are the graph's embedding, which joins the standardized context columns (``ctx_*``:
dataset, device spec sheet, batch size) in an MLP with one output per target. Other columns of ``X``
are not read: the graph is learned from itself. Each distinct graph of a minibatch is embedded once
and gathered to its rows (one architecture, many devices). Hyperparameters keep torch-geometric's
names (``hidden_channels``, ``num_layers``; ``in_channels`` is the graphs' node feature width).

Where rows sharing a graph differ in values set on some of its nodes (``Graphs.slots``: a design's
pragma values on the placeholder nodes of its kernel's program graph), the graph is embedded once per
distinct graph all the same, and each row reads the final states of its slot nodes joined with the
values it sets there, through an MLP, summed and maxed over its slots (late fusion: message passing
is shared by a kernel's designs, so a minibatch costs its kernels, not its designs).

Each target is encoded on its declared scale and standardized (a binary target is left 0/1 and
learned as a logit). The loss is a per-target MSE (the logistic loss for a binary target) over the
rows that carry the target plus, weighted by ``rank_weight``, a pairwise logistic ranking loss between
rows of the same context (equal ``ctx_*`` values: device setting and dataset): users rank candidates.
Training is seeded and runs on one CPU thread, so two fits give identical predictions. torch is
imported inside the functions: importing the family stays cheap.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
from preflight.data.errors import UsageError
from preflight.data.threads import torch_threads
from preflight.features import Features, Graphs, Slots
from preflight.models.core.targets import Target
from preflight.models.families._neural import (
    ContextScaler,
    TargetScaler,
    predict_in_chunks,
    train_minibatches,
    weighted_loss,
)

#: Differences of standardized targets at which the ranking loss stops insisting on an order.
RANK_TEMPERATURE = 0.1
#: Rows per forward pass at prediction time.
PREDICT_ROWS = 8192
#: Node feature width of the NAS op graphs, for GNNs saved before ``in_channels`` was.
LEGACY_IN_CHANNELS = 19


def _ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``starts[i], ..., starts[i] + counts[i] - 1`` for every i, concatenated."""
    return np.repeat(starts - np.cumsum(counts) + counts, counts) + np.arange(counts.sum())


class _Packed:
    """The distinct graphs of a table packed end to end (edges numbered within their graph), and each
    row's index into them."""

    def __init__(self, graphs: Graphs | None) -> None:
        if graphs is None:
            raise UsageError("the gnn family needs graphs: its task's featurizer gives none")
        parts = graphs.arrays
        self.codes = graphs.index
        self.nodes = np.array([len(x) for x, _ in parts], dtype=np.int64)
        self.edges = np.array([e.shape[1] for _, e in parts], dtype=np.int64)
        self.node_start = np.cumsum(self.nodes) - self.nodes
        self.edge_start = np.cumsum(self.edges) - self.edges
        self.x = np.concatenate([x for x, _ in parts]).astype(np.float32)
        self.edge_index = np.concatenate([e for _, e in parts], axis=1).astype(np.int64)
        self.slots = graphs.slots

    def select(self, ids: np.ndarray):
        """Some graphs as one: node features, edge index and each node's graph."""
        import torch

        nodes, edges = self.nodes[ids], self.edges[ids]
        first = np.repeat(np.cumsum(nodes) - nodes, edges)  # where each edge's graph starts in the selection
        edge_index = self.edge_index[:, _ranges(self.edge_start[ids], edges)] + first
        return (
            torch.from_numpy(self.x[_ranges(self.node_start[ids], nodes)]),
            torch.from_numpy(edge_index),
            torch.from_numpy(np.repeat(np.arange(len(ids)), nodes)),
        )


def _network(
    in_channels: int, n_context: int, n_targets: int, hidden: int, layers: int, head_hidden: int,
    slot_channels: int = 0,
):  # fmt: skip
    """The GIN layers (``convs``), the slot reader (``slots``, where rows set values on nodes) and the
    multi-task MLP (``head``) as one module."""
    from torch import nn
    from torch_geometric.nn import GINConv

    def mlp(width_in: int) -> nn.Module:  # layer norm at the end: trains markedly faster
        return nn.Sequential(
            nn.Linear(width_in, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.LayerNorm(hidden)
        )

    convs = nn.ModuleList(GINConv(mlp(in_channels if i == 0 else hidden)) for i in range(layers))
    modules: dict[str, nn.Module] = {"convs": convs}
    if slot_channels:
        modules["slots"] = mlp(hidden + slot_channels)
    modules["head"] = nn.Sequential(
        nn.Linear(2 * hidden * (2 if slot_channels else 1) + n_context, head_hidden),
        nn.ReLU(),
        nn.Linear(head_hidden, head_hidden),
        nn.ReLU(),
        nn.Linear(head_hidden, n_targets),
    )
    return nn.ModuleDict(modules)


def _forward(net, graphs: _Packed, rows: np.ndarray, context):
    """Standardized predictions for rows: their distinct graphs embedded once, then gathered.

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
    parts = [pooled[torch.from_numpy(inverse)]]
    if graphs.slots is not None:
        first = np.cumsum(graphs.nodes[distinct]) - graphs.nodes[distinct]  # each graph's first node
        parts.append(_read_slots(net["slots"], h, first[inverse], graphs.slots.take(rows)))
    return net["head"](torch.cat([*parts, context[rows]], dim=1))


def _read_slots(mlp, h, first: np.ndarray, slots: Slots):
    """Each row's slot nodes' states joined with the values it sets there, through ``mlp``, summed and
    maxed over the row's used slots."""
    import torch

    if slots.node.shape[1] == 0:  # graphs without a placeholder: nothing set on them
        return torch.zeros(len(first), 2 * mlp[-1].normalized_shape[0])
    used = torch.from_numpy(slots.node >= 0)
    node = torch.from_numpy(np.where(slots.node >= 0, slots.node + first[:, None], 0))
    states = mlp(torch.cat([h[node], torch.from_numpy(slots.values.astype(np.float32))], dim=2))
    states = states * used[:, :, None]
    peak = states.masked_fill(~used[:, :, None], float("-inf")).amax(dim=1)
    return torch.cat([states.sum(dim=1), torch.nan_to_num(peak, neginf=0.0)], dim=1)


def _loss(predicted, z, weight, context, rank_weight: float, is_logit):
    """Weighted loss per target over the rows that carry it, plus ``rank_weight`` times a pairwise ranking
    loss on the targets that are not events (whose output ``is_logit``).

    The ranking loss is RankNet's logistic loss between the rows of one context (device setting and
    dataset) on the sign of their difference, softened by ``RANK_TEMPERATURE``: its optimum is the true
    difference, so it sharpens the order without stretching the scale (a hard sign pushes predictions
    apart and costs latency its absolute error)."""
    import torch
    from torch.nn.functional import binary_cross_entropy_with_logits

    loss = weighted_loss(predicted, z, weight, is_logit)
    if rank_weight == 0 or bool(is_logit.all()):
        return loss
    predicted, z = predicted[:, ~is_logit], z[:, ~is_logit]
    present = ~torch.isnan(z)
    z = torch.nan_to_num(z)
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
    concurrent = False  # torch's global random generator, and its own threads over every core

    def __init__(
        self,
        *,
        targets: dict[str, Target],
        hidden_channels: int = 64,
        num_layers: int = 3,
        head_hidden: int = 128,
        epochs: int = 100,
        batch_size: int = 128,
        learning_rate: float = 4e-3,
        weight_decay: float = 1e-5,
        rank_weight: float = 1.0,
        seed: int = 0,
    ) -> None:
        self.targets, self.hidden_channels, self.num_layers = targets, hidden_channels, num_layers
        self.head_hidden, self.epochs, self.batch_size, self.learning_rate = (
            head_hidden,
            epochs,
            batch_size,
            learning_rate,
        )
        self.weight_decay, self.rank_weight, self.seed = weight_decay, rank_weight, seed

    def get_params(self) -> dict:
        names = ("hidden_channels", "num_layers", "head_hidden", "epochs", "batch_size", "learning_rate",
                 "weight_decay", "rank_weight", "seed")  # fmt: skip
        return {k: getattr(self, k) for k in names}

    def _build(self) -> None:
        self.net_ = _network(
            self.in_channels_, len(self.context_.columns), len(self.scaled_targets_.encodings),
            self.hidden_channels, self.num_layers, self.head_hidden, self.slot_channels_,
        )  # fmt: skip

    def fit(self, features: Features, Y: pd.DataFrame, sample_weight: np.ndarray | None = None) -> GnnFamily:
        import torch

        graphs = _Packed(features.graphs)
        self.in_channels_ = int(graphs.x.shape[1])
        self.slot_channels_ = 0 if graphs.slots is None else int(graphs.slots.values.shape[2])
        self.scaled_targets_, standardized = TargetScaler.fit(self.targets, features, Y)
        Z = torch.from_numpy(standardized)
        self.context_ = ContextScaler.fit(features.X)
        context = torch.from_numpy(self.context_.transform(features.X))
        raw_context = features.X[self.context_.columns]
        setting = torch.from_numpy(pd.factorize(pd.util.hash_pandas_object(raw_context, index=False))[0])
        weight = np.ones(len(Y)) if sample_weight is None else np.asarray(sample_weight)
        weights = torch.tensor(weight, dtype=torch.float32)
        rows = np.flatnonzero(~Z.isnan().all(dim=1).numpy())
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            self._build()
        optimizer = torch.optim.Adam(
            self.net_.parameters(), lr=self.learning_rate, weight_decay=self.weight_decay, fused=True
        )
        is_logit = torch.from_numpy(self.scaled_targets_.is_logit)

        def batch_loss(batch: np.ndarray) -> torch.Tensor:
            predicted = _forward(self.net_, graphs, batch, context)
            return _loss(predicted, Z[batch], weights[batch], setting[batch], self.rank_weight, is_logit)

        with torch_threads(1):
            train_minibatches(optimizer, rows, self.epochs, self.batch_size, self.seed, batch_loss)
        return self

    def predict(self, features: Features) -> pd.DataFrame:
        import torch

        graphs = _Packed(features.graphs)
        context = torch.from_numpy(self.context_.transform(features.X))
        z = predict_in_chunks(
            len(context), PREDICT_ROWS, lambda rows: _forward(self.net_, graphs, rows, context)
        )
        return self.scaled_targets_.decode(z, features)

    def save(self, directory: Path) -> None:
        import torch

        directory.mkdir(parents=True, exist_ok=True)
        torch.save(self.net_.state_dict(), directory / "gnn.pt")
        state = {
            "params": self.get_params(),
            "in_channels": self.in_channels_,
            "slot_channels": self.slot_channels_,
            **self.scaled_targets_.state(),
            **self.context_.state(),
        }
        (directory / "gnn.json").write_text(json.dumps(state, indent=2))

    @classmethod
    def load(cls, directory: Path) -> GnnFamily:
        import torch

        state = json.loads((directory / "gnn.json").read_text())
        scaled_targets = TargetScaler.from_state(state)
        renamed = {"hidden": "hidden_channels", "layers": "num_layers"}  # before issue 11
        params = {renamed.get(k, k): v for k, v in state["params"].items()}
        family = cls(targets=scaled_targets.targets, **params)
        family.scaled_targets_, family.context_ = scaled_targets, ContextScaler.from_state(state)
        family.in_channels_ = state.get("in_channels", LEGACY_IN_CHANNELS)
        family.slot_channels_ = state.get("slot_channels", 0)  # saved before issue 14: no slots
        family._build()
        family.net_.load_state_dict(torch.load(directory / "gnn.pt", weights_only=True))
        return family
