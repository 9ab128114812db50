"""preflight's Python API: what a notebook, the CLI and the service call.

    import preflight

    preflight.tasks()                         # what can be predicted, with families and splits
    preflight.devices("h100")                 # the catalogue, or the device a name means
    preflight.register_device({"id": "lab-gpu", "name": "Lab GPU", "kind": "gpu", ...})
    preflight.measure("lab-gpu", "gemm", [{"m": 4096, "n": 4096, "k": 4096, "runtime_ms": 2.1}])
    preflight.register_designs("gemm-p", [{"pragmas": {"__PARA__L0": 4}, "valid": 1, "cycles": 5200}])
    model = preflight.load("gemm")            # the champion (version="3" for another), adapted to them
    model.predict([{"m": 4096, "n": 4096, "k": 4096, "dtype": "fp16", "device": "h100"}])
    result = preflight.evaluate("gemm", split="device")   # grouped cross-validation beside the baseline
    result.by_group("runtime_ms"), result.worst("runtime_ms"), result.summary()
    preflight.whatif("gemm", [{"m": 4096, "n": 4096, "k": 4096}], ["H100 SXM5", "A100 SXM4 80GB"])

``home`` (every function that reads one takes it) is a ``PREFLIGHT_HOME``; by default the
environment's. Devices and measurements go through the same registry, and the same files, as
``POST /v1/devices``: a service on the same home sees them, and the other way round. Nothing heavy
is imported until a function is called, so importing any ``preflight.*`` module stays instant.
"""

from __future__ import annotations

import functools
import gc
import json
import logging
from collections.abc import Generator, Iterable, Iterator, Mapping, Sequence
from contextlib import closing, contextmanager
from dataclasses import asdict, dataclass
from importlib.metadata import version as _version
from pathlib import Path
from typing import TYPE_CHECKING, Any

from preflight.data.errors import DataError, UsageError
from preflight.data.store import output_file
from preflight.data.threads import serialise_parsing

serialise_parsing()  # ast.parse one thread at a time where CPython races (data/threads.py)

if TYPE_CHECKING:
    import pandas as pd
    from preflight.data.catalogue import Catalogue, DeviceSpec
    from preflight.data.settings import Settings
    from preflight.models.core.inference import Prediction
    from preflight.models.core.predictor import Predictor
    from preflight.models.core.task import Task
    from preflight.models.core.training import TrainResult
    from preflight.models.presentation.analysis import Evaluation
    from preflight.models.registry.devices import Champion, DevicePublic, DeviceRegistry, SubjectPublic
    from preflight.models.registry.tracking import ModelInfo
    from preflight.models.tools.whatif import WhatIf
    from pydantic import BaseModel

__all__ = [
    "Model",
    "Predictions",
    "Ranking",
    "Scored",
    "SourceInfo",
    "TaskInfo",
    "collect",
    "devices",
    "evaluate",
    "ingest",
    "load",
    "measure",
    "predict",
    "register_designs",
    "register_device",
    "remove_designs",
    "remove_device",
    "remove_measurements",
    "report",
    "score",
    "serve",
    "sources",
    "tasks",
    "train",
    "versions",
    "whatif",
    "ask",
    "__version__",
]
__version__ = _version("preflight")
log = logging.getLogger("preflight")


def __dir__() -> list[str]:
    """The public API and the subpackages, as a notebook's tab completion lists them (not the imports)."""
    return sorted([*__all__, "data", "features", "models", "service"])


#: Rows a source is sampled down to for a report: a grouped cross-validation refits the family per fold.
REPORT_ROWS = 1000
#: Rows ``score`` reads, estimates and writes at a time (memory follows it), and bytes of CSV per block.
SCORE_BATCH_ROWS, CSV_BLOCK_BYTES = 50_000, 1 << 22
#: The column of a batch a Ray worker rejected (``_Scorer``); no item field is named so.
REJECTED = "_preflight_rejected"
#: Batches ``score`` estimates at once without a cluster (at most, and at most one per CPU): much of a
#: batch holds the GIL, so more threads add memory, not speed.
SCORE_THREADS = 4
#: The own profilers (``preflight.data.collect.<name>``), each appending to ``HOME/collect/local_<name>.csv``.
PROFILERS = ("gemm", "curves", "interference")


@dataclass(frozen=True)
class TaskInfo:
    """A task as a user chooses it: its targets (with units), families and splits."""

    name: str
    targets: dict[str, str]
    families: tuple[str, ...]
    default_family: str
    baseline: str
    splits: tuple[str, ...]
    default_split: str
    sources: tuple[str, ...]
    #: the task's questions beyond estimates (``ask``), each also ``POST`` at its path
    actions: dict[str, str]


