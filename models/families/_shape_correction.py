"""A measured unit's own departure from the shared shape term, learned from its shots.

The physics family's shape term is shared by every device, so a device's ten measurements cannot
refit it without moving every other device's answers. Yet shots often say where on the shape a
device departs from it (a CPU's skinny GEMMs, say). Moving the unit's parameters moves every shape
alike (docs/BENCHMARKS.md, issue 24: ten skinny shots of the Xeon Phi made its other rows worse).
So a unit with enough shots also learns a correction of its own: a small tree on the log residual
of the adapted law at its shots, beside a seeded sample of training rows at their own residual (the
*anchor*: near zero where the shape term was right on the devices that trained it), the shots
together weighing as much as the anchor. Between the shots the tree follows them; where the
anchor's rows dominate it stays near zero. It answers for that device only.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from preflight.features import bare
from preflight.models.core.targets import Target
from preflight.models.families.tree import TreeFamily

#: Usable shots of a unit from which it learns a correction (with fewer, its parameters alone adapt).
MIN_SHOTS = 3
#: Training rows kept as the anchor (a seeded sample of the rows the family was fitted on).
ANCHOR_ROWS = 5000
#: The correction tree: small and short, as a handful of shots carries little (trees, leaves, rate).
TREES, LEAVES, LEARNING_RATE = 50, 8, 0.1
#: The correction's target, on the log scale of time.
TARGET = "log_residual"
_FILE = "anchor.parquet"
_GROUP, _RESIDUAL = "_shape_group", "_log_residual"


@dataclass
class Anchor:
    """Training rows' model inputs, the shape tree that read each (``shape_group``), and the log
    residual of the fitted family there."""

    X: pd.DataFrame
    groups: np.ndarray
    residual: np.ndarray

    @classmethod
    def sample(cls, X: pd.DataFrame, groups: np.ndarray, residual: np.ndarray, seed: int) -> Anchor:
        """At most ``ANCHOR_ROWS`` of the training rows (seeded), in their order."""
        rows = np.arange(len(X))
        if len(rows) > ANCHOR_ROWS:
            rows = np.sort(np.random.default_rng(seed).choice(rows, ANCHOR_ROWS, replace=False))
        return cls(X.iloc[rows].reset_index(drop=True), np.asarray(groups)[rows], np.asarray(residual)[rows])

    def correction(
        self,
        rows: np.ndarray,
        columns: list[str],
        monotone: dict[str, int],
        shots: pd.DataFrame,
        residual: np.ndarray,
        seed: int,
    ) -> TreeFamily:
        """A tree of the log residual over ``columns`` from the anchor's ``rows`` and the shots (their
        inputs ``shots``, their ``residual``), ``monotone`` as the shape term's directions (+1: rising
        efficiency, so falling time)."""
        X = pd.concat([self.X[columns].iloc[rows], shots[columns]], ignore_index=True)
        y = np.r_[self.residual[rows], residual]
        weight = np.r_[np.ones(len(rows)), np.full(len(residual), len(rows) / len(residual))]
        features = bare(X, TARGET, {c: -d for c, d in monotone.items()})
        tree = TreeFamily(
            targets={TARGET: Target("", "identity")},
            n_estimators=TREES,
            num_leaves=LEAVES,
            learning_rate=LEARNING_RATE,
            min_child_samples=10,
            seed=seed,
        )
        return tree.fit(features, pd.DataFrame({TARGET: y}), sample_weight=weight)

    def save(self, directory: Path) -> None:
        self.X.assign(**{_GROUP: self.groups, _RESIDUAL: self.residual}).to_parquet(directory / _FILE)

    @classmethod
    def load(cls, directory: Path) -> Anchor | None:
        """The saved anchor, or None for a family saved before it had one (it adapts parameters only)."""
        if not (directory / _FILE).exists():
            return None
        frame = pd.read_parquet(directory / _FILE)
        X = frame.drop(columns=[_GROUP, _RESIDUAL])
        return cls(X, frame[_GROUP].to_numpy().astype(str), frame[_RESIDUAL].to_numpy(dtype=float))


def log_correction(tree: TreeFamily, X: pd.DataFrame) -> np.ndarray:
    """A correction's log residual for rows ``X``."""
    return tree.predict(bare(X, TARGET))[TARGET].to_numpy()
