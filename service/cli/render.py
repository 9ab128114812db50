"""What the commands show: rich tables on stdout (progress bars on stderr), reports as strict JSON, and
the what-if chart. A pipe gets whole rows, and text from users (device names, warnings) is never read
as markup."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from preflight.data.errors import UsageError

if TYPE_CHECKING:
    from collections.abc import Iterator

    from preflight import Predictions, SourceInfo
    from preflight.data.catalogue import DeviceSpec
    from preflight.models.core.task import Task
    from preflight.models.core.training import TrainResult
    from preflight.models.tools.whatif import WhatIf
    from rich.console import Console
    from rich.table import Table


def console(stderr: bool = False) -> Console:
    """A console for tables (stdout) or progress (stderr)."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    return Console(stderr=stderr, width=None if stream.isatty() else 160, markup=False)


def finite(value: Any) -> Any:
    """A report with infinities and NaN as null, so stdout is strict JSON."""
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, float) and value != value or value in (float("inf"), float("-inf")):
        return None
    return value


def training(result: TrainResult) -> None:
    """The registered version, the champion gate's verdict, and the cross-validated metrics."""
    from rich.table import Table

    info, promotion = result.promotion.info, result.promotion
    summary = Table.grid(padding=(0, 2))
    summary.add_row("model", f"{info.name} v{info.version} ({info.family})")
    summary.add_row("champion", f"{'yes' if promotion.promoted else 'no'}: {promotion.reason}")
    shown = console()
    shown.print(summary)
    shown.print(_metrics_table(finite(result.report)))


def metrics(report: dict) -> None:
    """An evaluation's summary (``Evaluation.summary``) as a table."""
    console().print(_metrics_table(report))


def _metrics_table(report: dict) -> Table:
    """A report's metrics: a row per target (per target and device with few shots), each cell the
    model's value over the baseline's."""
    from rich import box
    from rich.table import Table

    baseline = report["baseline"]
    rows = list(_metric_rows(report["metrics"], baseline["metrics"]))
    names = list(dict.fromkeys(k for _, model, base in rows for k in [*model, *base] if k != "n"))
    table = Table(
        title=f"{report['task']} on {report['source']}: split {report['split']}, "
        f"{report['n_train']:,} train / {report['n_test']:,} test rows",
        box=box.SIMPLE_HEAD,
        show_lines=True,
    )
    table.add_column("target", no_wrap=True)
    table.add_column("n", justify="right")
    table.add_column("model")
    for name in names:
        table.add_column(name, justify="right")
    models = f"{report['family']}\n{baseline['name']}"
    for label, model, base in rows:
        cells = (f"{_number(model.get(k))}\n{_number(base.get(k))}" for k in names)
        table.add_row(label, _number(model.get("n")), models, *cells)
    return table


def _metric_rows(model: dict, baseline: dict) -> Iterator[tuple[str, dict, dict]]:
    """``(label, model's metrics, baseline's)`` per target, or per target and group where a report
    holds metrics by group (few shots: by device, with their ``mean``)."""
    for target, metrics in model.items():
        if all(isinstance(value, dict) for value in metrics.values()):
            for group, by_group in metrics.items():
                yield f"{target} {group}", by_group, baseline.get(target, {}).get(group, {})
        else:
            yield target, metrics, baseline.get(target, {})


def predictions(task: str, found: Predictions, coverage: float) -> None:
    """A row per item: the first inputs it was given, each target's value and interval, OOD and warnings."""
    from rich import box
    from rich.table import Table

    info, records = found.model, found.records
    title = (
        f"{task}: {info.name} v{info.version} ({info.family}); each estimate: value [{coverage:.0%} interval]"
    )
    inputs = [item.model_dump(mode="json", include=item.model_fields_set) for item in found.items]
    shown = _input_columns(found.task, inputs)
    targets = [t for t in found.task.targets if any(t in record for record in records)]
    table = Table("#", *shown, box=box.SIMPLE_HEAD, title=title)
    for target in targets:
        table.add_column(target, justify="right")
    table.add_column("OOD")
    table.add_column("warnings", min_width=24, overflow="fold")
    for i, (given, record) in enumerate(zip(inputs, records)):
        values = (_cut(str(given.get(name, ""))) for name in shown)
        estimates = (_estimate(record[t]) for t in targets)
        flag = "yes" if record["ood"] else ""
        table.add_row(str(i), *values, *estimates, flag, ", ".join(record["warnings"]))
    console().print(table)