@dataclass(frozen=True)
class SourceInfo:
    """A source: where its file is found (None: nowhere), and the rows the table store holds of it."""

    source: str
    path: Path | None
    stored_rows: int | None
    rejected: int | None


@dataclass(frozen=True)
class Predictions:
    """Estimates as ``POST /v1/{task}/predict`` answers them: the model version that made them, the
    items as validated, and per item its record ``{target: {value, low, high}, ood, warnings}``."""

    task: Task
    model: ModelInfo
    items: list[BaseModel]
    records: list[dict]


@dataclass(frozen=True)
class Ranking:
    """One workload's candidate devices ranked by time per run, and the model version that estimated them."""

    model: ModelInfo
    whatif: WhatIf


def settings(home: str | Path | None = None) -> Settings:
    """The configuration (``PREFLIGHT_*``), with ``home`` overriding ``PREFLIGHT_HOME``."""
    from preflight.data.settings import Settings

    return Settings(home=Path(home)) if home is not None else Settings()


def catalogue(home: str | Path | None = None) -> Catalogue:
    """The device catalogue: shipped spec sheets, the host, and the devices registered in ``home``."""
    from preflight.data.catalogue import Catalogue

    return Catalogue.load(settings(home).devices_file)


def tasks() -> list[TaskInfo]:
    """Every task of the registry."""
    from preflight.models.core.task import all_tasks

    return [
        TaskInfo(
            task.name,
            {name: target.unit for name, target in task.targets.items()},
            task.families,
            task.default_family,
            task.baseline,
            tuple(task.groups),
            task.group_key,
            task.sources,
            {action.name: action.path for action in task.actions},
        )
        for task in all_tasks()
    ]


def devices(query: str | None = None, home: str | Path | None = None) -> list[DeviceSpec]:
    """The catalogue's devices, or the one a name means (as nvidia-smi, torch or lscpu print it);
    an unknown name raises ``UnknownDevice`` with its close matches, and one several devices fit
    (``h100``) ``AmbiguousDevice`` listing them."""
    known = catalogue(home)
    return [known.lookup(query)] if query is not None else list(known)


def register_device(
    spec: DeviceSpec | dict[str, Any],
    measurements: Iterable[dict[str, Any]] = (),
    task: str = "gemm",
    home: str | Path | None = None,
) -> DevicePublic:
    """Register (or update) a device from its spec sheet (a ``DeviceSpec``, or the dict
    ``POST /v1/devices`` takes as ``spec``), with ``measurements`` of ``task`` if any, as one change:
    refused measurements (``InvalidRegistration`` names each) register nothing. The device, with the
    measurements held for it per task."""
    from preflight.data.catalogue import DeviceSpec

    return _register(DeviceSpec.model_validate(spec), None, task, measurements, home)


def measure(
    device: str, task: str, measurements: Iterable[dict[str, Any]], home: str | Path | None = None
) -> DevicePublic:
    """Add measurements of a device (any name the catalogue resolves; for a task that learns devices
    from their measurements alone, a new one): each the task's item fields (the device left out) plus
    the measured targets, e.g. ``{"m": 1024, "n": 1024, "k": 1024, "runtime_ms": 0.45}``. They are
    checked as the service checks them (``InvalidRegistration``, ``ImplausibleMeasurements`` name each
    bad row and why) and adapt the task's model for that device only. The device, with its counts."""
    return _register(None, device, task, measurements, home)


def register_designs(
    kernel: str, designs: Iterable[dict[str, Any]], home: str | Path | None = None
) -> SubjectPublic:
    """Add synthesized designs of an FPGA kernel (a known kernel's name, or any name with the kernel's
    ``graph`` in each design): each an fpga item's fields but the kernel plus what synthesis gave,
    e.g. ``{"pragmas": {"__PARA__L0": 4}, "valid": 1, "cycles": 5200, "lut": 0.1, "ff": 0.05, "dsp":
    0.02, "bram": 0.01}`` or ``{"pragmas": {...}, "valid": 0}``. Checked as the service checks them;
    they adapt that kernel's estimates only. The kernel, with the count of its designs held."""
    config = settings(home)
    registry = _registry(config)
    registration = registry.subject_registration("fpga", kernel, list(designs))
    registry.register(registration, lambda name: _champion(config, name))
    return registry.describe_subject(_task("fpga"), kernel)


