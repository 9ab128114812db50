"""What the options take: checked values, and the JSON files they name, read as the service reads a
request body. A value or a file that cannot work is a usage error naming the option."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import preflight
import typer
from preflight.data.errors import UsageError

if TYPE_CHECKING:
    from preflight.service.schemas import Workload
    from pydantic import ValidationError


def _fraction(value: float) -> float:
    """An interval coverage: strictly between 0 and 1."""
    if not 0 < value < 1:  # NaN too
        raise typer.BadParameter(f"must lie in (0, 1), not {value}")
    return value


def _positive(value: float) -> float:
    """A finite number above 0."""
    if not (math.isfinite(value) and value > 0):
        raise typer.BadParameter(f"must be a positive number, not {value}")
    return value


def _all_or_count(value: str) -> str:
    """``all``, or a whole number above 0."""
    if value != "all" and not (value.isdigit() and int(value) > 0):
        raise typer.BadParameter(f"must be 'all' or a whole number above 0, not {value!r}")
    return value


def how_many(value: str) -> int | None:
    """An ``all|N`` option's count: None for all."""
    return None if value == "all" else int(value)


Coverage = Annotated[float, typer.Option(callback=_fraction, help="interval coverage, in (0, 1)")]
Positive = Annotated[float, typer.Option(callback=_positive)]
#: numpy's legacy seeding takes 0 to 2**32 - 1.
Seed = Annotated[int, typer.Option(min=0, max=2**32 - 1)]
Count = Annotated[int, typer.Option(min=1)]
TaskName = Annotated[str, typer.Argument(help="the task (listed below)")]
JsonOut = Annotated[bool, typer.Option("--json", help="print one JSON object on stdout")]
RayAddress = Annotated[
    str | None,
    typer.Option(
        "--ray",
        help="fan the work out to a Ray cluster (as RAY_ADDRESS: auto, ray://HOST:10001, or local for one "
        "on this machine); the answers are the serial run's",
    ),
]
AllOrCount = Annotated[str, typer.Option(callback=_all_or_count, help="with --ray: all, or N")]


def use_ray(address: str | None) -> None:
    """``--ray``: the cluster this command's folds fan out to, as Ray's own ``RAY_ADDRESS`` says it."""
    if address:
        os.environ["RAY_ADDRESS"] = address


def items(path: Path) -> list:
    """The items of an ``--input`` file: a JSON list, or ``{"items": [...]}``."""
    raw = _json(path, "--input")
    found = raw.get("items") if isinstance(raw, dict) else raw
    if not isinstance(found, list):
        raise UsageError(f'--input {path}: not a JSON list of items, nor {{"items": [...]}}')
    return found


def request(path: Path) -> dict:
    """An ``--input`` file holding one request body, a JSON object as the HTTP route takes it."""
    raw = _json(path, "--input")
    if not isinstance(raw, dict):
        raise UsageError(f"--input {path}: not a JSON object (one request, as its HTTP route takes it)")
    return raw


def workload(path: Path) -> Workload:
    """The ``--workload`` file as the HTTP API's ``workload``."""
    from preflight.service.schemas import Workload
    from pydantic import ValidationError

    try:
        return Workload.model_validate(_json(path, "--workload"))
    except ValidationError as exc:
        raise UsageError(f"--workload {path}: not a workload ({errors(exc)})") from exc


def devices(value: str) -> list[str] | None:
    """``--devices``: None for ``all``, else the comma-separated names."""
    return None if value.strip() == "all" else [d.strip() for d in value.split(",") if d.strip()]


def prices(options: list[str]) -> dict[str, float]:
    """``--price ID=USD_PER_HOUR`` options as a mapping (checked by ``preflight.whatif``)."""
    found = {}
    for option in options:
        name, _, usd = option.rpartition("=")
        try:
            found[name.strip()] = float(usd)
        except ValueError:
            raise UsageError(f"--price {option!r}: expected ID=USD_PER_HOUR") from None
    return found


def errors(exc: ValidationError) -> str:
    """The first validation errors, each as ``location: message``."""
    return "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:10])


def designs(path: Path) -> list:
    """The designs file of ``register-designs``: a JSON list, or JSON lines (one design a line)."""
    payload = _payload(path, "DESIGNS")
    if payload.lstrip().startswith(b"["):
        found = _parsed(payload, str(path))
    else:
        lines = [(i, line) for i, line in enumerate(payload.splitlines(), 1) if line.strip()]
        found = [_parsed(line, f"{path} line {i}") for i, line in lines]
    if not found:
        raise UsageError(f"{path}: no designs")
    return found


def _json(path: Path, option: str) -> Any:
    """The JSON in an input file, read as the service reads a request body (``_payload``, ``_parsed``)."""
    return _parsed(_payload(path, option), f"{option} {path}")


def _payload(path: Path, option: str) -> bytes:
    """An input file's bytes: at most ``PREFLIGHT_MAX_BODY_BYTES`` (``/dev/zero`` is refused, not read
    for ever)."""
    limit = preflight.settings().max_body_bytes
    try:
        with path.open("rb") as file:
            payload = file.read(limit + 1)
    except OSError as exc:
        raise UsageError(f"{option} {path}: {exc.strerror or exc}") from exc
    if len(payload) > limit:
        raise UsageError(f"{option} {path}: larger than {limit:,} bytes (PREFLIGHT_MAX_BODY_BYTES)")
    return payload


def _parsed(payload: bytes, where: str) -> Any:
    """JSON nested no deeper than Python parses, and Unicode text; errors say ``where`` it was read."""
    from preflight.service.routing import lone_surrogate

    try:
        value = json.loads(payload)
    except RecursionError:
        raise UsageError(f"{where}: JSON nested too deeply") from None
    except ValueError as exc:  # not JSON, or not text
        raise UsageError(f"{where}: not JSON ({exc})") from exc
    if (found := lone_surrogate(value)) is not None:
        raise UsageError(f"{where}: {found[0]} holds a lone surrogate ({found[1]}), not Unicode text")
    return value
