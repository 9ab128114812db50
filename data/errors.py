"""Every error a caller of preflight should handle, in one tree.

PreflightError
├── UsageError         an option or argument that cannot work (a family the task lacks,
│                      an unknown split, --train without --test)           → 400 / CLI exit 2
├── DataError          a source file that cannot be read or validated      → 422 / CLI exit 1
│   ├── OverBudget     a request that asks for more work than one may: names
│   │                  the item where the budget ran out, and by how much  → 422
│   └── InvalidFields  a request whose fields each validate but that cannot be
│                      answered as given: each error names its field       → 422 (as pydantic's)
├── UnknownTask        lists the known task names                          → 404 / CLI exit 2
├── UnknownDevice      lists close matches from the catalogue, and the
│   │                  items of a batch that name it                       → 404 / CLI exit 1
│   └── AmbiguousDevice  a name several devices fit (``h100``): lists them   → 404 / CLI exit 1
├── DeviceConflict     a registration claims a name another device owns    → 409
├── Cancelled          work whose request passed its deadline, stopped      → (the 504 is sent)
└── ModelStateError    a model that cannot answer as asked (no scores
    │                  for a target, too few groups to calibrate)          → 409 / CLI exit 1
    ├── NotTrained     says which `preflight train ...` to run             → 503
    ├── NotReadyYet    the service is still loading or training the task's
    │                  first model: says which, and when to retry          → 503 + Retry-After
    └── ModelUnavailable  versions exist but none loads (damaged artifacts,
                       an unreadable registry): says so, names no path   → 503

The service maps the tree to HTTP in one handler; the CLI prints ``TypeName: message`` once, in
one wrapper, and exits 2 for usage errors, 1 for the rest.
"""

from __future__ import annotations


class PreflightError(Exception):
    """Base of every error preflight raises on purpose."""


class UsageError(PreflightError):
    """An option, argument or combination of them that cannot work."""


class DataError(PreflightError):
    """A source file is missing, malformed, or has no usable rows."""


class OverBudget(DataError):
    """A request whose items together cost more than its budget (counted from their fields before any
    work): ``loc`` is where the budget ran out (``["body", "items", 12]``)."""

    def __init__(self, message: str, loc: list[str | int]) -> None:
        super().__init__(message)
        self.loc = loc


class InvalidFields(DataError):
    """A request that cannot be answered as given though each field validated on its own (a design
    its kernel's graph cannot take, a measurement against the roofline): ``errors`` as pydantic's,
    each ``loc`` inside the request's body (``("measurements", 3, "m")``)."""

    def __init__(self, errors: list[dict]) -> None:
        self.errors = errors
        where = (f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in errors[:5])
        super().__init__(f"{len(errors)} problem(s): {'; '.join(where)}")

    def under(self, field: str) -> InvalidFields:
        """The same errors, located under the body's ``field`` instead of their own first part (the
        designs of a registration sent as a request's ``synthesized``)."""
        return InvalidFields([{**e, "loc": (field, *e["loc"][1:])} for e in self.errors])


class Cancelled(PreflightError):
    """Work whose caller stopped waiting (its request's deadline passed): stopped at a check."""


class UnknownTask(UsageError):
    """A task name that the registry does not hold."""

    def __init__(self, name: str, known: list[str]) -> None:
        self.name, self.known = name, known
        super().__init__(f"unknown task {name!r}; known tasks: {', '.join(known)}")


class UnknownVersion(UsageError):
    """A model version number that a task's registered model does not hold."""

    def __init__(self, task: str, version: str, known: list[str]) -> None:
        self.task, self.version, self.known = task, version, known
        super().__init__(f"task {task!r} has no version {version!r}; its versions: {', '.join(known)}")


class UnknownDevice(PreflightError):
    """A device name that the catalogue cannot resolve."""

    def __init__(self, name: str, close: list[str], items: list[int] | None = None) -> None:
        self.name, self.close, self.items = name, close, items or []
        super().__init__(self._message())

    def _message(self) -> str:
        hint = (
            f"; close matches: {', '.join(self.close)}" if self.close else "; GET /v1/devices lists them all"
        )
        return f"unknown device {self._named()}{hint}"

    def _named(self) -> str:
        """The name, cut (never echo a megabyte back), and the items that carry it."""
        name = self.name if len(self.name) <= 200 else self.name[:200] + "..."
        where = f" (items {', '.join(map(str, self.items[:20]))})" if self.items else ""
        return f"{name!r}{where}"

    def at(self, items: list[int]) -> UnknownDevice:
        """The same error, naming the items (by position in the request) that carry the name."""
        return type(self)(self.name, self.close, items)


class AmbiguousDevice(UnknownDevice):
    """A name that several devices fit (``h100``: the SXM5 and the PCIe card): ``close`` lists them."""

    def _message(self) -> str:
        fitting = "; ".join(self.close)
        return f"device {self._named()} fits {len(self.close)} devices: {fitting}; name one of them"


class DeviceConflict(PreflightError):
    """A device registration at odds with the devices as they are: an id, name or alias another device
    owns, or a repeat (the same Idempotency-Key) of a registration whose device was deleted since."""


class ModelStateError(PreflightError):
    """A trained model that cannot answer as asked, or data too thin to calibrate one."""


class NotTrained(ModelStateError):
    """A task has no champion model yet."""

    def __init__(self, task: str, hint: str = "") -> None:
        self.task = task
        super().__init__(f"task {task!r} has no trained model; run `preflight train {task}`{hint}")


class NotReadyYet(ModelStateError):
    """A task still loading or training its first model at start-up; ``retry_after_s``: when to ask again."""

    def __init__(self, task: str, doing: str, retry_after_s: int) -> None:
        self.task, self.retry_after_s = task, retry_after_s
        super().__init__(f"task {task!r} is not ready yet: {doing}; try again in {retry_after_s} s")


class ModelUnavailable(ModelStateError):
    """A task has versions, but none could be loaded; the log has the details."""

    def __init__(self, task: str, why: str) -> None:
        self.task, self.why = task, why
        super().__init__(f"task {task!r} has no model that loads: {why}; see the service log")