def remove_designs(kernel: str, home: str | Path | None = None) -> SubjectPublic:
    """Forget an FPGA kernel's synthesized designs (as ``DELETE /v1/fpga/kernels/{kernel}/designs``):
    its estimates are the unadapted model's again. The kernel, with no designs held."""
    return _registry(settings(home)).remove_subject(_task("fpga"), kernel)


def remove_device(name: str, home: str | Path | None = None) -> DeviceSpec:
    """Remove a registered device with its measurements; a catalogue device, or one a champion was
    trained on, cannot be removed (``DeviceConflict`` says why)."""
    config = settings(home)
    return _registry(config).remove_device(name, lambda: _champions(config))


def remove_measurements(device: str, task: str | None = None, home: str | Path | None = None) -> DevicePublic:
    """Forget the measurements of a device (a catalogue device too), of ``task`` or of all. The device
    as it remains."""
    return _registry(settings(home)).remove_measurements(device, None if task is None else _task(task))


def _register(
    spec: DeviceSpec | None,
    device: str | None,
    task: str,
    measurements: Iterable[dict[str, Any]],
    home: str | Path | None,
) -> DevicePublic:
    """A registration carried out in the home's registry, checked against the task's champion."""
    config = settings(home)
    registry = _registry(config)
    registration = registry.registration(spec, device, task, list(measurements))
    answer, _ = registry.register(registration, lambda name: _champion(config, name))
    return answer


def versions(task: str, home: str | Path | None = None) -> pd.DataFrame:
    """The registered versions of a task's model, newest first, with the champion marked."""
    import pandas as pd
    from preflight.models.registry import tracking

    found = tracking.versions(settings(home), _task(task).name)
    return pd.DataFrame.from_records(found, columns=tracking.VERSION_FIELDS).set_index("version")


def train(
    task: str,
    *,
    family: str | None = None,
    source: str | None = None,
    path: str | Path | None = None,
    promote: bool = False,
    seed: int = 0,
    home: str | Path | None = None,
) -> TrainResult:
    """Fit a family (the task's default) on every source at hand, or on ``source`` (its file at
    ``path`` or under ``PREFLIGHT_DATASETS``); log the run, register a version and apply the champion
    gate (``promote`` makes it the champion regardless)."""
    from preflight.models.core.datasets import source_file
    from preflight.models.core.training import train as fit

    config = settings(home)
    spec = _task(task)
    spec.family(family)  # an unknown family is refused before any data is read
    if path is not None and source is None:
        raise UsageError(f"--path {path} needs --source (the layout the file is in)")
    paths = None if source is None else {source: source_file(source, Path(path) if path else None, config)}
    return fit(spec, config, catalogue(home), family=family, paths=paths, promote=promote, seed=seed)


def load(task: str, version: str | int | None = None, home: str | Path | None = None) -> Model:
    """A task's model: the champion (or, when it cannot load, the newest version that does), or the
    given version, adapted to the measurements held in ``home`` as the service adapts it (its
    ``info.adaptation`` says to which). ``NotTrained`` when the task has none."""
    from preflight.models.registry import tracking
    from preflight.models.registry.devices import Champion

    config = settings(home)
    spec = _task(task)
    if version is None:
        loaded = _champion(config, spec.name)
    else:
        loaded = Champion.loaded(*tracking.load_version(config, spec.name, str(version)))
    registry = _registry(config)
    adapted = registry.adapted(spec, loaded)
    return Model(spec, adapted.predictor, adapted.info, config, registry.catalogue)


