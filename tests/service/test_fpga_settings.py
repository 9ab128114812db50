"""FPGA items are validated against the settings the app was created with, not the environment's: a
kernel is found by name in the app's own datasets folder."""

from pathlib import Path

import pytest
from preflight.data.catalogue import Catalogue
from preflight.data.settings import Settings
from preflight.models.core.task import get_task
from preflight.models.core.training import train

from tests.client import api_client
from tests.fpga import write_hlsyn
from tests.samples import sample_paths

PREDICT = ("/v1/fpga/predict", {"items": [{"kernel": "k-gemm", "pragmas": {"__PARA__L2": 4}}]})
EXPLORE = ("/v1/fpga/explore", {"kernel": "k-gemm", "designs": [{}, {"__PARA__L2": 4}]})


@pytest.fixture(scope="module")
def fpga_home(tmp_path_factory) -> Path:
    """A home with an FPGA champion only, trained on the small sample designs."""
    home = tmp_path_factory.mktemp("fpga") / "home"
    settings = Settings(home=home, datasets=None, api_keys=[])
    paths = sample_paths("fpga", home.parent / "samples")
    train(get_task("fpga"), settings, Catalogue.load(settings.devices_file), paths=paths)
    return home


@pytest.fixture
def graphs(tmp_path) -> Path:
    """A datasets folder with the sample kernels' graphs (k-gemm among them)."""
    write_hlsyn(tmp_path / "datasets", designs_per_kernel=0)
    return tmp_path / "datasets"


@pytest.mark.parametrize(("path", "body"), [PREDICT, EXPLORE])
def test_the_apps_own_datasets_resolve_a_kernel_the_environments_lack(
    fpga_home, graphs, tmp_path, monkeypatch, path, body
):
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.setenv("PREFLIGHT_DATASETS", str(tmp_path / "elsewhere"))  # no graphs there
    with api_client(fpga_home, datasets=graphs) as client:
        answer = client.post(path, json=body)
    assert answer.status_code == 200, answer.text


@pytest.mark.parametrize(("path", "body"), [PREDICT, EXPLORE])
def test_an_app_without_datasets_ignores_the_environments(fpga_home, graphs, monkeypatch, path, body):
    monkeypatch.setenv("PREFLIGHT_DATASETS", str(graphs))
    with api_client(fpga_home, datasets=None) as client:
        answer = client.post(path, json=body)
    assert answer.status_code == 422
    assert "no program graph is known for 'k-gemm'; known kernels: none" in answer.text
