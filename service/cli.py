"""The ``preflight`` command line. Heavy imports happen inside commands, so ``--help`` is instant."""

from __future__ import annotations

import json
import logging
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from preflight.data.errors import DataError, PreflightError, UsageError
from typer.core import TyperCommand, TyperGroup

if TYPE_CHECKING:
    from collections.abc import Iterator

    from preflight.data.catalogue import Catalogue, DeviceSpec
    from preflight.data.settings import Settings
    from preflight.models.task import Task
    from preflight.models.training import TrainResult
    from preflight.models.whatif import WhatIf
    from preflight.service.schemas import Workload
    from pydantic import BaseModel, ValidationError
    from rich.console import Console
    from rich.table import Table

    # TyperGroup.invoke takes the vendored click Context (typer.Context is a subclass of it), which
    # typer does not re-export publicly.
    from typer._click import Context as ClickContext
    from typer._click import HelpFormatter

#: Exit codes: 0 done, 1 a failure (bad data, an untrained task...), 2 a usage error (as click's own).
EXIT_FAILURE, EXIT_USAGE = 1, 2


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


Coverage = Annotated[float, typer.Option(callback=_fraction, help="interval coverage, in (0, 1)")]
#: numpy's legacy seeding takes 0 to 2**32 - 1.
Seed = Annotated[int, typer.Option(min=0, max=2**32 - 1)]
Count = Annotated[int, typer.Option(min=1)]


class _Commands(TyperGroup):
    """Every command runs inside this one handler of preflight's errors: ``TypeName: message`` on
    stderr, exit 2 for a usage error, 1 for any other."""

    def invoke(self, ctx: ClickContext) -> Any:
        try:
            return super().invoke(ctx)
        except PreflightError as error:
            typer.echo(f"{type(error).__name__}: {error}", err=True)
            raise typer.Exit(EXIT_USAGE if isinstance(error, UsageError) else EXIT_FAILURE) from error
        except Exception as error:  # pydantic is imported only when a command needs it
            from pydantic import ValidationError

            if not (isinstance(error, ValidationError) and error.title == "Settings"):
                raise
            problems = "; ".join(e["msg"].removeprefix("Value error, ") for e in error.errors())
            typer.echo(f"UsageError: settings (PREFLIGHT_*): {problems}", err=True)
            raise typer.Exit(EXIT_USAGE) from error


class _TaskCommand(TyperCommand):
    """A command on a task: its ``--help`` ends with every task, family and split (the task registry,
    about a second of imports, is read only then)."""

    def format_help(self, ctx: ClickContext, formatter: HelpFormatter) -> None:
        self.epilog = _tasks_help()
        super().format_help(ctx, formatter)


def _tasks_help() -> str:
    """Each task with its families and splits, the default first."""
    from preflight.models.task import all_tasks

    lines = ["Tasks, with their families and splits (the default first):"]
    for task in sorted(all_tasks(), key=lambda t: t.name):
        families = _default_first(task.families, task.default_family)
        splits = _default_first(tuple(task.groups), task.group_key)
        lines.append(f"{task.name}: families {families}; splits {splits}")
    return "\n".join(lines)


def _default_first(names: tuple[str, ...], default: str) -> str:
    return ", ".join([default, *(name for name in names if name != default)])


TaskName = Annotated[str, typer.Argument(help="the task (listed below)")]
JsonOut = Annotated[bool, typer.Option("--json", help="print one JSON object on stdout")]