def evaluate(
    task: str,
    *,
    family: str | None = None,
    split: str | None = None,
    source: str | None = None,
    path: str | Path | None = None,
    files: dict[str, str | Path] | None = None,
    train: str | Path | None = None,
    test: str | Path | None = None,
    shots: int = 0,
    train_size: int | None = None,
    max_rows: int | None = None,
    seed: int = 0,
    coverage: float = 0.9,
    params: dict | None = None,
    home: str | Path | None = None,
) -> Evaluation:
    """Grouped cross-validation of a family (the task's default) beside the task's baseline: each
    fold holds out whole groups of ``split`` (the task's default split). The data are ``source``
    (its file at ``path`` or under ``PREFLIGHT_DATASETS``), several sources' ``files``, or every
    source at hand; each sampled down to ``max_rows`` rows (seeded). Or, given ``train`` and ``test``
    (files or folders in ``source``'s layout), fit on one and test on the other: ``shots`` rows of
    each test device are given to the model as its measurements, and the metrics, by device, are
    computed on the rest."""
    from preflight.models.presentation import analysis

    spec = _task(task)
    family = spec.family(family)  # refused, with the options and the split, before any data is read
    _check_evaluation(train, test, path, train_size, shots)
    split = spec.split(split)
    config, known = settings(home), catalogue(home)
    if train is not None and test is not None:
        if source is None:
            raise UsageError("--train and --test need --source (the layout their files are in)")
        train_rows, test_rows = (_loaded(source, Path(file), config, known) for file in (train, test))
        _warn_of_shared_rows(train_rows, test_rows)
        return analysis.train_tested(
            spec, train_rows, test_rows, known, family, split, source,
            seed=seed, shots=shots, coverage=coverage, params=params,
        )  # fmt: skip
    chosen = _chosen_files(source, path, files, config)
    rows, names = analysis.rows_for(spec, config, known, chosen, max_rows, seed)
    return analysis.cross_validated(
        spec, rows, known, family, split, "+".join(names),
        seed=seed, train_size=train_size, coverage=coverage, params=params,
    )  # fmt: skip


def _check_evaluation(
    train: str | Path | None,
    test: str | Path | None,
    path: str | Path | None,
    train_size: int | None,
    shots: int,
) -> None:
    """Options of :func:`evaluate` that do not go together (named as the CLI names them)."""
    if (train is None) != (test is None):
        raise UsageError("--train and --test go together")
    if train is not None and (path is not None or train_size is not None):
        raise UsageError("--path and --train-size belong to grouped CV, not to --train/--test")
    if train is None and shots:
        raise UsageError("--shots needs --train and --test (the test file's devices are the new ones)")


def _loaded(source: str, file: Path, config: Settings, known: Catalogue) -> pd.DataFrame:
    """A file of ``source``'s layout, loaded without storing it."""
    from preflight.models.core.datasets import load_source

    return load_source(source, file, config, known, store=False)[0]


def _warn_of_shared_rows(train: pd.DataFrame, test: pd.DataFrame) -> None:
    """Log how many test rows the training rows hold too (same cells): their figures are in-sample."""
    import pandas as pd

    seen = set(pd.util.hash_pandas_object(train.astype(str), index=False))
    shared = int(pd.util.hash_pandas_object(test.astype(str), index=False).isin(seen).sum())
    if shared:
        log.warning(
            "%d of %d test rows are also training rows: their figures are in-sample", shared, len(test)
        )


def _chosen_files(
    source: str | None, path: str | Path | None, files: dict[str, str | Path] | None, config: Settings
) -> dict[str, Path] | None:
    """The files to evaluate on by source: ``files`` and ``source``'s; None for every source at hand."""
    from preflight.models.core.datasets import source_file

    chosen = {name: Path(file) for name, file in (files or {}).items()}
    if source is not None:
        chosen[source] = source_file(source, Path(path) if path else None, config)
    return chosen or None


def predict(
    task: str,
    items: Sequence[Any],
    *,
    coverage: float = 0.9,
    version: str | int | None = None,
    home: str | Path | None = None,
) -> Predictions:
    """A version's (the champion's) estimates for items checked as ``POST /v1/{task}/predict`` checks
    them: at most 10,000, within the request budget (``OverBudget``), each valid for the task
    (pydantic's ``ValidationError`` names the fields)."""
    from preflight.models.core import budget
    from preflight.service.schemas import predict_request

    spec = _task(task)
    items = _request_items(items)
    budget.check(spec, items)
    validated = predict_request(spec).model_validate({"items": items}).items
    model = load(task, version, home)
    return Predictions(spec, model.info, validated, model.records(validated, coverage))


def _request_items(items: Any) -> list[Any]:
    """Items as the request's list, NumPy's scalars as the Python numbers they hold (what JSON would
    carry); a frame or a lone item is a usage error saying what to pass."""
    import numpy as np
    import pandas as pd

    if isinstance(items, pd.DataFrame):
        raise UsageError(
            "items: a DataFrame is read by preflight.load(task).predict(frame); pass a list here"
        )
    if isinstance(items, Mapping | str | bytes):
        raise UsageError("items: a list of items, e.g. [{...}], not one item")
    return [
        {k: v.item() if isinstance(v, np.generic) else v for k, v in item.items()}
        if isinstance(item, Mapping)
        else item
        for item in items
    ]


