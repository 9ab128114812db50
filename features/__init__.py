"""Turning canonical rows into model inputs. Pure functions, no I/O.

A featurizer is ``(rows, catalogue) -> Features``. Besides the table every family can read, it fills
what non-tabular families need: ``graphs`` (a graph per distinct item, e.g. an architecture's op graph
or an HLS program's) and ``sequences`` (a window of a metric trace per row). Columns of ``X`` named
``ctx_*`` are the *context* of such an input (dataset, device, batch size): a GNN or a sequence model
joins them with its embedding of the graph or the sequence.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np
import pandas as pd

#: ``X`` columns with this prefix are the context that graph and sequence families join to their embedding.
CONTEXT_PREFIX = "ctx_"

#: A graph as arrays: node features ``[nodes, channels]`` (float32) and edges ``[2, edges]`` (int64).
GraphArrays = tuple[np.ndarray, np.ndarray]


@dataclass
class Slots:
    """Values a row sets on some nodes of its graph (a design's pragma values on the placeholder nodes
    of its kernel's program graph): ``node[rows, slots]`` a node's position in the row's graph (-1: an
    unused slot) and ``values[rows, slots, channels]`` what the row sets there."""

    node: np.ndarray
    values: np.ndarray

    def take(self, rows: np.ndarray) -> Slots:
        return Slots(self.node[rows], self.values[rows])

    @staticmethod
    def concat(parts: list[Slots]) -> Slots:
        width = max(p.node.shape[1] for p in parts)

        def pad(p: Slots) -> Slots:
            extra = width - p.node.shape[1]
            return Slots(
                np.pad(p.node, [(0, 0), (0, extra)], constant_values=-1),
                np.pad(p.values, [(0, 0), (0, extra), (0, 0)]),
            )

        padded = [pad(p) for p in parts]
        return Slots(np.concatenate([p.node for p in padded]), np.concatenate([p.values for p in padded]))


@dataclass
class Graphs:
    """One graph per distinct item and, per row, the index of its graph, plus the ``slots`` a row sets
    on its graph's nodes where rows sharing a graph differ (designs of one kernel).

    Graphs are built on first use (``build(key)`` per distinct key, then cached), so a featurizer can
    offer them at no cost to the families that never read them. ``data()`` gives them as
    ``torch_geometric.data.Data``; ``arrays`` as numpy (node features, edge index).
    """

    keys: Sequence[Hashable]
    index: np.ndarray
    build: Callable[[Any], GraphArrays]
    _built: list[GraphArrays] | None = field(default=None, repr=False)
    slots: Slots | None = None

    @classmethod
    def from_arrays(cls, arrays: list[GraphArrays], index: np.ndarray, slots: Slots | None = None) -> Graphs:
        index = np.asarray(index, dtype=np.int64)
        return cls(list(range(len(arrays))), index, arrays.__getitem__, arrays, slots)

    @property
    def arrays(self) -> list[GraphArrays]:
        if self._built is None:
            self._built = [self.build(key) for key in self.keys]
        return self._built

    @property
    def channels(self) -> int:
        """Node feature channels (``in_channels`` of a graph layer)."""
        return int(self.arrays[0][0].shape[1]) if len(self.keys) else 0

    def data(self) -> list:
        """The graphs as ``torch_geometric.data.Data`` (``x``, ``edge_index``)."""
        import torch
        from torch_geometric.data import Data

        return [Data(x=torch.from_numpy(x), edge_index=torch.from_numpy(e)) for x, e in self.arrays]

    def take(self, rows: np.ndarray) -> Graphs:
        slots = None if self.slots is None else self.slots.take(rows)
        return Graphs(self.keys, self.index[rows], self.build, self._built, slots)

    @staticmethod
    def concat(parts: list[Graphs]) -> Graphs:
        offsets = np.cumsum([0] + [len(p.keys) for p in parts[:-1]])
        arrays = [a for p in parts for a in p.arrays]
        slots = [p.slots for p in parts if p.slots is not None]
        return Graphs.from_arrays(
            arrays,
            np.concatenate([p.index + o for p, o in zip(parts, offsets)]),
            Slots.concat(slots) if len(slots) == len(parts) else None,
        )


@dataclass
class Sequences:
    """A float window per row, ``values[rows, time, channels]``, with ``mask[rows, time]`` true where
    a step was measured (shorter windows are padded at the end)."""

    values: np.ndarray
    mask: np.ndarray

    def take(self, rows: np.ndarray) -> Sequences:
        return Sequences(self.values[rows], self.mask[rows])

    @staticmethod
    def concat(parts: list[Sequences]) -> Sequences:
        steps = max(p.values.shape[1] for p in parts)

        def pad(a: np.ndarray) -> np.ndarray:
            return np.pad(a, [(0, 0), (0, steps - a.shape[1])] + [(0, 0)] * (a.ndim - 2))

        return Sequences(
            np.concatenate([pad(p.values) for p in parts]), np.concatenate([pad(p.mask) for p in parts])
        )


def _members(groups: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The members of each of ``rows`` (``groups[i]``: the row member ``i`` belongs to), in the order of
    ``rows`` (repeats allowed), and the new position of the row each belongs to."""
    by_group = np.argsort(groups, kind="stable")
    start = np.searchsorted(groups[by_group], rows, side="left")
    count = np.searchsorted(groups[by_group], rows, side="right") - start
    new_group = np.repeat(np.arange(len(rows)), count)
    offset = np.arange(len(new_group)) - np.repeat(np.cumsum(count) - count, count)
    return by_group[np.repeat(start, count) + offset], new_group


