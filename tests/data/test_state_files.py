"""Damaged state files under PREFLIGHT_HOME are set aside with one warning, never raised."""

import json
import logging
import re

import pytest
from preflight.data.catalogue import Catalogue, DeviceSpec
from preflight.data.store import TableStore, read_json_state

LAB_GPU = {"id": "lab-gpu", "name": "Lab GPU X1", "kind": "gpu", "peak_tflops": {"fp32": 20.0}}
#: Damage to a state file, as (content, what the warning calls it).
DAMAGED = {
    "empty": (b"", "empty"),
    "blank": (b" \n", "empty"),
    "truncated": (json.dumps([LAB_GPU]).encode()[:40], "truncated"),
    "not JSON": (b"lab-gpu: Lab GPU X1\n", "not valid JSON"),
    "not UTF-8": (b"[\xff]", "not valid JSON"),
}
WRONG_SHAPE = {
    "an object": {"lab-gpu": LAB_GPU},
    "a list of strings": ["lab-gpu"],
    "an invalid spec": [LAB_GPU | {"peak_tflops": {"fp32": -1}}],
    "an unknown field": [LAB_GPU | {"colour": "green"}],
    "a catalogue name": [LAB_GPU | {"aliases": ["NVIDIA H100 80GB HBM3"]}],
}


def damaged_copies(folder, name):
    return [
        p
        for p in folder.iterdir()
        if re.fullmatch(rf"{re.escape(name)}\.damaged-\d{{8}}T\d{{6}}Z(-\d+)?", p.name)
    ]


def assert_set_aside(caplog, path, content=None):
    """The file is gone, one copy of it (with the same content) lies beside it, and one warning names it."""
    assert not path.exists()
    [copy] = damaged_copies(path.parent, path.name)
    if content is not None:
        assert copy.read_bytes() == content
    [record] = [r for r in caplog.records if r.name == "preflight.state"]
    assert record.levelno == logging.WARNING
    assert str(path) in record.getMessage() and "\n" not in record.getMessage()


def test_a_missing_file_gives_the_default(tmp_path, caplog):
    assert read_json_state(tmp_path / "measurements.json", {"rows": []}) == {"rows": []}
    assert not caplog.records


def test_a_sound_file_gives_its_json(tmp_path):
    path = tmp_path / "measurements.json"
    path.write_text('{"gemm": [1, 2]}')
    assert read_json_state(path, {}) == {"gemm": [1, 2]}
    assert path.exists()


@pytest.mark.parametrize("damage", list(DAMAGED))
def test_a_damaged_file_gives_the_default_and_is_set_aside(tmp_path, caplog, damage):
    path = tmp_path / "measurements.json"
    content, problem = DAMAGED[damage]
    path.write_bytes(content)
    assert read_json_state(path, {}) == {}
    assert_set_aside(caplog, path, content)
    assert f"({problem}" in caplog.records[0].getMessage()


def test_an_unreadable_file_gives_the_default_and_is_set_aside(tmp_path, caplog):
    path = tmp_path / "measurements.json"
    path.mkdir()  # reading it raises IsADirectoryError, whoever runs the tests
    assert read_json_state(path, []) == []
    assert_set_aside(caplog, path)
    assert "unreadable" in caplog.records[0].getMessage()


def test_a_file_damaged_twice_keeps_both_copies(tmp_path, caplog):
    path = tmp_path / "measurements.json"
    for content in (b"{", b"["):
        path.write_bytes(content)
        read_json_state(path, {})
    assert sorted(p.read_bytes() for p in damaged_copies(tmp_path, path.name)) == [b"[", b"{"]


@pytest.mark.parametrize("damage", list(DAMAGED))
def test_a_damaged_devices_file_leaves_the_shipped_catalogue(tmp_path, caplog, damage):
    user_file = tmp_path / "devices.json"
    content, _ = DAMAGED[damage]
    user_file.write_bytes(content)
    catalogue = Catalogue.load(user_file)
    assert {spec.id for spec in catalogue} == {spec.id for spec in Catalogue.shipped()}
    assert_set_aside(caplog, user_file, content)


def test_an_unreadable_devices_file_leaves_the_shipped_catalogue(tmp_path, caplog):
    user_file = tmp_path / "devices.json"
    user_file.mkdir()
    assert len(Catalogue.load(user_file)) == len(Catalogue.shipped())
    assert_set_aside(caplog, user_file)


@pytest.mark.parametrize("shape", list(WRONG_SHAPE))
def test_a_devices_file_of_the_wrong_shape_leaves_the_shipped_catalogue(tmp_path, caplog, shape):
    user_file = tmp_path / "devices.json"
    content = json.dumps(WRONG_SHAPE[shape]).encode()
    user_file.write_bytes(content)
    catalogue = Catalogue.load(user_file)
    assert "lab-gpu" not in {spec.id for spec in catalogue}
    assert catalogue.resolve("NVIDIA H100 80GB HBM3").id == "nvidia-h100-sxm5-80gb"
    assert_set_aside(caplog, user_file, content)


def test_devices_registered_after_damage_persist(tmp_path):
    user_file = tmp_path / "devices.json"
    user_file.write_bytes(b"[{")
    Catalogue.load(user_file).register(DeviceSpec.model_validate(LAB_GPU))
    assert Catalogue.load(user_file).resolve("Lab GPU X1").id == "lab-gpu"


def test_a_damaged_table_manifest_is_set_aside(tmp_path, caplog):
    store = TableStore(tmp_path / "tables")
    store.root.mkdir()
    store.manifest_path.write_bytes(b'{"deepbench": {"rows": 3')
    assert store.manifest() == {}
    assert_set_aside(caplog, store.manifest_path)
