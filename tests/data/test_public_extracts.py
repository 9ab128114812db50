"""The extracts under data/public/: a fresh clone (no PREFLIGHT_DATASETS) trains on them, so each must
load through its source, carry its licence, and stay small."""

from pathlib import Path

import pytest
from preflight.data import sources
from preflight.data.sources import PUBLIC
from preflight.models.core.datasets import available_sources
from preflight.models.core.task import get_task

MAX_PUBLIC_BYTES = 20_000_000


def _shipped() -> dict[str, Path]:
    return {name: entry.shipped for name, entry in sources.LOADERS.items() if entry.shipped is not None}


def _public_sources() -> list[str]:
    return [name for name, path in _shipped().items() if PUBLIC in path.parents]


@pytest.mark.parametrize("source", _public_sources())
def test_each_public_extract_has_its_licence_beside_it(source):
    path = _shipped()[source]
    folder = path if path.is_dir() else path.parent
    assert path.exists() and (folder / "LICENSE").is_file()


def test_data_public_stays_under_20_mb():
    size = sum(f.stat().st_size for f in PUBLIC.rglob("*") if f.is_file())
    assert size <= MAX_PUBLIC_BYTES, f"data/public holds {size / 1e6:.1f} MB"


def test_sets_without_a_redistribution_licence_are_never_shipped():
    assert sources.LOADERS["hw-nas-bench-360"].shipped is None
    assert not list(PUBLIC.rglob("*hw_nas_bench*"))


def _load_shipped(source: str):
    path = sources.default_path(source, None)
    assert path is not None and PUBLIC in path.parents
    loaded = sources.load(source, path)
    assert loaded.reject_counts() == {}
    return loaded.rows


def test_help_extract_holds_every_device_setting_and_thousands_of_cells():
    rows = _load_shipped("help-nb201")
    assert rows["arch"].nunique() >= 2_000
    assert len(set(zip(rows["device"], rows["batch_size"]))) == 21
    assert ("pixel3", 1) in set(zip(rows["device"], rows["batch_size"]))  # the README's device


def test_nas_bench_graph_extract_keeps_whole_architectures_on_every_dataset():
    rows = _load_shipped("nas-bench-graph")
    assert rows["dataset"].nunique() == 9 and rows["arch_group"].nunique() >= 1_000
    per_arch = rows.groupby("arch_group")["dataset"].nunique()
    assert per_arch.min() >= 8  # proteins has fewer architectures upstream


def test_ec_nas_extract_keeps_whole_runs_with_their_learning_curves():
    rows = _load_shipped("ec-nas")
    assert rows["arch_group"].nunique() >= 500
    assert set(rows.groupby("run")["epoch"].max()) == {4.0}  # every run reaches its budget
    assert rows["accuracy"].notna().all() and rows["train_energy_kwh"].notna().all()


@pytest.mark.parametrize("task", ["nas-latency", "nas-accuracy", "nas-curve"])
def test_each_nas_task_has_shipped_data_without_datasets(task, settings):
    assert settings.datasets is None
    assert available_sources(get_task(task), settings)


@pytest.mark.parametrize("source", ["help-nb201", "nas-bench-graph", "ec-nas"])
def test_a_datasets_folder_without_the_file_falls_back_to_the_extract_and_one_with_it_wins(source, tmp_path):
    assert sources.default_path(source, tmp_path) == _shipped()[source]
    full = tmp_path / sources.LOADERS[source].file
    full.parent.mkdir(parents=True)
    full.write_text("")
    assert sources.default_path(source, tmp_path) == full