def ask(action: str, request: Mapping[str, Any], *, home: str | Path | None = None) -> BaseModel:
    """One of the tasks' actions (``tasks()`` lists them: ``early-stop``, ``place``, ``explore``,
    ``reference-archs``) answered by its task's champion adapted to the home's measurements, as
    ``POST`` at the action's path answers: the request checked as that route checks it (pydantic's
    ``ValidationError`` names the fields), the answer its response model."""
    from preflight.models.core.actions import Served
    from preflight.models.core.task import get_action

    config = settings(home)
    task, spec = get_action(action)
    body = spec.request.model_validate(request, context=config.validation_context())
    registry = _registry(config)
    return spec.answer(Served(task, registry.adapted(task, _champion(config, task.name)), registry), body)


def whatif(
    task: str,
    items: Sequence[Mapping[str, Any]],
    devices: Sequence[str] | None = None,
    prices: Mapping[str, float] | None = None,
    *,
    coverage: float = 0.9,
    home: str | Path | None = None,
) -> Ranking:
    """One workload (the task's items without a device; one run is every item once) estimated by the
    champion on each of ``devices`` (names the catalogue resolves; by default every GPU and
    accelerator) and ranked by time per run, with energy and, where ``prices`` (USD per hour by
    device name) give it, the cost per million runs: each with its interval, as ``POST /v1/whatif``."""
    from preflight.models.tools import whatif as what_if

    spec = _task(task)
    known = catalogue(home)
    candidates = what_if.candidates(spec, known, devices)
    by_id = what_if.prices_by_device(known, candidates, prices or {})
    model = load(spec.name, home=home)
    result = what_if.compare(spec, model.predictor, known, items, candidates, by_id, coverage)
    return Ranking(model.info, result)


def report(
    task: str,
    version: str | int | None = None,
    out: str | Path | None = None,
    *,
    max_rows: int | None = REPORT_ROWS,
    seed: int = 0,
    home: str | Path | None = None,
) -> Path:
    """Where a version (the champion by default) errs, as a self-contained HTML page beside its PNGs,
    also logged as artifacts (``report/``) of the version's run; returns the page. The version's family
    is re-evaluated on its split and the files it learned from (``max_rows`` a source), beside the
    champion, or beside the newest other version when it is the champion, on the same rows."""
    from preflight.models.presentation.report import Candidate, build
    from preflight.models.registry import tracking

    config = settings(home)
    subject = load(task, version, home)
    registered = versions(task, home)
    champions = set(registered.index[registered["champion"]])
    files = subject.trained_files()
    evaluation = subject.evaluate(files=files, max_rows=max_rows, seed=seed)
    other = None
    rival = _rival(list(registered.index), champions, subject.info.version)
    if rival is not None:
        model = load(task, rival, home)
        options = {"split": evaluation.split, "files": files, "max_rows": max_rows, "seed": seed}
        other = Candidate(model.info, model.evaluate(**options), rival in champions)
    page = build(Candidate(subject.info, evaluation, subject.info.version in champions), other)
    default = config.home / "reports" / f"{subject.task.name}-v{subject.info.version}"
    written = page.write(Path(out) if out is not None else default)
    tracking.log_report(config, subject.info.run_id, written)
    return written[0]


def _rival(registered: list[str], champions: set[str], version: str) -> str | None:
    """The version to set beside ``version``: the champion, or when it is the champion, the newest other."""
    others = [v for v in registered if v != version]
    return next((v for v in others if v in champions), others[0] if others else None)


def sources(home: str | Path | None = None) -> list[SourceInfo]:
    """Every source: where its file is found (under ``PREFLIGHT_DATASETS``, else shipped), and what the
    table store holds of it."""
    from preflight.data import sources as known
    from preflight.data.store import TableStore

    config = settings(home)
    stored = TableStore(config.tables_dir).manifest()
    return [
        SourceInfo(
            name,
            known.default_path(name, config.datasets),
            stored.get(name, {}).get("rows"),
            stored.get(name, {}).get("rejected"),
        )
        for name in known.LOADERS
    ]


@dataclass(frozen=True)
class Scored:
    """What ``score`` wrote: where, how many rows, in how many seconds, and the model version."""

    output: Path
    rows: int
    seconds: float
    model: ModelInfo


