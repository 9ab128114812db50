"""The ``preflight`` command line: each command parses its options, calls the Python API
(``import preflight``) once, and shows the answer (``render``). Heavy imports happen inside commands,
so ``--help`` is instant."""

from __future__ import annotations

import json
import logging
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import preflight
import typer
from preflight.data.errors import DataError, PreflightError, UnknownDevice, UsageError
from preflight.data.store import output_file
from preflight.service.cli import options, render
from preflight.service.cli.options import Count, Coverage, JsonOut, Positive, RayAddress, Seed, TaskName
from typer.core import TyperCommand, TyperGroup

if TYPE_CHECKING:
    # TyperGroup.invoke takes the vendored click Context (typer.Context is a subclass of it), which
    # typer does not re-export publicly.
    from typer._click import Context as ClickContext
    from typer._click import HelpFormatter

#: Exit codes: 0 done, 1 a failure (bad data, an untrained task...), 2 a usage error (as click's own).
EXIT_FAILURE, EXIT_USAGE = 1, 2


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


class _ActionCommand(TyperCommand):
    """``ask``: its ``--help`` ends with every action, its task and its HTTP route."""

    def format_help(self, ctx: ClickContext, formatter: HelpFormatter) -> None:
        lines = [
            f"{name} ({task.name}): POST {path}"
            for task in preflight.tasks()
            for name, path in task.actions.items()
        ]
        self.epilog = "Actions:\n" + "\n".join(sorted(lines))
        super().format_help(ctx, formatter)


def _tasks_help() -> str:
    """Each task with its families and splits, the default first."""
    lines = ["Tasks, with their families and splits (the default first):"]
    for task in sorted(preflight.tasks(), key=lambda t: t.name):
        families = _default_first(task.families, task.default_family)
        splits = _default_first(task.splits, task.default_split)
        lines.append(f"{task.name}: families {families}; splits {splits}")
    return "\n".join(lines)


def _default_first(names: tuple[str, ...], default: str) -> str:
    return ", ".join([default, *(name for name in names if name != default)])


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
        typer.echo(f"preflight {preflight.__version__}")
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


@app.command()
def serve(host: str = "127.0.0.1", port: Annotated[int, typer.Option(min=0, max=65535)] = 8000) -> None:
    """Serve the HTTP API; champions that are missing are trained from the data at hand meanwhile,
    GEMM first (each task answers once its own model loads; ``/readyz`` lists those still training)."""
    _logging()
    preflight.serve(host, port)


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
    ray: RayAddress = None,
    json_out: JsonOut = False,
) -> None:
    """Train on the task's sources (or one), log to MLflow, register, and apply the champion gate."""
    from preflight.models.presentation import progress

    _logging()
    options.use_ray(ray)
    with progress.shown(render.console(stderr=True)):
        result = preflight.train(task, family=family, source=source, path=path, promote=promote, seed=seed)
    if not json_out:
        render.training(result)
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
                "metrics": render.finite(result.report["metrics"]),
            },
            indent=2,
        )
    )


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
    ray: RayAddress = None,
    json_out: JsonOut = False,
) -> None:
    """Grouped cross-validation on a source, or train on one file and test on another."""
    from preflight.models.presentation import progress

    _logging()
    options.use_ray(ray)
    with progress.shown(render.console(stderr=True)):
        evaluation = preflight.evaluate(
            task, family=family, split=split, source=source, path=path, train=train, test=test,
            shots=shots, train_size=train_size, seed=seed, coverage=coverage,
        )  # fmt: skip
    summary = render.finite(evaluation.summary())
    if json_out:
        typer.echo(json.dumps(summary, allow_nan=False))
    else:
        render.metrics(summary)