app = typer.Typer(
    cls=_Commands,
    help="Performance estimates before anything runs.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
collect_app = typer.Typer(
    help="Own profilers: measure on this machine and append traces.", no_args_is_help=True
)
data_app = typer.Typer(help="Public sources: list them, load one into the table store.", no_args_is_help=True)
app.add_typer(collect_app, name="collect")
app.add_typer(data_app, name="data")


def _print_version(asked: bool) -> None:
    if asked:
        from importlib.metadata import version

        typer.echo(f"preflight {version('preflight')}")
        raise typer.Exit()


@app.callback()
def main_options(
    version: Annotated[
        bool, typer.Option("--version", callback=_print_version, is_eager=True, help="print the version")
    ] = False,
) -> None:
    """Performance estimates before anything runs."""


def _logging() -> None:
    """Log lines to stderr (stdout carries the answer)."""
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")


def _settings() -> Settings:
    """Logging, and the settings (``PREFLIGHT_*``)."""
    from preflight.data.settings import Settings

    _logging()
    return Settings()


def _setup() -> tuple[Settings, Catalogue]:
    """Logging, the settings, and the catalogue with user-registered devices."""
    from preflight.data.catalogue import Catalogue

    settings = _settings()
    return settings, Catalogue.load(settings.devices_file)


@app.command()
def serve(host: str = "127.0.0.1", port: Annotated[int, typer.Option(min=0, max=65535)] = 8000) -> None:
    """Serve the HTTP API; champions that are missing are trained from the data at hand meanwhile,
    GEMM first (each task answers once its own model loads; ``/readyz`` lists those still training)."""
    import uvicorn
    from preflight.service.app import create_app

    settings = _settings()
    uvicorn.run(create_app(settings, bootstrap=True), host=host, port=port)


@app.command(cls=_TaskCommand)
def train(
    task: TaskName,
    family: str | None = None,
    source: str | None = None,
    path: Annotated[
        Path | None, typer.Option(help="the source's file (default: under PREFLIGHT_DATASETS)")
    ] = None,
    promote: bool = False,
    seed: Seed = 0,
    json_out: JsonOut = False,
) -> None:
    """Train on the task's sources (or one), log to MLflow, register, and apply the champion gate."""
    import preflight
    from preflight.models import progress

    _logging()
    with progress.shown(_console(stderr=True)):
        result = preflight.train(task, family=family, source=source, path=path, promote=promote, seed=seed)
    if not json_out:
        _print_training(result)
        return
    info, promotion = result.promotion.info, result.promotion
    typer.echo(
        json.dumps(
            {
                "model": info.name,
                "version": info.version,
                "family": info.family,
                "champion": promotion.promoted,
                "reason": promotion.reason,
                "metrics": _finite(result.report["metrics"]),
            },
            indent=2,
        )
    )


def _print_training(result: TrainResult) -> None:
    """The registered version, the champion gate's verdict, and the cross-validated metrics."""
    from rich.table import Table

    info, promotion = result.promotion.info, result.promotion
    summary = Table.grid(padding=(0, 2))
    summary.add_row("model", f"{info.name} v{info.version} ({info.family})")
    summary.add_row("champion", f"{'yes' if promotion.promoted else 'no'}: {promotion.reason}")
    console = _console()
    console.print(summary)
    console.print(_metrics_table(_finite(result.report)))


@app.command(cls=_TaskCommand)
def evaluate(
    task: TaskName,
    source: Annotated[str, typer.Option(help="the source whose layout the files have")],
    family: str | None = None,
    path: Path | None = None,
    split: Annotated[str | None, typer.Option(help="group for grouped CV: shape, device, kernel...")] = None,
    train_size: Annotated[int | None, typer.Option(min=1, help="train on N groups, test on the rest")] = None,
    train: Path | None = None,
    test: Path | None = None,
    shots: Annotated[
        int, typer.Option(min=0, help="K measurements of each test device given to the model")
    ] = 0,
    seed: Seed = 0,
    coverage: Coverage = 0.9,
    json_out: JsonOut = False,
) -> None:
    """Grouped cross-validation on a source, or train on one file and test on another."""
    import preflight
    from preflight.models import evaluate as ev
    from preflight.models import progress
    from preflight.models.datasets import load_source
    from preflight.models.task import get_task

    settings, catalogue = _setup()
    spec = get_task(task)
    family = spec.family(family)
    _check_evaluate_options(train, test, path, train_size, shots)
    group = spec.split(split)
    with progress.shown(_console(stderr=True)):
        if train is not None and test is not None:
            train_rows = load_source(source, train, settings, catalogue, store=False)[0]
            test_rows = load_source(source, test, settings, catalogue, store=False)[0]
            outcome = ev.train_test(
                spec, train_rows, test_rows, catalogue, family, group, seed, shots, coverage
            )
            result = ev.report(spec, family, source, "train/test", outcome, by_group=shots > 0)
        else:
            evaluation = preflight.evaluate(
                task, family=family, split=group, source=source, path=path,
                train_size=train_size, seed=seed, coverage=coverage,
            )  # fmt: skip
            result = evaluation.report
    if json_out:
        typer.echo(json.dumps(_finite(result), allow_nan=False))
    else:
        _console().print(_metrics_table(_finite(result)))


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


def _check_evaluate_options(train, test, path, train_size, shots) -> None:
    if (train is None) != (test is None):
        raise UsageError("--train and --test go together")
    if train is not None and (path is not None or train_size is not None):
        raise UsageError("--path and --train-size belong to grouped CV, not to --train/--test")
    if train is None and shots:
        raise UsageError("--shots needs --train and --test (the test file's devices are the new ones)")


def _finite(value):
    """The report with infinities and NaN as null, so stdout is strict JSON."""
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, float) and value != value or value in (float("inf"), float("-inf")):
        return None
    return value