def score(
    task: str,
    input: str | Path,
    output: str | Path,
    *,
    version: str | int | None = None,
    coverage: float = 0.9,
    batch_rows: int = SCORE_BATCH_ROWS,
    home: str | Path | None = None,
) -> Scored:
    """A version's (the champion's) estimates for every row of a Parquet or CSV file of items (a column
    per item field; other columns, such as an id, are carried through), written to a Parquet file batch
    by batch, so that memory follows ``batch_rows`` (times the batches in flight, at most one more
    than ``SCORE_THREADS``), not the file: the input's columns, then per
    target its value, ``_low`` and ``_high``, ``ood`` and the ``warnings`` codes. The output appears
    whole or not at all (written beside it, then renamed). A row that is not a valid item raises
    ``DataError`` naming its row and field; nothing is written then.

    With ``RAY_ADDRESS`` the batches are scored by Ray Data workers (one CPU each, each loading the
    version once from ``home``, which every node must see), the output still written here in the
    input's order."""
    import time

    import pyarrow as pa
    import pyarrow.parquet as pq
    from preflight.data.cluster import cluster
    from preflight.models.core import parallel

    began, source = time.monotonic(), _readable(Path(input))
    target = output_file(Path(output), source)
    model, address = load(task, version, home), cluster()
    if address is None:
        tables = _scored_here(_Scorer(model, coverage, str(source)), _item_batches(source, batch_rows))
    else:
        located = (model.task.name, model.info.version, model.settings.home, coverage, str(source))
        tables = parallel.map_file(source, batch_rows, functools.partial(_Scorer.loaded, *located), address)
    partial = target.with_name(target.name + ".partial")
    rows, writer, finished = 0, None, False
    try:
        with _long_lived_frozen(), closing(tables):  # closed at once, on a failure too
            for table in tables:
                if REJECTED in table.column_names:  # a Ray worker's rejection: this process knows its row
                    raise _Rejection.found_in(table, str(source), rows)
                writer = writer or pq.ParquetWriter(partial, table.schema)
                writer.write_table(table)
                rows += table.num_rows
        finished = True
    except pa.ArrowException as exc:  # a file Arrow cannot read as a table (empty, ragged rows)
        raise DataError(f"{input}: not a table of items after row {rows} ({exc}); nothing written") from None
    finally:
        if writer is not None:
            writer.close()
        if not finished:  # a failure leaves nothing behind
            partial.unlink(missing_ok=True)
    if writer is None:
        raise DataError(f"{input}: no rows to score")
    partial.replace(target)
    return Scored(target, rows, time.monotonic() - began, model.info)


@contextmanager
def _long_lived_frozen() -> Iterator[None]:
    """The objects alive now (the model, the libraries) left out of the garbage collector's scans until
    the block ends, unless something froze them already: scoring allocates lists per row, and each full
    collection would otherwise walk the whole heap again (a quarter of the time of 1M GEMM rows)."""
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


class _Scorer:
    """One version's estimates appended to batches of items (Arrow record batches or tables)."""

    def __init__(self, model: Model, coverage: float, source: str) -> None:
        self.model, self.coverage, self.source = model, coverage, source
        self.fields = list(model.task.item.model_fields)

    @classmethod
    def loaded(cls, task: str, version: str, home: Path, coverage: float, source: str) -> _Scorer:
        """A scorer of the version, loaded here (a Ray worker loads it once)."""
        return cls(load(task, version, home), coverage, source)

    def __call__(self, batch: Any, first_row: int | None = None) -> Any:
        """The batch as a table, with per target its value, ``_low``, ``_high``, then ``ood`` and
        ``warnings``. An invalid row raises ``DataError`` naming its row in the file, where
        ``first_row`` says where the batch starts; without it (a Ray worker, which cannot know) the
        rejection comes back as a one-row table of the column ``REJECTED``, for the process that reads
        the batches in the file's order to name the row."""
        import pyarrow as pa
        from pydantic import ValidationError

        table = pa.Table.from_batches([batch]) if isinstance(batch, pa.RecordBatch) else batch
        if twice := sorted({c for c in table.column_names if table.column_names.count(c) > 1}):
            raise DataError(f"{self.source}: columns named more than once: {', '.join(twice)}")
        frame = table.select([c for c in table.column_names if c in self.fields]).to_pandas()
        try:
            found = self.model.predict(frame, self.coverage)
        except ValidationError as exc:
            rejection = _Rejection.of(exc, len(frame))
            if first_row is None:
                return rejection.table()
            raise rejection.error(self.source, first_row) from None
        for name in found.columns.drop("warnings"):
            table = table.append_column(name, pa.array(found[name].to_numpy()))
        return table.append_column("warnings", pa.array(found["warnings"], pa.list_(pa.string())))