def _input_columns(task: Task, inputs: list[dict], most: int = 5) -> list[str]:
    """The first ``most`` fields of the task's items that some item gives a scalar (a number, a name),
    the device first."""
    from preflight.models.tools.whatif import DEVICE_FIELD

    scalar = (str, int, float)
    given = [name for name in task.item.model_fields if any(isinstance(i.get(name), scalar) for i in inputs)]
    return sorted(given, key=lambda name: name != DEVICE_FIELD)[:most]


def _estimate(estimate: dict) -> str:
    """``value [low–high]``; a target without an estimate as ``-``."""
    if estimate["value"] is None:
        return "-"
    return f"{_number(estimate['value'])} [{_bounds(estimate['low'], estimate['high'])}]"


def _cut(text: str, most: int = 24) -> str:
    return text if len(text) <= most else text[: most - 1] + "…"


def ranking(result: WhatIf) -> None:
    """The what-if ranking as a table (intervals of energy and the warnings are in ``--json``)."""
    from rich import box
    from rich.table import Table

    table = Table(title=f"{result.task}: {result.items} items per run, ranked by time", box=box.SIMPLE_HEAD)
    table.add_column("#", justify="right")
    table.add_column("device")
    for column in ("ms/run", f"{result.coverage:.0%} interval", "runs/s", "J/run", "USD/1M runs", "OOD"):
        table.add_column(column, justify="right", no_wrap=True)
    for d in result.devices:
        energy, cost = (e.value if e else None for e in (d.energy_j, d.cost_per_million_runs_usd))
        table.add_row(
            str(d.rank.time), d.name, _number(d.time_ms.value), _bounds(d.time_ms.low, d.time_ms.high),
            _number(d.runs_per_s),
            _number(energy), _number(cost), "yes" if d.ood else "",
        )  # fmt: skip
    shown = console()
    shown.print(table)
    for skipped in result.skipped:
        shown.print(f"skipped {skipped.device}: {skipped.reason}", highlight=False)


def chart(result: WhatIf, path: Path) -> None:
    """The time-per-run chart as a PNG, drawn off-screen; a path that cannot be written is a usage error."""
    from preflight.models.presentation.plots import whatif_times

    try:
        whatif_times(result).savefig(path, dpi=150, format="png")
    except OSError as exc:
        raise UsageError(f"--chart {path}: {exc.strerror or exc}") from exc
    typer.echo(f"chart: {path}", err=True)


def devices(found: list[DeviceSpec]) -> None:
    """Spec sheets as a table: peaks, memory bandwidth, TDP."""
    from rich.table import Table

    table = Table("id", "name", "kind", "fp32 TFLOP/s", "fp16 TFLOP/s", "memory GB/s", "TDP W")
    table.columns[0].no_wrap = table.columns[1].no_wrap = True
    for spec in found:
        peaks = {str(dtype): value for dtype, value in spec.peak_tflops.items()}
        table.add_row(
            spec.id,
            spec.name,
            spec.kind,
            _number(peaks.get("fp32")),
            _number(peaks.get("fp16")),
            _number(spec.memory_bandwidth_gbs),
            _number(spec.tdp_w),
        )
    console().print(table)


def sources(found: list[SourceInfo]) -> None:
    """Sources as a table: the file found, rows stored and rejected."""
    from rich.table import Table

    table = Table("source", "file found", "rows stored", "rejected")
    table.columns[0].no_wrap = True
    for info in found:
        stored = "-" if info.stored_rows is None else f"{info.stored_rows:,}"
        rejected = "-" if info.rejected is None else f"{info.rejected:,}"
        table.add_row(info.source, str(info.path) if info.path else "not found", stored, rejected)
    console().print(table)


def _bounds(low: float | None, high: float | None) -> str:
    """``low–high``; an unbounded side as infinity."""
    return f"{_number(low, '-∞')}–{_number(high, '∞')}"


def _number(value: float | None, missing: str = "-") -> str:
    """Three significant digits, whole numbers from 1,000 up."""
    if value is None:
        return missing
    return f"{value:,.0f}" if abs(value) >= 1e3 else f"{value:.3g}"
