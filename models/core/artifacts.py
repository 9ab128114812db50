"""A predictor on disk (what MLflow stores as the run's ``predictor`` artifact, and the service loads).

``predictor.json`` holds the state (task, family, envelope...); ``family/`` the family's own files;
``residuals.npz`` and ``estimates.npz`` the calibrators (``scores.npz`` too, what any version reads);
``train.parquet`` the training table kept for few-shot refits, with ``graphs.npz`` and
``sequences.npz`` beside it when the features have them; ``zero_shot.parquet`` the training subjects'
out-of-fold residuals for a task adapting by residuals; ``fingerprint_*`` the reference devices of a task
adapting by fingerprint. Adaptations are not saved: the service
replays them from the stored measurements.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
from preflight.features import Features, Graphs, Parts, Sequences, Slots
from preflight.models.core import fingerprint
from preflight.models.core.calibration import Calibration, Calibrators
from preflight.models.core.conformal import Conformal
from preflight.models.core.envelope import Envelope
from preflight.models.core.predictor import Predictor
from preflight.models.core.residual import Scaler, ZeroShot
from preflight.models.core.targets import Target
from preflight.models.core.task import get_task
from preflight.models.families import FAMILIES

_PARTS = ("X", "reference", "meta")
#: The column of parts.parquet naming the training row each part belongs to.
OWNER = "owner:"
#: The column of zero_shot.parquet naming each training row's subject (its kernel).
SUBJECT = "subject:"


def save(predictor: Predictor, directory: Path) -> None:
    predictor.base_family_.save(directory / "family")
    keys = [(key, t) for key, per_target in predictor.calibration_.calibrators.items() for t in per_target]
    calibrators = [predictor.calibration_.calibrators[k][t] for k, t in keys]
    np.savez_compressed(directory / "scores.npz", *(_saved(c.scores_) for c in calibrators))
    if all(c.residuals_ is not None for c in calibrators):  # not for calibrators loaded from scores alone
        np.savez_compressed(directory / "residuals.npz", *(_saved(c.residuals_) for c in calibrators))
        np.savez_compressed(directory / "estimates.npz", *(_saved(c.estimates_) for c in calibrators))
    train_features, train_Y = predictor.train_
    _save_training(train_features, train_Y, directory)
    predictor.unseen_residuals_.to_parquet(directory / "unseen_residuals.parquet")
    zero_shot = predictor.zero_shot_
    if zero_shot is not None:
        zero_shot.residuals.assign(**{SUBJECT: zero_shot.subjects}).to_parquet(
            directory / "zero_shot.parquet"
        )
    if predictor.references_ is not None:
        fingerprint.save(predictor.references_, directory)
    state = {
        "task": predictor.task.name,
        "family": predictor.family,
        "seed": predictor.seed,
        "calibration_folds": predictor.calibration_folds,
        "params": predictor.params,
        "calibrators": keys,
        "envelope": predictor.envelope_.state(),
        "target_devices": predictor.target_devices_,
        "zero_shot": None
        if zero_shot is None
        else {"scaler": zero_shot.scaler.state(), "quality": zero_shot.quality},
    }
    (directory / "predictor.json").write_text(json.dumps(state))


def load(directory: Path) -> Predictor:
    state = json.loads((directory / "predictor.json").read_text())
    task = get_task(state["task"])
    predictor = Predictor(
        task, state["family"], seed=state["seed"], calibration_folds=state["calibration_folds"],
        params=state["params"],
    )  # fmt: skip
    predictor.family_ = predictor.base_family_ = FAMILIES[state["family"]].load(directory / "family")
    predictor.calibration_ = Calibration(
        task.targets, _load_calibrators(directory, state["calibrators"], task.targets)
    )
    predictor.envelope_ = Envelope.from_state(state["envelope"])
    predictor.target_devices_ = state.get("target_devices", {})  # absent from predictors saved before issue 4
    predictor.train_ = _load_training(directory)
    residuals = directory / "unseen_residuals.parquet"  # absent from predictors saved before issue 4
    predictor.unseen_residuals_ = (
        pd.read_parquet(residuals) if residuals.exists() else pd.DataFrame({"device_id": []})
    )
    if zero_shot := state.get("zero_shot"):  # absent from predictors saved before issue 27
        table, scaler = (
            pd.read_parquet(directory / "zero_shot.parquet"),
            Scaler.from_state(zero_shot["scaler"]),
        )
        subjects, (train_features, train_Y) = table.pop(SUBJECT).to_numpy(dtype=str), predictor.train_
        predictor.zero_shot_ = ZeroShot.restored(
            task.targets, train_Y, table, subjects, scaler, train_features.X, zero_shot["quality"],
            predictor.seed,
        )  # fmt: skip
    predictor.references_ = fingerprint.load(directory)
    return predictor


def _saved(values: np.ndarray | None) -> np.ndarray:
    """A calibrator's array (set by then: calibrators are built with their scores)."""
    assert values is not None
    return values