@dataclass
class Parts:
    """Items made of parts (a whole model of its kernels): one table row per part, ``owner[i]`` the
    row of ``Features`` that part ``i`` belongs to. Parts carry their own inputs and, in training
    data, their own measurements, for families that predict the parts and add them up. ``gemms`` are
    the parts' GEMM kernels as the GEMM featurizer has them (None: no GEMM kernel), ``gemm_part[j]``
    the part kernel ``j`` belongs to: what a family times by the GEMM law."""

    frame: pd.DataFrame
    owner: np.ndarray
    gemms: Features | None = None
    gemm_part: np.ndarray | None = None

    def take(self, rows: np.ndarray) -> Parts:
        """The parts of ``rows`` (by position, repeats allowed), owned by their new positions."""
        order, owner = _members(self.owner, np.asarray(rows, dtype=np.int64))
        if self.gemms is None or self.gemm_part is None:
            return Parts(self.frame.iloc[order].reset_index(drop=True), owner)
        kernels, part = _members(self.gemm_part, order)
        return Parts(self.frame.iloc[order].reset_index(drop=True), owner, self.gemms.take(kernels), part)

    @staticmethod
    def concat(parts: list[Parts], sizes: list[int]) -> Parts:
        offsets = np.cumsum([0, *sizes[:-1]])
        frame = pd.concat([p.frame for p in parts], ignore_index=True)
        owner = np.concatenate([p.owner + offset for p, offset in zip(parts, offsets)])
        part_offsets = np.cumsum([0, *[len(p.frame) for p in parts[:-1]]])
        gemms, part = [], []
        for piece, offset in zip(parts, part_offsets):  # parts without GEMM kernels add none
            if piece.gemms is not None and piece.gemm_part is not None:
                gemms.append(piece.gemms)
                part.append(piece.gemm_part + offset)
        if not gemms:
            return Parts(frame, owner)
        return Parts(frame, owner, concat(gemms), np.concatenate(part))


@dataclass
class Pieces:
    """Other items that together do the work of an item (a GEMM as its halves along every side, or
    padded into a larger one), and the pieces of those pieces, every depth in one ``features``:
    ``depth[i]`` is 1 for a piece of an item and ``d`` for a piece of a depth ``d − 1`` piece;
    ``owner[i]`` the row piece ``i`` stands in for (a row of the items' ``Features`` at depth 1, else
    a row of ``features``); ``count[i]`` how many runs of it the work takes, ``extra_ms[i]`` what
    joining them costs past their own time. A library can always run the item that way, so no
    estimate of it need exceed ``count · estimate(piece) + extra_ms``. One table for every depth: a
    family estimates them all at once, and a single item builds its frames once, not once a depth."""

    features: Features
    owner: np.ndarray
    depth: np.ndarray
    count: np.ndarray
    extra_ms: np.ndarray

    def take(self, rows: np.ndarray) -> Pieces:
        """The pieces of ``rows`` (by position, repeats allowed) and theirs, owned by their new
        positions, shallowest first."""
        taken, owners = [], []
        heads, begin, total = np.asarray(rows, dtype=np.int64), 0, 0  # begin: where heads now start
        for depth in range(1, int(self.depth.max(initial=0)) + 1):
            at = np.flatnonzero(self.depth == depth)
            order, owner = _members(self.owner[at], heads)
            taken.append(at[order])
            owners.append(owner + begin)
            heads, begin, total = at[order], total, total + len(order)
        order = np.concatenate(taken) if taken else np.zeros(0, dtype=np.int64)
        owner = np.concatenate(owners) if owners else np.zeros(0, dtype=np.int64)
        return Pieces(
            self.features.take(order), owner, self.depth[order], self.count[order], self.extra_ms[order]
        )

    def shifted_owner(self, items: int, pieces: int) -> np.ndarray:
        """``owner`` where ``items`` rows come before the items and ``pieces`` rows before the pieces
        (``shifted_owner(0, len(items))``: positions in one table of the items, then their pieces)."""
        return np.where(self.depth == 1, self.owner + items, self.owner + pieces)

    @staticmethod
    def concat(pieces: list[Pieces | None], sizes: list[int]) -> Pieces | None:
        """The pieces of several items' ``Features`` (``sizes`` rows each), one after the other."""
        offsets = np.cumsum([0, *sizes[:-1]])
        kept = [(p, offset) for p, offset in zip(pieces, offsets) if p is not None]
        if not kept:
            return None
        starts = np.cumsum([0, *(len(p.owner) for p, _ in kept[:-1])])
        return Pieces(
            concat([p.features for p, _ in kept]),
            np.concatenate([p.shifted_owner(offset, start) for (p, offset), start in zip(kept, starts)]),
            np.concatenate([p.depth for p, _ in kept]),
            np.concatenate([p.count for p, _ in kept]),
            np.concatenate([p.extra_ms for p, _ in kept]),
        )


