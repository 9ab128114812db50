"""The local table store (one parquet file per source plus a manifest of where it came from), and the
atomic writes and forgiving reads of the JSON state files under ``PREFLIGHT_HOME``.

Several state files that change together (a device's spec sheet and its measurements) are written
through a journal (:func:`write_together`): the new contents of all of them are written to one file
first, in one atomic rename, which decides the change; then each file is replaced; then the journal is
removed. A crash before the journal is in place leaves every file as it was; a crash after it leaves
the journal, and :func:`finish_journal` (run at start-up, under the home's lock) completes the change.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd
from preflight.data.errors import DataError, UsageError
from preflight.data.tables import Loaded

T = TypeVar("T")

log = logging.getLogger("preflight.state")


def atomic_write_bytes(path: Path, payload: bytes) -> None:
    """Write a file so that readers see either the old or the new content, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)  # mkstemp creates 0600
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)  # a full disk leaves no partial file behind
        raise


#: The journal of a change to several state files (see :func:`write_together`), in the files' folder.
JOURNAL = ".journal.json"


def output_file(path: Path, *inputs: Path, option: str = "--output") -> Path:
    """``path`` where a command may write its output (its ``option``): a file in an existing folder,
    none of its inputs."""
    if path.exists() and any(path.resolve() == given.resolve() for given in inputs):
        raise UsageError(f"{option} {path}: the output would overwrite an input; write it elsewhere")
    if path.is_dir():
        raise UsageError(f"{option} {path}: Is a directory")
    if not path.parent.is_dir():
        raise UsageError(f"{option} {path}: No such file or directory")
    return path


def write_together(folder: Path, files: dict[str, bytes]) -> None:
    """Replace several files of ``folder`` (by name; UTF-8 text) as one change: a crash at any point
    leaves either all of them changed or none (once :func:`finish_journal` has run)."""
    journal = folder / JOURNAL
    atomic_write_bytes(
        journal, json.dumps({name: payload.decode() for name, payload in files.items()}).encode()
    )
    _replace_all(folder, files)
    journal.unlink()


def finish_journal(folder: Path) -> list[str]:
    """Complete a change that a crash interrupted (a journal left in ``folder``); the names of the files it
    wrote. Call it where no change is under way (under the lock writers hold)."""
    journal = folder / JOURNAL
    found = read_json_state(journal, None)
    if found is None:
        return []
    if not (isinstance(found, dict) and all(_plain_name(n) and isinstance(t, str) for n, t in found.items())):
        set_aside_damaged(journal, "not a mapping of file names to their new contents")
        return []
    _replace_all(folder, {name: text.encode() for name, text in found.items()})
    journal.unlink()
    log.warning("completed an interrupted change of %s in %s", ", ".join(found), folder)
    return list(found)


def _plain_name(name: str) -> bool:
    """A file name of the folder itself: no path, nothing hidden."""
    return Path(name).name == name and not name.startswith(".")


def _replace_all(folder: Path, files: dict[str, bytes]) -> None:
    for name, payload in files.items():
        atomic_write_bytes(folder / name, payload)


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
    aside = _side_file(path, "damaged")
    try:
        path.rename(aside)
        outcome = f"moved it aside to {aside.name}"
    except OSError as exc:
        outcome = f"could not move it aside ({exc})"
    log.warning("damaged state file %s (%s): %s; carrying on without it", path, problem, outcome)


def set_aside_entries(path: Path, entries: list[dict]) -> str:
    """Keep entries of a state file that cannot be used (each saying why) in a side file
    ``<name>.set-aside-<UTC time>`` beside it (nothing is lost); the side file's name. The caller then
    rewrites the file without them: a crash between the two sets them aside twice, never loses them."""
    aside = _side_file(path, "set-aside")
    atomic_write_bytes(aside, json.dumps(entries, indent=1).encode())
    return aside.name


def _side_file(path: Path, label: str) -> Path:
    """``<name>.<label>-<UTC time>`` beside ``path``, numbered when one of that second exists already."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    aside, n = path.with_name(f"{path.name}.{label}-{stamp}"), 1
    while aside.exists():  # twice within a second: keep both
        aside, n = path.with_name(f"{path.name}.{label}-{stamp}-{n}"), n + 1
    return aside


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
