"""LCDB (Mohr et al. 2022, MIT): learning curves over training-set size for 20 scikit-learn learners on
248 OpenML datasets, from the ``lcdb`` package's ``database-accuracy.csv`` (``pip install lcdb``;
the file lies in the package's folder, ~150 MB).

One row per (dataset, learner, outer and inner seed, anchor): a ``run`` is one curve, its ``epoch``
the training-set size of the anchor and its ``budget`` the largest anchor; ``valid_accuracy`` (also
``accuracy``) is the validation score. There is no architecture: ``learner`` says what was trained.
``arch_group``, what ``nas-curve`` holds out together, is the dataset: a user brings a new dataset
(the same learners on it are what LCDB varies).
"""

from __future__ import annotations

from pathlib import Path

from preflight.data.sources._nas import nas_frame
from preflight.data.tables import Loaded, RowChecks, file_sha256, numeric, read_csv

SOURCE = "lcdb"
REQUIRED = ["openmlid", "learner", "size_train", "outer_seed", "inner_seed", "score_valid"]


def load(path: Path) -> Loaded:
    raw = read_csv(path, REQUIRED, SOURCE)
    size, score = numeric(raw, "size_train"), numeric(raw, "score_valid")
    learner = raw["learner"].astype(str)
    run = (
        raw["openmlid"].astype(str)
        + "/"
        + learner
        + "/"
        + raw["outer_seed"].astype(str)
        + "/"
        + raw["inner_seed"].astype(str)
    )
    dataset = "openml-" + raw["openmlid"].astype(str)
    rows = nas_frame(
        space=[None] * len(raw),
        arch=[None] * len(raw),
        arch_group=dataset,
        dataset=dataset,
        accuracy=score,
        valid_accuracy=score,
        learner=learner,
        run=run,
        epoch=size,
        budget=size.groupby(run).transform("max"),
    )
    checks = RowChecks(len(raw))
    checks.reject(~(size >= 1), "size_train missing or below 1")
    checks.reject(~score.between(0, 1), "score_valid not a fraction")
    checks.reject(rows.duplicated(["run", "epoch"], keep=False), "anchor repeated within a curve")
    return checks.finish(SOURCE, rows, file_sha256(path), path)