@app.command(cls=_TaskCommand)
def predict(
    task: TaskName,
    input: Annotated[Path, typer.Option("--input", help="JSON list of items, as in the HTTP API")],
    coverage: Coverage = 0.9,
    json_out: JsonOut = False,
) -> None:
    """Estimates from the champion for items in a JSON file (same items as the HTTP API)."""
    import preflight
    from preflight.models.task import get_task

    _logging()
    spec = get_task(task)
    items = _read_items(spec, input)
    model = preflight.load(task)
    records, info = model.records(items, coverage), model.info
    if json_out:
        typer.echo(json.dumps({"task": task, "model": vars(info), "predictions": records}, indent=2))
        return
    title = (
        f"{task}: {info.name} v{info.version} ({info.family}); each estimate: value [{coverage:.0%} interval]"
    )
    _console().print(_predictions_table(spec, items, records, title))


def _predictions_table(task: Task, items: list[BaseModel], records: list[dict], title: str) -> Table:
    """A row per item: the first inputs it was given, each target's value and interval, OOD and warnings."""
    from rich import box
    from rich.table import Table

    inputs = [item.model_dump(mode="json", include=item.model_fields_set) for item in items]
    shown = _input_columns(task, inputs)
    targets = [t for t in task.targets if any(t in record for record in records)]
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
    return table


def _input_columns(task: Task, inputs: list[dict], most: int = 5) -> list[str]:
    """The first ``most`` fields of the task's items that some item gives a scalar (a number, a name),
    the device first."""
    from preflight.models.whatif import DEVICE_FIELD

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


def _read_items(task: Task, path: Path) -> list:
    """Items from a JSON file (a list, or ``{"items": [...]}``), within the HTTP API's bounds (size,
    nesting, Unicode, the request budget) and validated as it validates them."""
    from preflight.models import budget
    from preflight.service.schemas import predict_request
    from pydantic import ValidationError

    raw = _input_json(path, "--input")
    items = raw.get("items") if isinstance(raw, dict) else raw
    if not isinstance(items, list):
        raise UsageError(f'--input {path}: not a JSON list of items, nor {{"items": [...]}}')
    budget.check(task, items)
    try:
        return predict_request(task).model_validate({"items": items}).items
    except ValidationError as exc:
        raise DataError(f"--input {path}: {exc.error_count()} invalid fields ({_errors(exc)})") from exc