@dataclass(frozen=True)
class _Rejection:
    """A batch's first invalid row (its place in the batch), field and reason."""

    row: int
    field: str
    reason: str
    problems: int
    batch_rows: int

    @classmethod
    def of(cls, exc: Any, batch_rows: int) -> _Rejection:
        """From pydantic's ``ValidationError`` of a batch's rows."""
        row, *field = exc.errors()[0]["loc"]
        return cls(int(row), ".".join(map(str, field)), exc.errors()[0]["msg"], exc.error_count(), batch_rows)

    def error(self, source: str, first_row: int) -> DataError:
        """The error naming the row in the file whose batch starts at ``first_row``."""
        return DataError(
            f"{source}: row {first_row + self.row}: {self.field}: {self.reason} ({self.problems} "
            f"problem{'s' * (self.problems != 1)} in its batch of {self.batch_rows} rows); nothing written"
        )

    def table(self) -> Any:
        """As a one-row table of the column ``REJECTED`` (its fields as JSON)."""
        import pyarrow as pa

        return pa.table({REJECTED: [json.dumps(asdict(self))]})

    @staticmethod
    def found_in(table: Any, source: str, first_row: int) -> DataError:
        """The error of the rejection in a table of scored rows whose first is the file's ``first_row``
        (Ray Data may join a rejection to the rows before it, ``REJECTED`` null on theirs)."""
        import pyarrow.compute as pc

        column = table.column(REJECTED)
        at = pc.index(pc.is_valid(column), True).as_py()
        return _Rejection(**json.loads(column[at].as_py())).error(source, first_row + at)


def _scored_here(scorer: _Scorer, batches: Iterator[Any]) -> Generator[Any]:
    """The batches scored in this process, side by side on its CPUs (NumPy, LightGBM and Arrow release
    the GIL for much of a batch), each knowing where it starts, in the file's order."""
    from preflight.models.core import parallel

    return parallel.stream_local(scorer, _numbered(batches), SCORE_THREADS)


def _numbered(batches: Iterator[Any]) -> Iterator[tuple[Any, int]]:
    """Each batch with the file's row it starts at."""
    first_row = 0
    for batch in batches:
        yield batch, first_row
        first_row += batch.num_rows


def _readable(path: Path) -> Path:
    """A Parquet or CSV file of items."""
    if not path.is_file():
        raise UsageError(f"{path}: no such file")
    if path.suffix not in (".parquet", ".csv"):
        raise UsageError(f"{path}: give a .parquet or .csv file of items")
    return path


def _item_batches(path: Path, rows: int) -> Iterator[Any]:
    """Record batches of at most ``rows`` rows of a Parquet or CSV file, read as they are needed."""
    import pyarrow.csv as csv
    import pyarrow.parquet as pq

    if path.suffix == ".parquet":
        yield from pq.ParquetFile(path).iter_batches(batch_size=rows)
    else:
        for block in csv.open_csv(path, read_options=csv.ReadOptions(block_size=CSV_BLOCK_BYTES)):
            yield from (block.slice(start, rows) for start in range(0, block.num_rows, rows))


def ingest(source: str, path: str | Path, home: str | Path | None = None) -> dict[str, Any]:
    """Validate a file in ``source``'s published layout into the table store, registering the devices
    that travel with it; the store's record of it (rows kept, rows rejected with reasons, checksum)."""
    from preflight.data.store import TableStore
    from preflight.models.core.datasets import load_source

    config = settings(home)
    load_source(source, Path(path), config, catalogue(home))
    return TableStore(config.tables_dir).manifest()[source]


def collect(
    profiler: str, out: str | Path | None = None, *, home: str | Path | None = None, **options: Any
) -> Any:
    """Run an own profiler on this machine (one of ``PROFILERS``), appending its traces to ``out``
    (default ``HOME/collect/local_<profiler>.csv``, or the folder ``HOME/collect/local_gemm`` for a GEMM
    sweep per device of the ``RAY_ADDRESS`` cluster); it resumes where the file stops. ``options`` are
    the profiler's (``preflight.data.collect.<profiler>.collect_<profiler>``). Its summary."""
    from importlib import import_module

    from preflight.data.cluster import cluster

    if profiler not in PROFILERS:
        raise UsageError(f"unknown profiler {profiler!r}; the profilers: {', '.join(PROFILERS)}")
    config = settings(home)
    name = f"local_{profiler}" + ("" if profiler == "gemm" and cluster() else ".csv")
    target = Path(out) if out is not None else config.home / "collect" / name
    run = getattr(import_module(f"preflight.data.collect.{profiler}"), f"collect_{profiler}")
    return run(out=target, **options)


