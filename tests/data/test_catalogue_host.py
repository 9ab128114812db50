"""This machine's CPU in the catalogue: ``cpu``, ``host`` and its model name resolve to it."""

import json
import shutil
import subprocess

import pytest
from preflight.data import catalogue as catalogue_module
from preflight.data.catalogue import Catalogue
from preflight.data.catalogue import host as catalogue_host
from preflight.data.collect.host import HostFacts
from preflight.data.errors import DeviceConflict, UnknownDevice
from preflight.service.cli import app
from typer.testing import CliRunner

from tests.data.test_catalogue import lab_gpu

#: A CPU the catalogue does not ship: 8 cores (16 threads) at 4 GHz with AVX2 and FMA.
ACME = HostFacts(
    cpu_name="Acme Zen 9 9999X",
    vendor="acme",
    logical_cores=16,
    physical_cores=8,
    clock_mhz=4000.0,
    llc_mb=64.0,
    memory_gb=64.0,
    flags=frozenset({"fma", "avx2"}),
)


@pytest.fixture
def fake_host(monkeypatch, tmp_path):
    """Make the catalogue read the facts given to the returned function instead of this machine's (its
    measured bandwidth cached in the cache of a home of the test's, never in XDG_CACHE_HOME)."""
    monkeypatch.setenv("PREFLIGHT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))

    def install(facts: HostFacts) -> None:
        monkeypatch.setattr(catalogue_host, "host_facts", lambda: facts)
        catalogue_module._builtin.cache_clear()

    yield install
    catalogue_module._builtin.cache_clear()  # the next test reads this machine again


def test_an_unknown_host_cpu_gets_a_sheet_derived_from_its_facts(fake_host, tmp_path):
    fake_host(ACME)
    catalogue = Catalogue.load(tmp_path / "devices.json")
    spec = catalogue.resolve("cpu")
    assert catalogue.resolve("host") == catalogue.resolve("Acme Zen 9 9999X") == spec
    assert (spec.id, spec.name, spec.kind, spec.vendor) == (
        "host-acme-zen-9-9999x", "Acme Zen 9 9999X (this host)", "cpu", "acme",
    )  # fmt: skip
    assert (spec.compute_units, spec.boost_clock_mhz, spec.llc_mb, spec.memory_gb) == (8, 4000.0, 64.0, 64.0)
    assert spec.peak_tflops["fp32"] == pytest.approx(32 * 4e9 * 8 / 1e12)  # 2 AVX2 FMA pipes a core
    assert spec.tdp_w is None  # nothing guessed
    cached = json.loads((tmp_path / "home" / "cache" / "host-bandwidth.json").read_text())
    assert spec.memory_bandwidth_gbs == cached["Acme Zen 9 9999X"] > 0.1  # measured, once
    assert not (tmp_path / "xdg").exists()  # every cache lives under PREFLIGHT_HOME


def test_the_host_bandwidth_is_measured_once_then_read_from_the_cache(fake_host, tmp_path):
    cache = tmp_path / "home" / "cache" / "host-bandwidth.json"
    cache.parent.mkdir(parents=True)
    cache.write_text(json.dumps({"Acme Zen 9 9999X": 123.0}))
    fake_host(ACME)
    assert Catalogue.load(tmp_path / "devices.json").resolve("cpu").memory_bandwidth_gbs == 123.0


def test_the_derived_sheet_is_neither_stored_nor_deleted_with_user_devices(fake_host, tmp_path):
    fake_host(ACME)
    user_file = tmp_path / "devices.json"
    catalogue = Catalogue.load(user_file)
    catalogue.register(lab_gpu())
    assert [device["id"] for device in json.loads(user_file.read_text())] == ["lab-gpu"]
    with pytest.raises(DeviceConflict, match="a catalogue entry cannot be deleted"):
        catalogue.unregister("host-acme-zen-9-9999x")
    with pytest.raises(DeviceConflict):
        catalogue.register(lab_gpu(id="lab-cpu", name="cpu"))


def test_a_shipped_cpu_model_takes_the_host_names(fake_host, tmp_path):
    fake_host(HostFacts(**vars(ACME) | {"cpu_name": "Intel(R) Xeon(R) Gold 6240 CPU @ 2.60GHz"}))
    catalogue = Catalogue.load(tmp_path / "devices.json")
    assert catalogue.resolve("cpu").id == catalogue.resolve("host").id == "intel-xeon-gold-6240"
    assert catalogue.resolve("cpu").compute_units == 18  # the spec sheet's, not the facts'
    assert len(catalogue) == len(catalogue_module._shipped())


def test_facts_no_spec_sheet_can_hold_leave_the_host_out(fake_host, tmp_path):
    fake_host(HostFacts(**vars(ACME) | {"clock_mhz": 0.5}))  # below any real clock
    with pytest.raises(UnknownDevice):
        Catalogue.load(tmp_path / "devices.json").resolve("cpu")


def test_devices_cpu_shows_the_faked_host(fake_host, tmp_path, monkeypatch):
    fake_host(ACME)
    monkeypatch.setenv("PREFLIGHT_HOME", str(tmp_path / "home"))
    result = CliRunner().invoke(app, ["devices", "cpu", "--json"])
    assert result.exit_code == 0, result.output
    assert [device["id"] for device in json.loads(result.stdout)] == ["host-acme-zen-9-9999x"]


def test_cpu_and_the_lscpu_model_name_resolve_on_this_machine(tmp_path):
    catalogue = Catalogue.load(tmp_path / "devices.json")
    spec = catalogue.resolve("cpu")
    assert spec.kind in ("cpu", "soc") and catalogue.resolve("host") == spec
    lscpu = shutil.which("lscpu")
    if lscpu is None:
        pytest.skip("no lscpu on this machine")
    lines = subprocess.run([lscpu], capture_output=True, text=True, env={"LC_ALL": "C"}).stdout.splitlines()
    model = next(line.partition(":")[2].strip() for line in lines if line.startswith("Model name:"))
    assert catalogue.resolve(model) == spec