@dataclass
class Features:
    """What a featurizer returns.

    ``X`` holds the tabular model inputs; ``reference`` a per-target scale the model may predict
    relative to (e.g. the roofline time for ``runtime_ms``); ``meta`` the non-input columns that
    splits, the out-of-distribution envelope and few-shot adaptation use (the columns a Task names:
    device, groups, stratum); ``graphs`` and ``sequences`` the inputs of graph and sequence families;
    ``parts`` the parts of composite items; ``monotone`` the directions physics fixes, per target and
    column of ``X`` (+1 rising, -1 falling), for families that can keep to them; ``pieces`` the other
    items whose runs bound an item's time, for families that keep to that bound.
    """

    X: pd.DataFrame
    reference: pd.DataFrame
    meta: pd.DataFrame
    graphs: Graphs | None = None
    sequences: Sequences | None = None
    parts: Parts | None = None
    monotone: dict[str, dict[str, int]] = field(default_factory=dict)
    pieces: Pieces | None = None

    def take(self, index: np.ndarray | list[int]) -> Features:
        """Rows by position, as a new Features."""
        index = np.asarray(index, dtype=np.int64)

        def rows(frame: pd.DataFrame) -> pd.DataFrame:
            return frame.iloc[index].reset_index(drop=True)

        return Features(
            rows(self.X),
            rows(self.reference),
            rows(self.meta),
            None if self.graphs is None else self.graphs.take(index),
            None if self.sequences is None else self.sequences.take(index),
            None if self.parts is None else self.parts.take(index),
            self.monotone,
            None if self.pieces is None else self.pieces.take(index),
        )


def bare(X: pd.DataFrame, target: str, monotone: dict[str, int] | None = None) -> Features:
    """Rows of a bare table for a family that learns ``target`` on its own scale (a reference of
    zeros, no meta), with ``monotone`` as its directions: a tree inside another family."""
    return Features(
        X=X,
        reference=pd.DataFrame({target: np.zeros(len(X))}, index=X.index),
        meta=pd.DataFrame(index=X.index),
        monotone={target: monotone or {}},
    )


def concat(parts: list[Features]) -> Features:
    """Rows of several Features, one after the other."""

    def stack(attr: str) -> pd.DataFrame:
        return pd.concat([getattr(p, attr) for p in parts], ignore_index=True)

    graphs = [p.graphs for p in parts if p.graphs is not None]
    sequences = [p.sequences for p in parts if p.sequences is not None]
    composite = [p.parts for p in parts if p.parts is not None]
    return Features(
        stack("X"),
        stack("reference"),
        stack("meta"),
        Graphs.concat(graphs) if len(graphs) == len(parts) else None,
        Sequences.concat(sequences) if len(sequences) == len(parts) else None,
        Parts.concat(composite, [len(p.X) for p in parts]) if len(composite) == len(parts) else None,
        parts[0].monotone,
        Pieces.concat([p.pieces for p in parts], [len(p.X) for p in parts]),
    )


def numbers(rows: pd.DataFrame, column: str) -> np.ndarray:
    """A column of canonical rows as floats: NaN where the rows lack it or a value is not a number."""
    if column not in rows:
        return np.full(len(rows), np.nan)
    return pd.to_numeric(rows[column], errors="coerce").to_numpy(dtype=float)


