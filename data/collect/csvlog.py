"""An append-only CSV that survives interruption: the own profilers' output format.

Each record (one line, or several lines that belong together such as one training run) is
appended with a single ``write`` on an ``O_APPEND`` descriptor and then fsynced, so an interrupted
collector leaves complete records plus at most one torn last line, which ``open_log`` repairs.
``open_log`` and ``check_same`` refuse, as usage errors, a file that is not the collector's own or
that holds rows collected with other settings.
"""

from __future__ import annotations

import csv
import io
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from preflight.data.errors import UsageError


def open_log(out: Path, columns: Sequence[str], source: str) -> list[dict[str, str]]:
    """Check that ``out`` is new, empty or a ``source`` log; repair a torn last line, give a new file
    its header, and return the rows already there."""
    try:
        return _open_log(out, columns, source)
    except OSError as error:
        where = f" ({error.filename})" if error.filename and Path(error.filename) != out else ""
        raise UsageError(f"cannot write {out}: {error.strerror or error}{where}") from error


def _open_log(out: Path, columns: Sequence[str], source: str) -> list[dict[str, str]]:
    header = _csv([columns])
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "a+b") as fh:  # creates a new file; fails here when out cannot be written
        fh.seek(0)
        data = fh.read()
        if not header.startswith(data[: len(header)]):  # a torn header passes
            raise _foreign(out, source, "its first line is not the collector's header")
        kept = data[: data.rfind(b"\n") + 1]
        rows = _rows(out, kept, source)  # before the repair: a refused file is left as it was
        if len(kept) < len(data):
            fh.truncate(len(kept))
        if not kept:
            append(fh.fileno(), [columns])
    return rows


def _rows(out: Path, data: bytes, source: str) -> list[dict[str, str]]:
    """The rows below the header; a row that is not text or has too few or too many cells is refused."""
    try:
        rows = list(csv.DictReader(io.StringIO(data.decode())))
    except (UnicodeDecodeError, csv.Error) as error:
        raise _foreign(out, source, str(error)) from error
    for number, row in enumerate(rows, start=1):
        if None in row or None in row.values():
            raise _foreign(out, source, f"row {number} does not have one cell per column")
    return rows


def _foreign(out: Path, source: str, why: str) -> UsageError:
    return UsageError(f"{out} is not a {source} CSV ({why}); collect into another file")


def positive_number(cell: str) -> bool:
    """Whether a cell holds a measured quantity, a finite positive number (a row without one is a point
    to measure again on resuming: its loader rejects it)."""
    try:
        return math.isfinite(value := float(cell)) and value > 0
    except ValueError:
        return False


def check_same(out: Path, settings: Mapping[str, tuple[object, Iterable[str]]]) -> None:
    """Refuse ``out`` when it holds rows collected with other settings than wanted: ``settings`` maps
    each (``seed``, ``device``...) to the wanted value and the values the file holds."""
    for what, (wanted, held) in settings.items():
        others = sorted(set(held) - {str(wanted)})
        if others:
            raise UsageError(
                f"{out} holds rows of {what} {', '.join(others)}, not {wanted}; collect into another file"
            )


def append(fd: int, rows: Iterable[Sequence[object]]) -> None:
    """Append complete rows (their cells written and quoted as the csv module does) with a single
    write, then fsync."""
    payload = _csv(rows)
    if os.write(fd, payload) != len(payload):
        raise OSError(f"short write of {len(payload)} bytes")
    os.fsync(fd)


def _csv(rows: Iterable[Sequence[object]]) -> bytes:
    """Rows as the log's lines: cells written and quoted by the csv module, each line ending in a newline."""
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(rows)
    return buffer.getvalue().encode()
