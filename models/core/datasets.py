"""Rows for a task: load its sources, store them, and make their devices known to the catalogue."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from preflight.data import sources
from preflight.data.catalogue import Catalogue, DeviceSpec
from preflight.data.errors import DataError, UnknownDevice, UsageError
from preflight.data.settings import Settings
from preflight.data.store import TableStore
from preflight.models.core.task import Task

log = logging.getLogger("preflight.data")


@dataclass
class TaskData:
    rows: pd.DataFrame
    checksums: dict[str, str]  # source -> sha256 of its file


def load_source(
    source: str, path: Path, settings: Settings, catalogue: Catalogue, store: bool = True
) -> tuple[pd.DataFrame, str]:
    """Load one file, record it in the table store (unless ``store`` is off, as for evaluation
    splits), and register the devices that travel with it. Rows the loader rejected are logged with
    their count and reasons (a file with too many is refused by the loader)."""
    loaded = sources.load(source, path)
    if len(loaded.rejects):
        log.warning(
            "%s: %s: %d of %d rows rejected (%s)",
            source, path, len(loaded.rejects), len(loaded.rows) + len(loaded.rejects),
            ", ".join(f"{reason}: {n}" for reason, n in loaded.reject_counts().items()),
        )  # fmt: skip
    if store:
        TableStore(settings.tables_dir).put(loaded, path)
    for spec in loaded.extra_devices:
        _fill_gap(catalogue, DeviceSpec.model_validate(spec))
    return loaded.rows, loaded.sha256


def _fill_gap(catalogue: Catalogue, sheet: DeviceSpec) -> None:
    """Register a spec sheet that travels with the data unless the catalogue already knows the device
    (the catalogue's sheet wins: a dataset's own sheet is often rougher)."""
    for name in (sheet.name, *sheet.aliases):
        try:
            catalogue.resolve(name)
            return
        except UnknownDevice:
            continue
    catalogue.register(sheet)


def source_file(source: str, path: Path | None, settings: Settings) -> Path:
    """A source's file: ``path``, else the source's own under PREFLIGHT_DATASETS (or shipped)."""
    found = path or sources.default_path(source, settings.datasets)
    if found is None:
        raise UsageError(f"no file for source {source!r}: pass --path or set PREFLIGHT_DATASETS")
    return Path(found)


def available_sources(task: Task, settings: Settings) -> dict[str, Path]:
    """The task's sources whose files are at hand (shipped, or under PREFLIGHT_DATASETS)."""
    found = {s: sources.default_path(s, settings.datasets) for s in task.sources}
    return {s: p for s, p in found.items() if p is not None}


def task_data(
    task: Task,
    settings: Settings,
    catalogue: Catalogue,
    paths: dict[str, Path],
    max_rows_per_source: int | None = None,
    seed: int = 0,
    store: bool = True,
) -> TaskData:
    """Rows of the given sources, each optionally sampled down (seeded) to keep training quick; with
    ``store`` off (an evaluation), nothing is written to the table store or the user's catalogue."""
    if not paths:
        raise DataError(f"no data for task {task.name!r}: set PREFLIGHT_DATASETS or pass --source/--path")
    frames, checksums = [], {}
    for source, path in paths.items():
        rows, checksums[source] = load_source(source, path, settings, catalogue, store)
        rows = task.rows(rows)
        register_measured_devices(task, rows, catalogue, persist=store)
        if max_rows_per_source is not None and len(rows) > max_rows_per_source:
            rows = rows.sample(max_rows_per_source, random_state=seed)
        frames.append(rows)
    return TaskData(pd.concat(frames, ignore_index=True), checksums)


def register_measured_devices(
    task: Task, rows: pd.DataFrame, catalogue: Catalogue, persist: bool
) -> list[str]:
    """Make the device names of rows that the catalogue cannot resolve known as devices without a spec
    sheet, when the task learns such devices from their measurements (HELP's FPGA); returns them.
    ``persist`` keeps them in the user's catalogue (a trained model answers for them), else they live
    in this process only (an evaluation's test file)."""
    if not task.measured_devices or "device" not in rows:
        return []
    unknown = []
    for name in rows["device"].dropna().astype(str).unique():
        spec, new = device_spec(task, name, catalogue)
        if new:
            catalogue.register(spec, persist=persist)
            unknown.append(name)
    if unknown:
        log.warning(
            "%s: no spec sheet for %s; learned from their measurements alone", task.name, ", ".join(unknown)
        )
    return unknown


def device_spec(task: Task | None, name: str, catalogue: Catalogue) -> tuple[DeviceSpec, bool]:
    """The catalogue's device of that name, and False; for a name it cannot resolve, when the task learns
    devices from their measurements alone, a new device without a spec sheet (not registered yet), and
    True. Otherwise UnknownDevice."""
    try:
        return catalogue.resolve(name), False
    except UnknownDevice:
        if task is None or not task.measured_devices:
            raise
        return DeviceSpec.known_by_measurements(name), True
