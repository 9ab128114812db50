"""Every error a caller of preflight should handle, in one tree.

PreflightError
├── DataError          a source file that cannot be read or validated      → 422 / CLI exit 1
├── UnknownTask        lists the known task names                          → 404
├── UnknownDevice      lists close matches from the catalogue              → 404
├── DeviceConflict     a registration claims a name another device owns    → 409
└── NotTrained         says which `preflight train ...` to run             → 503

The service maps the tree to HTTP in one handler; the CLI prints ``TypeName: message``.
"""

from __future__ import annotations


class PreflightError(Exception):
    """Base of every error preflight raises on purpose."""


class DataError(PreflightError):
    """A source file is missing, malformed, or has no usable rows."""


class UnknownTask(PreflightError):
    """A task name that the registry does not hold."""

    def __init__(self, name: str, known: list[str]) -> None:
        self.name, self.known = name, known
        super().__init__(f"unknown task {name!r}; known tasks: {', '.join(known)}")


class UnknownDevice(PreflightError):
    """A device name that the catalogue cannot resolve."""

    def __init__(self, name: str, close: list[str]) -> None:
        self.name, self.close = name, close
        hint = f"; close matches: {', '.join(close)}" if close else "; GET /v1/devices lists them all"
        super().__init__(f"unknown device {name!r}{hint}")


class DeviceConflict(PreflightError):
    """A device registration whose id, name or alias already belongs to another device."""


class NotTrained(PreflightError):
    """A task has no champion model yet."""

    def __init__(self, task: str) -> None:
        self.task = task
        super().__init__(f"task {task!r} has no trained model; run `preflight train {task}`")