def _input_json(path: Path, option: str) -> Any:
    """The JSON in an input file, read as the service reads a request body: at most
    ``PREFLIGHT_MAX_BODY_BYTES`` (``/dev/zero`` is refused, not read for ever), nested no deeper than
    Python parses, and Unicode text. A file that breaks one of these is a usage error."""
    from preflight.service.routing import lone_surrogate

    limit = _settings().max_body_bytes
    try:
        with path.open("rb") as file:
            payload = file.read(limit + 1)
    except OSError as exc:
        raise UsageError(f"{option} {path}: {exc.strerror or exc}") from exc
    if len(payload) > limit:
        raise UsageError(f"{option} {path}: larger than {limit:,} bytes (PREFLIGHT_MAX_BODY_BYTES)")
    try:
        value = json.loads(payload)
    except RecursionError:
        raise UsageError(f"{option} {path}: JSON nested too deeply") from None
    except ValueError as exc:  # not JSON, or not text
        raise UsageError(f"{option} {path}: not JSON ({exc})") from exc
    if (found := lone_surrogate(value)) is not None:
        raise UsageError(f"{option} {path}: {found[0]} holds a lone surrogate ({found[1]}), not Unicode text")
    return value


def _errors(exc: ValidationError) -> str:
    """The first validation errors, each as ``location: message``."""
    return "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:10])


@app.command(cls=_TaskCommand)
def report(
    task: TaskName,
    version: Annotated[
        str | None, typer.Option(help="the version to report on (default: the champion)")
    ] = None,
    out: Annotated[
        Path | None, typer.Option(help="folder for index.html and its PNGs (default: HOME/reports/TASK-vN)")
    ] = None,
    rows: Annotated[int, typer.Option(min=10, help="rows per source in the re-run evaluation")] = 1000,
    seed: Seed = 0,
) -> None:
    """Where a model version errs, beside the champion (or a challenger): its grouped evaluation re-run
    and drawn as one self-contained HTML page with the PNGs beside it, also logged as artifacts
    (report/) of the version's run. Prints the page's path."""
    import preflight
    from preflight.models import progress

    _logging()
    with progress.shown(_console(stderr=True)):
        page = preflight.report(task, version, out, max_rows=rows, seed=seed)
    typer.echo(str(page))


@app.command()
def whatif(
    workload: Annotated[
        Path, typer.Option("--workload", help='JSON {"task": ..., "items": [...]}: items without a device')
    ],
    devices: Annotated[
        str, typer.Option(help="all (every GPU and accelerator in the catalogue) or ID,ID,...")
    ] = "all",
    price: Annotated[
        list[str] | None, typer.Option(help="ID=USD_PER_HOUR, repeatable: gives the cost per million runs")
    ] = None,
    coverage: Coverage = 0.9,
    chart: Annotated[Path | None, typer.Option(help="write a bar chart of time per run (PNG)")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="print one JSON object on stdout")] = False,
) -> None:
    """Rank devices for one workload by time per run, with energy and cost, each with its interval."""
    import preflight
    from preflight.models import whatif as what_if
    from preflight.models.task import get_task
    from preflight.service.schemas import WhatIfResponse

    settings, catalogue = _setup()
    work = _read_workload(workload)
    task = get_task(work.task)
    candidates, prices = _whatif_devices(task, catalogue, devices, price or [])
    model = preflight.load(task.name)
    predictor, info = model.predictor, model.info
    result = what_if.compare(task, predictor, catalogue, work.items, candidates, prices, coverage)
    if chart is not None:
        _write_chart(result, chart)
    if json_out:
        typer.echo(WhatIfResponse.of(result, info).model_dump_json(indent=2))
    else:
        _print_ranking(result)


def _read_workload(path: Path) -> Workload:
    """The workload file as the HTTP API's ``workload``; a file that is not one is a usage error."""
    from preflight.service.schemas import Workload
    from pydantic import ValidationError

    try:
        return Workload.model_validate(_input_json(path, "--workload"))
    except ValidationError as exc:
        raise UsageError(f"--workload {path}: not a workload ({_errors(exc)})") from exc


