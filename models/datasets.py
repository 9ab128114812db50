"""Rows for a task: load its sources, store them, and make their devices known to the catalogue."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from preflight.data import sources
from preflight.data.catalogue import Catalogue, DeviceSpec
from preflight.data.errors import DataError
from preflight.data.settings import Settings
from preflight.data.store import TableStore
from preflight.models.task import Task


@dataclass
class TaskData:
    rows: pd.DataFrame
    checksums: dict[str, str]  # source -> sha256 of its file


def load_source(
    source: str, path: Path, settings: Settings, catalogue: Catalogue, store: bool = True
) -> tuple[pd.DataFrame, str]:
    """Load one file, record it in the table store (unless ``store`` is off, as for evaluation
    splits), and register the devices that travel with it."""
    loaded = sources.load(source, path)
    if store:
        TableStore(settings.tables_dir).put(loaded, path)
    for spec in loaded.extra_devices:
        catalogue.register(DeviceSpec.model_validate(spec))
    return loaded.rows, loaded.sha256


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
) -> TaskData:
    """Rows of the given sources, each optionally sampled down (seeded) to keep training quick."""
    if not paths:
        raise DataError(f"no data for task {task.name!r}: set PREFLIGHT_DATASETS or pass --source/--path")
    frames, checksums = [], {}
    for source, path in paths.items():
        rows, checksums[source] = load_source(source, path, settings, catalogue)
        rows = task.rows(rows)
        if max_rows_per_source is not None and len(rows) > max_rows_per_source:
            rows = rows.sample(max_rows_per_source, random_state=seed)
        frames.append(rows)
    return TaskData(pd.concat(frames, ignore_index=True), checksums)
