"""The local table store (one parquet file per source plus a manifest of where it came from), and the
atomic writes and forgiving reads of the JSON state files under ``PREFLIGHT_HOME``."""

from __future__ import annotations

import json
import logging
import os
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd
from preflight.data.errors import DataError
from preflight.data.tables import Loaded

T = TypeVar("T")

log = logging.getLogger("preflight.state")


def atomic_write_bytes(path: Path, payload: bytes) -> None:
    """Write a file so that readers see either the old or the new content, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "wb") as fh:
        fh.write(payload)
        fh.flush()
        os.fsync(fh.fileno())
    os.chmod(tmp, 0o644)  # mkstemp creates 0600
    os.replace(tmp, path)


def read_json_state(path: Path, default: T) -> T | Any:
    """The JSON in ``path``, or ``default`` when the file is missing or damaged (empty, truncated, not
    JSON, unreadable); a damaged file is set aside with a warning, never raised."""
    try:
        payload = path.read_bytes()
    except FileNotFoundError:
        return default
    except OSError as exc:
        set_aside_damaged(path, f"unreadable: {exc.strerror or exc}")
        return default
    try:
        return json.loads(payload)
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
        set_aside_damaged(path, _what_is_wrong(payload, exc))
        return default


def _what_is_wrong(payload: bytes, exc: ValueError) -> str:
    """What is wrong with a file that JSON cannot parse, in a few words."""
    if not payload.strip():
        return "empty"
    if isinstance(exc, json.JSONDecodeError) and exc.pos >= len(exc.doc.rstrip()):
        return f"truncated: {exc}"
    return f"not valid JSON: {exc}"


def set_aside_damaged(path: Path, problem: str) -> None:
    """Rename a damaged state file to ``<name>.damaged-<UTC time>`` (nothing is lost) and log one
    warning line saying what is wrong with it."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    aside, n = path.with_name(f"{path.name}.damaged-{stamp}"), 1
    while aside.exists():  # damaged twice within a second: keep both
        aside, n = path.with_name(f"{path.name}.damaged-{stamp}-{n}"), n + 1
    try:
        path.rename(aside)
        outcome = f"moved it aside to {aside.name}"
    except OSError as exc:
        outcome = f"could not move it aside ({exc})"
    log.warning("damaged state file %s (%s): %s; carrying on without it", path, problem, outcome)


class TableStore:
    """Canonical tables under ``<home>/tables``: ``<source>.parquet`` and ``manifest.json``."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    @property
    def manifest_path(self) -> Path:
        return self.root / "manifest.json"

    def manifest(self) -> dict[str, dict]:
        return read_json_state(self.manifest_path, {})

    def put(self, loaded: Loaded, path: Path) -> dict:
        """Store a loaded source and record its checksum and rejected-row counts."""
        self.root.mkdir(parents=True, exist_ok=True)
        table = self.root / f"{loaded.source}.parquet"
        fd, tmp = tempfile.mkstemp(dir=self.root, prefix=f".{table.name}.")
        os.close(fd)
        loaded.rows.to_parquet(tmp, index=False)
        os.replace(tmp, table)
        entry = {
            "source": loaded.source,
            "path": str(Path(path).resolve()),
            "sha256": loaded.sha256,
            "rows": len(loaded.rows),
            "rejected": len(loaded.rejects),
            "reject_reasons": loaded.reject_counts(),
            "extra_devices": loaded.extra_devices,
            "stored_at": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        manifest = self.manifest() | {loaded.source: entry}
        atomic_write_bytes(self.manifest_path, json.dumps(manifest, indent=2).encode())
        return entry

    def get(self, source: str) -> pd.DataFrame:
        table = self.root / f"{source}.parquet"
        if not table.exists():
            raise DataError(
                f"source {source!r} is not in the table store; run `preflight data load {source} --path FILE`"
            )
        return pd.read_parquet(table)
