"""The home's device registry on its own, without the web service: register, measure, read back from
disk, refuse bad measurements, and set aside stored rows that no longer apply."""

import json

import pytest
from preflight.data.catalogue import DeviceSpec
from preflight.data.errors import DeviceConflict
from preflight.data.settings import Settings
from preflight.models.core.inference import predict_items
from preflight.models.core.task import get_task
from preflight.models.registry import tracking
from preflight.models.registry.devices import Champion, DeviceRegistry, InvalidRegistration

from tests.samples import LAB_GPU, LARGE_FP16_GEMM

H100 = "nvidia-h100-sxm5-80gb"


def _no_model(task: str) -> Champion:
    raise AssertionError(f"a registration without measurements needs no {task} model")


def _gemm(home) -> Champion:
    return Champion.loaded(*tracking.load_champion(Settings(home=home), "gemm"))


def _shots(champion: Champion, registry: DeviceRegistry, device: str, n: int = 5) -> list[dict]:
    """``n`` measurements of ``device``, 1.5 times the unadapted estimate (shapes apart)."""
    task = get_task("gemm")
    items = [
        task.item.model_validate(LARGE_FP16_GEMM | {"m": 1024 * (i + 1), "device": device}) for i in range(n)
    ]
    records = predict_items(task, champion.base, registry.catalogue, items, 0.9).records()
    return [
        LARGE_FP16_GEMM | {"m": 1024 * (i + 1), "runtime_ms": 1.5 * record["runtime_ms"]["value"]}
        for i, record in enumerate(records)
    ]


def test_a_registered_spec_is_read_back_from_disk(tmp_path):
    settings = Settings(home=tmp_path / "home")
    registry = DeviceRegistry.open(settings)
    registration = registry.registration(_spec(), None, "gemm", [])
    answer, adapted = registry.register(registration, _no_model)
    assert answer.spec.id == "lab-gpu" and answer.measurements == {} and adapted == {}
    again = DeviceRegistry.open(settings)
    assert again.catalogue.get("lab-gpu") == answer.spec
    registry.remove_device("Lab GPU 7", lambda: {})
    assert DeviceRegistry.open(settings).catalogue.get("lab-gpu") is None


def test_measurements_are_stored_and_adapt_the_model_again_after_a_restart(home):
    registry = DeviceRegistry.open(Settings(home=home))
    gemm = _gemm(home)
    rows = _shots(gemm, registry, H100)
    answer, adapted = registry.register(
        registry.registration(None, "H100 SXM5", "gemm", rows), lambda _: gemm
    )
    assert answer.measurements == {"gemm": 5}
    label = adapted["gemm"].info.adaptation
    assert label is not None and label.startswith("shots:5:")
    restarted = DeviceRegistry.open(Settings(home=home))
    assert len(restarted.measurements["gemm"]) == 5
    assert restarted.adapted(get_task("gemm"), gemm).info.adaptation == label
    assert restarted.describe(restarted.catalogue.named(H100)).measurements == {"gemm": 5}


def test_a_change_by_another_process_is_read_at_the_next_sync(tmp_path):
    settings = Settings(home=tmp_path / "home")
    reader, writer = DeviceRegistry.open(settings), DeviceRegistry.open(settings)
    changes = []
    reader.on_change = lambda: changes.append(reader.catalogue.get("lab-gpu"))
    writer.register(writer.registration(_spec(), None, "gemm", []), _no_model)
    reader.sync()
    assert changes == [writer.catalogue.get("lab-gpu")] and changes[0] is not None
    reader.sync()  # nothing changed since
    assert len(changes) == 1


def test_bad_measurements_are_refused_each_with_its_field_and_nothing_is_stored(tmp_path):
    registry = DeviceRegistry.open(Settings(home=tmp_path / "home"))
    bad = [
        LARGE_FP16_GEMM | {"m": "x", "runtime_ms": 1.0},
        LARGE_FP16_GEMM | {"runtime_ms": -1.0},
        LARGE_FP16_GEMM,
    ]
    with pytest.raises(InvalidRegistration) as refused:
        registry.registration(None, "H100 SXM5", "gemm", bad)
    locs = [error["loc"] for error in refused.value.errors]
    assert locs == [
        ("measurements", 0, "m"),
        ("measurements", 1, "runtime_ms"),
        ("measurements", 2, "targets"),
    ]
    assert str(refused.value).startswith("3 problem(s): measurements.0.m: ")
    assert not (tmp_path / "home" / "measurements.json").exists()


def test_measurements_of_a_task_that_adapts_to_nothing_are_refused(tmp_path):
    registry = DeviceRegistry.open(Settings(home=tmp_path / "home"))
    with pytest.raises(InvalidRegistration, match="has nothing that measurements adapt") as refused:
        registry.registration(None, "H100 SXM5", "nas-accuracy", [{"accuracy": 0.9}])
    assert refused.value.errors[0]["loc"] == ("task",)


def test_a_name_that_looks_like_a_catalogue_device_is_refused(tmp_path):
    registry = DeviceRegistry.open(Settings(home=tmp_path / "home"))
    with pytest.raises(DeviceConflict):
        registry.register(registry.registration(_spec(name="H100 SXM5"), None, "gemm", []), _no_model)
    assert registry.catalogue.get("lab-gpu") is None


def test_stored_rows_that_no_longer_apply_are_set_aside_with_count_and_reason(tmp_path):
    home = tmp_path / "home"
    registry = DeviceRegistry.open(Settings(home=home))
    (good,) = registry.registration(None, "H100 SXM5", "gemm", [LARGE_FP16_GEMM | {"runtime_ms": 2.0}]).rows
    stored = {
        "gemm": [good, good | {"m": "x"}, good | {"device_id": "gone-gpu"}],
        "no-such-task": [good],
    }
    (home / "measurements.json").write_text(json.dumps(stored))
    reread = DeviceRegistry.open(Settings(home=home))
    assert reread.measurements == {"gemm": [good]}
    (note,) = reread.notes("gemm")
    assert note.startswith("2 stored measurement(s) set aside to measurements.json.set-aside-")
    assert "(first: row 1, m: " in note
    assert "there is no task 'no-such-task'" in reread.notes("no-such-task")[0]
    (aside,) = home.glob("measurements.json.set-aside-*")
    reasons = [(entry["task"], entry["row"], entry["why"]) for entry in json.loads(aside.read_text())]
    assert [(task, row) for task, row, _ in reasons] == [("gemm", 1), ("gemm", 2), ("no-such-task", 0)]
    assert "'gone-gpu' is not in the catalogue" in reasons[1][2]
    assert json.loads((home / "measurements.json").read_text()) == {"gemm": [good]}


def _spec(**changes: object) -> DeviceSpec:
    return DeviceSpec.model_validate(LAB_GPU | changes)
