"""A loaded source: canonical rows, the rows rejected with their reasons, and the file's checksum."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from preflight.data.errors import DataError

#: Share of rejected rows above which a whole file is refused as partial or corrupt.
MAX_REJECTED_FRACTION = 0.5


@dataclass
class Loaded:
    """What a loader returns: never rows silently dropped."""

    source: str
    rows: pd.DataFrame
    rejects: pd.DataFrame  # columns: row (0-based line in the file's data), reason
    sha256: str
    extra_devices: list[dict] = field(default_factory=list)  # spec sheets that travel with the file

    def reject_counts(self) -> dict[str, int]:
        return self.rejects["reason"].value_counts().to_dict() if len(self.rejects) else {}


def file_sha256(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def files_sha256(root: Path, files: list[Path]) -> str:
    """One checksum over several files read: their names relative to ``root`` and their contents."""
    digest = hashlib.sha256()
    for path in sorted(files):
        digest.update(f"{path.relative_to(root).as_posix()}\0{file_sha256(path)}\n".encode())
    return digest.hexdigest()


def read_csv(path: Path, required: list[str], source: str) -> pd.DataFrame:
    """Read a published CSV, refusing a missing or unreadable file and one that lacks required columns."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{source}: no file at {path}")
    try:
        frame = pd.read_csv(path, low_memory=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise DataError(f"{source}: {path} is not a readable CSV: {exc}") from exc
    missing = [c for c in required if c not in frame.columns]
    if missing:
        raise DataError(f"{source}: {path} lacks columns {missing}; is it the published layout?")
    return frame


def canonical_frame(names: Sequence[str], **columns) -> pd.DataFrame:
    """A source's table in a canonical layout: every column of ``names`` in that order (one not given
    as missing values), then any other column given."""
    n = len(next(iter(columns.values())))
    frame = pd.DataFrame({c: columns.get(c, pd.Series([np.nan] * n)) for c in names})
    return frame.assign(**{c: v for c, v in columns.items() if c not in names})


def numeric(frame: pd.DataFrame, column: str) -> pd.Series:
    """A column as floats; text that is not a number becomes NaN (callers decide if that rejects)."""
    return pd.to_numeric(frame[column], errors="coerce")


class RowChecks:
    """Collects per-row rejection reasons; the first failing check names the reason."""

    def __init__(self, n_rows: int) -> None:
        self.reason = np.full(n_rows, None, dtype=object)

    def reject(self, bad: pd.Series | np.ndarray, reason: str) -> None:
        bad = np.asarray(bad, dtype=bool) & (self.reason == None)  # noqa: E711 (elementwise)
        self.reason[bad] = reason

    def finish(self, source: str, rows: pd.DataFrame, sha256: str, path: Path) -> Loaded:
        """Split into kept rows and rejects; refuse the file when too much of it is bad."""
        bad = self.reason != None  # noqa: E711
        rejects = pd.DataFrame({"row": np.flatnonzero(bad), "reason": self.reason[bad].astype(str)})
        kept = rows.loc[~bad].reset_index(drop=True)
        if len(rows) == 0 or bad.mean() > MAX_REJECTED_FRACTION:
            counts = rejects["reason"].value_counts().to_dict()
            raise DataError(
                f"{source}: {path} rejected: {int(bad.sum())} of {len(rows)} rows are bad ({counts})"
            )
        kept.insert(0, "source", source)
        return Loaded(source=source, rows=kept, rejects=rejects, sha256=sha256)
