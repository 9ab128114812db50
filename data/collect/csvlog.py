"""An append-only CSV that survives interruption: the own profilers' output format.

Each record (one line, or several lines that belong together such as one training run) is
appended with a single ``write`` on an ``O_APPEND`` descriptor and then fsynced, so an interrupted
collector leaves complete records plus at most one torn last line, which ``open_log`` repairs.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Sequence
from pathlib import Path

from preflight.data.errors import PreflightError


def open_log(out: Path, columns: Sequence[str], source: str) -> list[dict[str, str]]:
    """Repair a torn last line, give a new file its header, and return the rows already there."""
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.exists():
        data = out.read_bytes()
        if not data.endswith(b"\n"):
            os.truncate(out, data.rfind(b"\n") + 1)
    if not out.exists() or out.stat().st_size == 0:
        fd = os.open(out, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            append(fd, [",".join(columns)])
        finally:
            os.close(fd)
        return []
    with open(out, newline="") as fh:
        reader = csv.DictReader(fh)
        if reader.fieldnames != list(columns):
            raise PreflightError(f"{out} is not a {source} file: its columns are {reader.fieldnames}")
        return list(reader)


def append(fd: int, lines: Sequence[str]) -> None:
    """Append complete lines with a single write, then fsync."""
    payload = "".join(line + "\n" for line in lines).encode()
    if os.write(fd, payload) != len(payload):
        raise OSError(f"short write of {len(payload)} bytes")
    os.fsync(fd)