def _whatif_devices(
    task: Task, catalogue: Catalogue, devices: str, prices: list[str]
) -> tuple[list[DeviceSpec], dict[str, float]]:
    """``--devices`` and ``--price`` resolved against the catalogue; a name it does not know is a usage
    error of the option (exit 2), with the close matches."""
    from preflight.data.errors import UnknownDevice
    from preflight.models import whatif as what_if

    names = None if devices.strip() == "all" else [d.strip() for d in devices.split(",") if d.strip()]
    try:
        candidates = what_if.candidates(task, catalogue, names)
        return candidates, what_if.prices_by_device(catalogue, candidates, _prices(prices))
    except UnknownDevice as exc:
        raise UsageError(str(exc)) from exc


def _prices(options: list[str]) -> dict[str, float]:
    """``ID=USD_PER_HOUR`` options as a mapping (checked by ``whatif.prices_by_device``)."""
    prices = {}
    for option in options:
        name, _, usd = option.rpartition("=")
        try:
            prices[name.strip()] = float(usd)
        except ValueError:
            raise UsageError(f"--price {option!r}: expected ID=USD_PER_HOUR") from None
    return prices


def _write_chart(result: WhatIf, path: Path) -> None:
    """The time-per-run chart as a PNG, drawn off-screen; a path that cannot be written is a usage error."""
    from preflight.models.plots import whatif_times

    try:
        whatif_times(result).savefig(path, dpi=150, format="png")
    except OSError as exc:
        raise UsageError(f"--chart {path}: {exc.strerror or exc}") from exc
    typer.echo(f"chart: {path}", err=True)


def _print_ranking(result: WhatIf) -> None:
    """The ranking as a table on stdout (intervals of energy and the warnings are in ``--json``)."""
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
    console = _console()
    console.print(table)
    for skipped in result.skipped:
        console.print(f"skipped {skipped.device}: {skipped.reason}", highlight=False)


def _bounds(low: float | None, high: float | None) -> str:
    """``low–high``; an unbounded side as infinity."""
    return f"{_number(low, '-∞')}–{_number(high, '∞')}"


def _number(value: float | None, missing: str = "-") -> str:
    """Three significant digits, whole numbers from 1,000 up."""
    if value is None:
        return missing
    return f"{value:,.0f}" if abs(value) >= 1e3 else f"{value:.3g}"


def _console(stderr: bool = False) -> Console:
    """A console for tables (stdout) or progress (stderr); a pipe gets whole rows, and text from users
    (device names, warnings) is never read as markup."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    return Console(stderr=stderr, width=None if stream.isatty() else 160, markup=False)


@collect_app.command("gemm")
def collect_gemm(
    device: Annotated[str, typer.Option(help="cpu, cuda or cuda:N")] = "cpu",
    out: Annotated[Path | None, typer.Option(help="CSV to append to")] = None,
    points: Count = 300,
    seed: Seed = 0,
    threads: Annotated[int | None, typer.Option(min=1)] = None,
    repeats: Count = 7,
    max_seconds_per_point: Annotated[float, typer.Option(callback=_positive)] = 2.0,
    power: Annotated[bool, typer.Option(help="measure power over a settled 1 s window per point")] = True,
) -> None:
    """Sweep GEMM shapes/dtypes/layouts on this machine: median runtime, spread, power (CUDA)."""
    from preflight.data.collect.gemm import collect_gemm as run

    settings = _settings()
    target = out or settings.home / "collect" / "local_gemm.csv"
    summary = run(
        device, target, points=points, seed=seed, threads=threads, repeats=repeats,
        max_seconds_per_point=max_seconds_per_point, power=power,
    )  # fmt: skip
    typer.echo(json.dumps({k: str(v) for k, v in vars(summary).items()}))


@collect_app.command("curves")
def collect_curves(
    out: Annotated[Path | None, typer.Option(help="CSV to append to")] = None,
    runs: Count = 300,
    epochs: Count = 20,
    seed: Seed = 0,
) -> None:
    """Train NAS-Bench-201 cells on scikit-learn's digits on CPU: a learning curve per run (resumable)."""
    from preflight.data.collect.curves import collect_curves as run

    settings = _settings()
    target = out or settings.home / "collect" / "local_curves.csv"
    summary = run(target, runs=runs, epochs=epochs, seed=seed)
    typer.echo(json.dumps({k: str(v) for k, v in vars(summary).items()}))