@app.command(cls=_TaskCommand)
def predict(
    task: TaskName,
    input: Annotated[Path, typer.Option("--input", help="JSON list of items, as in the HTTP API")],
    coverage: Coverage = 0.9,
    json_out: JsonOut = False,
) -> None:
    """Estimates from the champion for items in a JSON file (same items as the HTTP API)."""
    from pydantic import ValidationError

    _logging()
    items = options.items(input)
    try:
        found = preflight.predict(task, items, coverage=coverage)
    except ValidationError as exc:
        raise DataError(
            f"--input {input}: {exc.error_count()} invalid fields ({options.errors(exc)})"
        ) from exc
    if json_out:
        answer = {"task": task, "model": vars(found.model), "predictions": found.records}
        typer.echo(json.dumps(answer, indent=2))
    else:
        render.predictions(task, found, coverage)


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
    from preflight.models.presentation import progress

    _logging()
    with progress.shown(render.console(stderr=True)):
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
    json_out: JsonOut = False,
) -> None:
    """Rank devices for one workload by time per run, with energy and cost, each with its interval."""
    from preflight.service.schemas import WhatIfResponse

    _logging()
    work = options.workload(workload)
    names, prices = options.devices(devices), options.prices(price or [])
    try:  # a device that --devices or --price names and the catalogue does not know: a usage error
        ranking = preflight.whatif(work.task, work.items, names, prices, coverage=coverage)
    except UnknownDevice as exc:
        raise UsageError(str(exc)) from exc
    if chart is not None:
        render.chart(ranking.whatif, output_file(chart, workload, option="--chart"))
    if json_out:
        typer.echo(WhatIfResponse.of(ranking.whatif, ranking.model).model_dump_json(indent=2))
    else:
        render.ranking(ranking.whatif)


@collect_app.command("gemm")
def collect_gemm(
    device: Annotated[str, typer.Option(help="cpu, cuda or cuda:N")] = "cpu",
    out: Annotated[Path | None, typer.Option(help="CSV to append to")] = None,
    points: Count = 300,
    seed: Seed = 0,
    threads: Annotated[int | None, typer.Option(min=1)] = None,
    repeats: Count = 7,
    max_seconds_per_point: Positive = 2.0,
    power: Annotated[bool, typer.Option(help="measure power over a settled 1 s window per point")] = True,
    ray: RayAddress = None,
    devices: options.AllOrCount = "all",
) -> None:
    """Sweep GEMM shapes/dtypes/layouts on this machine: median runtime, spread, power (CUDA). With --ray:
    one sweep per GPU (or per node's CPU) of the cluster, into the folder OUT (the k-th GPU of a model
    sweeps seed SEED+k)."""
    options.use_ray(ray)
    _collect(
        "gemm", out, device=device, points=points, seed=seed, threads=threads, repeats=repeats,
        max_seconds_per_point=max_seconds_per_point, power=power, devices=options.how_many(devices),
    )  # fmt: skip


@collect_app.command("curves")
def collect_curves(
    out: Annotated[Path | None, typer.Option(help="CSV to append to")] = None,
    runs: Count = 300,
    epochs: Count = 20,
    seed: Seed = 0,
    ray: RayAddress = None,
    workers: options.AllOrCount = "all",
) -> None:
    """Train NAS-Bench-201 cells on scikit-learn's digits on CPU: a learning curve per run (resumable).
    With --ray: the runs are trained on the cluster's CPUs, one worker each."""
    options.use_ray(ray)
    _collect("curves", out, runs=runs, epochs=epochs, seed=seed, workers=options.how_many(workers))


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
    chosen = [name.strip() for name in workloads.split(",") if name.strip()]
    _collect(
        "interference", out, seconds=seconds, seed=seed, max_minutes=max_minutes, backend=backend,
        workloads=chosen,
    )  # fmt: skip


def _collect(profiler: str, out: Path | None, **parameters: Any) -> None:
    """Run an own profiler (default ``out``: under ``PREFLIGHT_HOME``); its summary as one JSON line. A
    SIGTERM (``timeout``, a batch scheduler) stops it as Ctrl-C does: its children stopped, its log
    left whole to resume."""
    _logging()
    with _terminate_as_interrupt():
        summary = preflight.collect(profiler, out, **parameters)
    typer.echo(json.dumps({k: str(v) for k, v in vars(summary).items()}))


@contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@app.command()
def devices(
    query: Annotated[
        str | None, typer.Argument(help="a name as nvidia-smi, torch or lscpu prints it: the device it means")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="a JSON list of spec sheets")] = False,
) -> None:
    """The device catalogue (shipped spec sheets and the devices registered here) as a table; with
    QUERY, the one device it resolves to (an unknown name lists close matches)."""
    _logging()
    found = preflight.devices(query)
    if as_json:
        typer.echo(json.dumps([spec.model_dump(mode="json", exclude_none=True) for spec in found], indent=1))
    else:
        render.devices(found)


@app.command(cls=_TaskCommand)
def score(
    task: TaskName,
    input: Annotated[Path, typer.Option("--input", help="Parquet or CSV file of items, one a row")],
    output: Annotated[Path, typer.Option("--output", help="Parquet file to write")],
    version: Annotated[str | None, typer.Option(help="the version (default: the champion)")] = None,
    coverage: Coverage = 0.9,
    batch_rows: Annotated[int, typer.Option(min=1, help="rows estimated at a time (memory follows it)")] = (
        preflight.SCORE_BATCH_ROWS
    ),
    ray: RayAddress = None,
) -> None:
    """Estimates for every row of a file of items, of any size, streamed in batches to a Parquet file:
    the input's columns, then per target value, _low, _high, ood and warnings. Prints what it wrote.
    With --ray, Ray Data workers score the batches (the input and PREFLIGHT_HOME seen by every node)."""
    _logging()
    options.use_ray(ray)
    scored = preflight.score(task, input, output, version=version, coverage=coverage, batch_rows=batch_rows)
    rate = scored.rows / max(scored.seconds, 1e-9)
    typer.echo(
        f"{scored.output}: {scored.rows:,} rows in {scored.seconds:.1f} s ({rate:,.0f} rows/s), "
        f"{scored.model.name} v{scored.model.version}"
    )


@app.command(cls=_ActionCommand)
def ask(
    action: Annotated[str, typer.Argument(help="the action (listed below)")],
    input: Annotated[Path, typer.Option("--input", help="JSON request, as the action's HTTP route takes it")],
) -> None:
    """A task's question beyond estimates (stop a training run? which host? which designs?), answered
    by its champion as its HTTP route answers; prints the answer as JSON."""
    from pydantic import ValidationError

    _logging()
    body = options.request(input)
    try:
        answer = preflight.ask(action, body)
    except ValidationError as exc:
        raise DataError(
            f"--input {input}: {exc.error_count()} invalid fields ({options.errors(exc)})"
        ) from exc
    typer.echo(answer.model_dump_json(indent=2))


@app.command("register-designs")
def register_designs(
    kernel: Annotated[
        str, typer.Argument(help="a known kernel's name, or a name for the graph each design carries")
    ],
    designs: Annotated[
        Path,
        typer.Argument(
            help="a JSON list (or JSON lines) of synthesized designs: pragmas, tool, valid, cycles..."
        ),
    ],
) -> None:
    """Synthesized designs of an FPGA kernel, which adapt that kernel's estimates only (checked as the
    service checks them); prints the kernel with the count of its designs held."""
    _logging()
    typer.echo(preflight.register_designs(kernel, options.designs(designs)).model_dump_json())


@data_app.command("list")
def data_list(
    as_json: Annotated[bool, typer.Option("--json", help="one JSON object per source")] = False,
) -> None:
    """Every source, where its file is found, and what the table store holds of it."""
    _logging()
    found = preflight.sources()
    if not as_json:
        render.sources(found)
        return
    for info in found:
        typer.echo(json.dumps(vars(info) | {"path": str(info.path) if info.path else None}))


@data_app.command("load")
def data_load(
    source: str, path: Annotated[Path, typer.Option(help="the file in the source's published layout")]
) -> None:
    """Validate a file into the table store; prints rows kept and rejected with reasons."""
    _logging()
    typer.echo(json.dumps(preflight.ingest(source, path), indent=2))


def main() -> None:
    app()