def serve(host: str = "127.0.0.1", port: int = 8000, home: str | Path | None = None) -> None:
    """Serve the HTTP API until stopped; champions that are missing are trained from the data at hand
    meanwhile, GEMM first (each task answers once its own model loads). The protocol bounds how a
    request arrives (``protocol.ArrivalLimits``: its time, and its head's size)."""
    import uvicorn
    from preflight.service.app import create_app
    from preflight.service.protocol import ArrivalLimits

    uvicorn.run(create_app(settings(home), bootstrap=True), host=host, port=port, http=ArrivalLimits)


@dataclass
class Model:
    """One version of a task's model, ready to predict."""

    task: Task
    predictor: Predictor
    info: ModelInfo
    settings: Settings
    catalogue: Catalogue

    def predict(self, items: Iterable[dict[str, Any]] | pd.DataFrame, coverage: float = 0.9) -> pd.DataFrame:
        """Estimates for items (dicts as the HTTP API takes them, or a frame with one item a row): per
        target its value, ``_low`` and ``_high``, then ``ood`` and the ``warnings`` codes."""
        from preflight.models import pyfunc

        estimates = self.prediction(items, coverage).estimates
        return pyfunc.table(self.predictor, estimates).assign(warnings=estimates.warnings())

    def records(self, items: Iterable[dict[str, Any]] | pd.DataFrame, coverage: float = 0.9) -> list[dict]:
        """The estimates as the HTTP API answers them: ``{target: {value, low, high}, ood, warnings}``."""
        return self.prediction(items, coverage).records()

    def prediction(self, items: Iterable[Any] | pd.DataFrame, coverage: float = 0.9) -> Prediction:
        """Items (dicts, a frame, or the task's validated item models) through the one prediction path;
        an invalid one raises pydantic's ``ValidationError``."""
        import pandas as pd
        from preflight.models import pyfunc
        from preflight.models.core.inference import predict_items, predict_rows

        if isinstance(items, pd.DataFrame):
            rows = pyfunc.rows(self.task, items)
            return predict_rows(self.task, self.predictor, self.catalogue, rows, coverage)
        return predict_items(self.task, self.predictor, self.catalogue, self.validated(items), coverage)

    def validated(self, items: Iterable[Any]) -> list[Any]:
        """Items as the task's item models; an invalid one raises pydantic's ``ValidationError``."""
        item = self.task.item
        return [i if isinstance(i, item) else item.model_validate(i) for i in items]

    def evaluate(self, **options: Any) -> Evaluation:
        """This version's family and hyperparameters re-evaluated (see :func:`evaluate`) on its training
        split and the files it learned from (:meth:`trained_files`), unless told otherwise."""
        if "source" not in options and "files" not in options:
            options["files"] = self.trained_files()
        options.setdefault("split", _trained_split(self.info))
        options.setdefault("family", self.info.family or None)
        options.setdefault("params", self.predictor.params)
        options.setdefault("home", self.settings.home)
        return evaluate(self.task.name, **options)

    def trained_files(self) -> dict[str, Path] | None:
        """The files this version learned from, by source; None (every source at hand, said in the log)
        when it recorded none or none is still there."""
        from preflight.models.registry import tracking

        files = tracking.source_files(self.settings, self.info.run_id)
        if not files:
            log.warning(
                "%s v%s: its training files are not recorded or moved; evaluating on every source at hand",
                self.task.name, self.info.version,
            )  # fmt: skip
        return files or None


def _registry(config: Settings) -> DeviceRegistry:
    """The home's devices and measurements, as the service reads them."""
    from preflight.models.registry.devices import DeviceRegistry

    return DeviceRegistry.open(config)


def _champion(config: Settings, task: str) -> Champion:
    """A task's champion (or the newest version that loads), as loaded."""
    from preflight.models.registry import tracking
    from preflight.models.registry.devices import Champion

    return Champion.loaded(*tracking.load_champion(config, task))


def _champions(config: Settings) -> dict[str, Champion]:
    """Every task's champion that loads, by task name."""
    from preflight.data.errors import ModelStateError
    from preflight.models.core.task import all_tasks

    found = {}
    for task in all_tasks():
        try:
            found[task.name] = _champion(config, task.name)
        except ModelStateError:  # untrained, or no version loads: no model learned from the device
            continue
    return found


def _task(name: str) -> Task:
    from preflight.models.core.task import get_task

    return get_task(name)


def _trained_split(info: ModelInfo) -> str | None:
    """The split a version was cross-validated on (``grouped-cv:shape``), if it says."""
    return info.split.split(":", 1)[1] if info.split.startswith("grouped-cv:") else None