def among(values: np.ndarray, allowed: Sequence[Hashable] | np.ndarray) -> np.ndarray:
    """Whether each value is one of ``allowed``, looked up once per distinct value (``np.isin`` sorts
    every value, which costs most for strings)."""
    index, distinct = pd.factorize(np.asarray(values), use_na_sentinel=False)
    return np.isin(np.asarray(distinct), np.asarray(list(allowed), dtype=object))[index]


def float_frame(columns: Mapping[str, np.ndarray]) -> pd.DataFrame:
    """The columns as one float block, the layout a frame built from a dict of float columns
    consolidates them into, without pandas checking each column and indexing the names again: for
    a few rows, a frame built from a dict of ~50 columns costs 30 times this."""
    block = np.empty((len(columns), len(next(iter(columns.values())))))
    for row, values in zip(block, columns.values()):
        row[:] = values
    return pd.DataFrame(block.T, columns=_column_index(tuple(columns)), copy=False)


@lru_cache(maxsize=64)
def _column_index(names: tuple[str, ...]) -> pd.Index:
    return pd.Index(names)


#: From how many rows on ``labels`` gives pandas' own array (below, a frame converts a few strings
#: faster than such an array is indexed).
LABELS_FROM_ROWS = 1_000


def labels(
    values: Sequence[Hashable] | np.ndarray, index: np.ndarray | None = None
) -> np.ndarray | pd.api.extensions.ExtensionArray:
    """``values[index]`` (the values themselves without ``index``) as the array a frame's column of
    them would hold (pandas' string array for strings), each distinct value converted once, where there
    are many rows: the frames built from parts of it then take it rather than converting its strings
    again. A few rows stay a NumPy array."""
    if index is None:
        if len(values) < LABELS_FROM_ROWS:
            return np.asarray(values)
        index, values = pd.factorize(np.asarray(values), use_na_sentinel=False)
    if len(index) < LABELS_FROM_ROWS:
        return np.asarray(values, dtype=object)[index]
    return pd.Series(values, copy=False).array.take(index)


#: Below this many rows ``distinct_rows`` compares the rows' values in Python: hashing each column
#: with pandas costs ~30 µs a column whatever its length.
FEW_ROWS = 64


def _few_rows_codes(columns: tuple[np.ndarray | pd.Series, ...]) -> np.ndarray:
    """``distinct_rows``' codes for a few rows: every missing value is one value, as ``pd.factorize``
    counts them."""
    code_of: dict[tuple, int] = {}
    values = [c.tolist() if isinstance(c, pd.Series) else np.asarray(c).tolist() for c in columns]
    codes = [
        code_of.setdefault(tuple(None if pd.isna(v) else v for v in row), len(code_of))
        for row in zip(*values)
    ]
    return np.array(codes, dtype=np.int64)


def _hashed_codes(columns: tuple[np.ndarray | pd.Series, ...]) -> np.ndarray:
    """``distinct_rows``' codes, hashing integer codes column by column."""
    index = np.zeros(len(columns[0]), dtype=np.int64)
    for column in columns:
        codes, distinct = pd.factorize(column, use_na_sentinel=False)
        index = pd.factorize(index * len(distinct) + codes)[0]  # compact again: no overflow
    return index


def distinct_rows(*columns: np.ndarray | pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Each row's code for its combination of values across ``columns``, numbered in order of first
    appearance, and the first row of each combination (hashing integer codes column by column: a
    ``MultiIndex`` of the columns costs ten times more). A frame's string column is best given as its
    ``Series``: Arrow encodes it several times faster than NumPy's copy of it is hashed. Fewer than
    ``FEW_ROWS`` rows are compared in Python."""
    index = _few_rows_codes(columns) if len(columns[0]) < FEW_ROWS else _hashed_codes(columns)
    return index, np.unique(index, return_index=True)[1]


def rows_of_each(*columns: np.ndarray | pd.Series) -> dict[Any, np.ndarray]:
    """The rows (positions, ascending) of each distinct value of one column, or of each distinct
    combination of several (keyed by a tuple), in order of first appearance (a missing value is one)."""
    index, first = distinct_rows(*columns)
    rows = np.split(np.argsort(index, kind="stable"), np.cumsum(np.bincount(index))[:-1])
    heads = [(c.iloc[first] if isinstance(c, pd.Series) else np.asarray(c)[first]).tolist() for c in columns]
    keys = heads[0] if len(columns) == 1 else list(zip(*heads))
    return dict(zip(keys, rows))