@collect_app.command("interference")
def collect_interference(
    out: Annotated[Path | None, typer.Option(help="CSV to append to")] = None,
    seconds: Annotated[float, typer.Option(help="wall time of each run")] = 3.0,
    seed: Seed = 0,
    max_minutes: Annotated[float, typer.Option(help="stop after the run in progress past this")] = 10.0,
    backend: Annotated[str, typer.Option(help="own or stress-ng (on PATH)")] = "own",
    workloads: Annotated[str, typer.Option(help="comma-separated")] = "compute,memory,cache,io",
) -> None:
    """Micro-workloads alone and beside CPU, memory-bandwidth, LLC and disk stressors (resumable)."""
    from preflight.data.collect.interference import collect_interference as run

    settings = _settings()
    target = out or settings.home / "collect" / "local_interference.csv"
    chosen = [name.strip() for name in workloads.split(",") if name.strip()]
    summary = run(
        target, seconds=seconds, seed=seed, max_minutes=max_minutes, backend=backend, workloads=chosen
    )
    typer.echo(json.dumps({k: str(v) for k, v in vars(summary).items()}))


@app.command()
def devices(
    query: Annotated[
        str | None, typer.Argument(help="a name as nvidia-smi, torch or lscpu prints it: the device it means")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="a JSON list of spec sheets")] = False,
) -> None:
    """The device catalogue (shipped spec sheets and the devices registered here) as a table; with
    QUERY, the one device it resolves to (an unknown name lists close matches)."""
    import preflight

    _logging()
    found = preflight.devices(query)
    if as_json:
        typer.echo(json.dumps([spec.model_dump(mode="json", exclude_none=True) for spec in found], indent=1))
        return
    _print_devices(found)


def _print_devices(found: list[DeviceSpec]) -> None:
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
    _console().print(table)


@data_app.command("list")
def data_list(
    as_json: Annotated[bool, typer.Option("--json", help="one JSON object per source")] = False,
) -> None:
    """Every source, where its file is found, and what the table store holds of it."""
    from preflight.data import sources
    from preflight.data.store import TableStore

    settings = _settings()
    stored = TableStore(settings.tables_dir).manifest()
    rows = [
        {
            "source": name,
            "path": str(found) if (found := sources.default_path(name, settings.datasets)) else None,
            "stored_rows": stored.get(name, {}).get("rows"),
            "rejected": stored.get(name, {}).get("rejected"),
        }
        for name in sources.LOADERS
    ]
    if as_json:
        for row in rows:
            typer.echo(json.dumps(row))
        return
    _print_sources(rows)


def _print_sources(rows: list[dict]) -> None:
    from rich.table import Table

    table = Table("source", "file found", "rows stored", "rejected")
    table.columns[0].no_wrap = True
    for row in rows:
        stored = "-" if row["stored_rows"] is None else f"{row['stored_rows']:,}"
        rejected = "-" if row["rejected"] is None else f"{row['rejected']:,}"
        table.add_row(row["source"], row["path"] or "not found", stored, rejected)
    _console().print(table)


@data_app.command("load")
def data_load(
    source: str, path: Annotated[Path, typer.Option(help="the file in the source's published layout")]
) -> None:
    """Validate a file into the table store; prints rows kept and rejected with reasons."""
    from preflight.data.store import TableStore
    from preflight.models.datasets import load_source

    settings, catalogue = _setup()
    load_source(source, path, settings, catalogue)
    typer.echo(json.dumps(TableStore(settings.tables_dir).manifest()[source], indent=2))


def main() -> None:
    app()


if __name__ == "__main__":
    main()
