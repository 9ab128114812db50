"""The local table store: one parquet file per source plus a manifest of where it came from."""

from __future__ import annotations

import json
import os
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
from preflight.data.errors import DataError
from preflight.data.tables import Loaded


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


class TableStore:
    """Canonical tables under ``<home>/tables``: ``<source>.parquet`` and ``manifest.json``."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    @property
    def manifest_path(self) -> Path:
        return self.root / "manifest.json"

    def manifest(self) -> dict[str, dict]:
        if not self.manifest_path.exists():
            return {}
        return json.loads(self.manifest_path.read_text())

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
