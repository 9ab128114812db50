"""A ``PREFLIGHT_HOME`` can be moved, copied or restored from a backup.

MLflow's SQLite store keeps absolute artifact URIs (experiments, runs, model versions). The home
records the artifact root it last wrote under (``artifact-root.txt``); when it is opened somewhere
else, every stored URI under the old root is rewritten to the new one, in one transaction, before
MLflow reads it. A copy therefore reads and writes its own artifacts, never the original's.
A team registry (``MLFLOW_TRACKING_URI``) keeps its own locations and is left alone.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from pathlib import Path

log = logging.getLogger("preflight.state")

MARKER = "artifact-root.txt"
#: Columns holding artifact URIs, by table (``logged_models`` exists in MLflow 3 stores only).
URI_COLUMNS = {
    "experiments": ("artifact_location",),
    "runs": ("artifact_uri",),
    "model_versions": ("source", "storage_location"),
    "logged_models": ("artifact_location",),
}

_done: set[Path] = set()
_lock = threading.Lock()


def artifact_root(home: Path) -> str:
    """The URI of the home's artifact folder, where experiments are created."""
    return (home / "artifacts").resolve().as_uri()


def relocate(home: Path) -> None:
    """Rewrite the SQLite store's artifact URIs when the home was moved or copied (once per process)."""
    home = home.resolve()
    with _lock:
        if home in _done:
            return
        database, marker, root = home / "mlflow.db", home / MARKER, artifact_root(home)
        if database.exists():
            old = marker.read_text().strip() if marker.exists() else _recorded_root(database)
            if old and old != root:
                _rewrite(database, old, root)
                log.warning("home moved or copied: artifact locations rewritten from %s to %s", old, root)
        marker.write_text(root + "\n")
        _done.add(home)


def _recorded_root(database: Path) -> str | None:
    """The artifact root of a home written before the marker existed: where its experiments live."""
    with sqlite3.connect(database) as db:
        if not _has_table(db, "experiments"):
            return None
        query = "SELECT artifact_location FROM experiments WHERE artifact_location LIKE 'file://%/artifacts'"
        row = db.execute(query + " ORDER BY experiment_id LIMIT 1").fetchone()
    return row[0] if row else None


def _rewrite(database: Path, old: str, new: str) -> None:
    with sqlite3.connect(database) as db:  # one transaction: committed whole, or not at all
        for table, columns in URI_COLUMNS.items():
            if not _has_table(db, table):
                continue
            for column in columns:
                rewrite = f"UPDATE {table} SET {column} = ? || substr({column}, ?) "
                rewrite += f"WHERE substr({column}, 1, ?) = ?"
                db.execute(rewrite, (new, len(old) + 1, len(old), old))


def _has_table(db: sqlite3.Connection, table: str) -> bool:
    return (
        db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (table,)).fetchone()
        is not None
    )