def _load_calibrators(directory: Path, keys: list, targets: dict[str, Target]) -> Calibrators:
    """Calibrators from signed residuals and their estimates, or from the |residuals| alone where a
    predictor saved none (before issue 5): intervals, but no probabilities, from those."""
    out: Calibrators = {}
    if not (directory / "residuals.npz").exists():
        with np.load(directory / "scores.npz") as scores:
            for i, (key, name) in enumerate(keys):
                out.setdefault(key, {})[name] = Conformal.from_scores(targets[name], scores[f"arr_{i}"])
        return out
    with np.load(directory / "residuals.npz") as residuals, np.load(directory / "estimates.npz") as estimates:
        for i, (key, name) in enumerate(keys):
            calibrator = Conformal.from_residuals(targets[name], residuals[f"arr_{i}"], estimates[f"arr_{i}"])
            out.setdefault(key, {})[name] = calibrator
    return out


def _save_training(features: Features, Y: pd.DataFrame, directory: Path) -> None:
    """Features and targets as one flat table with prefixed columns, graphs and sequences beside it."""
    frames = [getattr(features, part).add_prefix(f"{part}:") for part in _PARTS] + [Y.add_prefix("y:")]
    pd.concat([f.reset_index(drop=True) for f in frames], axis=1).to_parquet(directory / "train.parquet")
    if features.graphs is not None:
        graphs, slots = features.graphs.arrays, features.graphs.slots
        saved = {
            "x": np.concatenate([x for x, _ in graphs]),
            "edge_index": np.concatenate([e for _, e in graphs], axis=1),
            "nodes": np.array([len(x) for x, _ in graphs]),
            "edges": np.array([e.shape[1] for _, e in graphs]),
            "index": features.graphs.index,
        }
        if slots is not None:
            saved |= {"slot_node": slots.node, "slot_values": slots.values}
        np.savez_compressed(directory / "graphs.npz", **saved)  # type: ignore[arg-type]
    if features.sequences is not None:
        np.savez_compressed(
            directory / "sequences.npz", values=features.sequences.values, mask=features.sequences.mask
        )
    if features.parts is not None:
        features.parts.frame.assign(**{OWNER: features.parts.owner}).to_parquet(directory / "parts.parquet")
    (directory / "monotone.json").write_text(json.dumps(features.monotone))


def _load_training(directory: Path) -> tuple[Features, pd.DataFrame]:
    table = pd.read_parquet(directory / "train.parquet")

    def part(prefix: str) -> pd.DataFrame:
        columns = [c for c in table.columns if c.startswith(f"{prefix}:")]
        return table[columns].rename(columns=lambda c: c.split(":", 1)[1])

    features = Features(*(part(p) for p in _PARTS))
    if (directory / "graphs.npz").exists():
        with np.load(directory / "graphs.npz") as g:
            x = np.split(g["x"], np.cumsum(g["nodes"])[:-1])
            edges = np.split(g["edge_index"], np.cumsum(g["edges"])[:-1], axis=1)
            slots = Slots(g["slot_node"], g["slot_values"]) if "slot_node" in g else None
            features.graphs = Graphs.from_arrays(list(zip(x, edges)), g["index"], slots)
    if (directory / "sequences.npz").exists():
        with np.load(directory / "sequences.npz") as s:
            features.sequences = Sequences(s["values"], s["mask"])
    if (directory / "parts.parquet").exists():
        frame = pd.read_parquet(directory / "parts.parquet")
        features.parts = Parts(frame.drop(columns=OWNER), frame[OWNER].to_numpy())
    if (directory / "monotone.json").exists():
        features.monotone = json.loads((directory / "monotone.json").read_text())
    return features, part("y")
