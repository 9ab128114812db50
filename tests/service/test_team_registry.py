"""A team registry: MLflow's tracking store on PostgreSQL (``MLFLOW_TRACKING_URI``), shared by a
trainer and a service that keep separate homes. The test starts its own PostgreSQL on 127.0.0.1."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from preflight.data.catalogue import Catalogue
from preflight.data.settings import Settings
from preflight.models.core.task import get_task
from preflight.models.core.training import train
from preflight.service.app import create_app

from tests.conftest import free_port
from tests.samples import sample_paths

ITEM = {"m": 1024, "n": 1024, "k": 1024, "dtype": "fp32", "device": "NVIDIA H100 80GB HBM3"}
SERVER_BINARIES = ("initdb", "pg_ctl")


def postgres_bin() -> Path | None:
    """The folder with PostgreSQL's server binaries: beside ``pg_ctl`` on PATH, else Debian's."""
    on_path = shutil.which("pg_ctl")
    candidates = ([str(Path(on_path).resolve().parent)] if on_path else []) + sorted(
        glob.glob("/usr/lib/postgresql/*/bin"), reverse=True
    )
    for folder in map(Path, candidates):
        if all((folder / name).exists() for name in SERVER_BINARIES):
            return folder
    return None


def server_user() -> str | None:
    """initdb refuses root: as root, the cluster runs as ``postgres`` (skipped where there is none)."""
    if os.geteuid() != 0:
        return None
    if shutil.which("runuser") is None:
        pytest.skip("running as root without runuser: cannot start PostgreSQL as another user")
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        pytest.skip("running as root and there is no `postgres` user to run PostgreSQL as")
    return "postgres"


@pytest.fixture
def postgres() -> Iterator[str]:
    """A throw-away PostgreSQL cluster (trust auth, no fsync) on 127.0.0.1; its SQLAlchemy URI."""
    folder = postgres_bin()
    if folder is None:
        pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) not found: apt-get install postgresql")
    pytest.importorskip("psycopg2", reason="psycopg2 missing: pip install -e '.[dev]'")
    user = server_user()
    base = Path(tempfile.mkdtemp(prefix="preflight-pg-"))  # not under tmp_path, which `postgres` cannot enter
    data, port = base / "data", free_port()
    if user:
        shutil.chown(base, user=user)

    def run(*command: str, check: bool = True) -> None:
        prefix = ["runuser", "-u", user, "--"] if user else []
        done = subprocess.run([*prefix, *command], capture_output=True, text=True, timeout=60)
        if check and done.returncode != 0:
            raise RuntimeError(f"{command[0]} failed ({done.returncode}): {done.stderr}{done.stdout}")

    cluster = ["-D", str(data), "-U", "preflight", "--auth=trust", "--locale=C", "-E", "UTF8", "--no-sync"]
    try:
        run(str(folder / "initdb"), *cluster)
        options = f"-h 127.0.0.1 -p {port} -k {base} -F"
        run(str(folder / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(base / "log"), "-w", "start")
        yield f"postgresql+psycopg2://preflight@127.0.0.1:{port}/postgres"
    finally:
        run(str(folder / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop", check=False)
        shutil.rmtree(base, ignore_errors=True)


def test_a_team_registry_on_postgresql_serves_the_champion_trained_elsewhere(postgres, tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", postgres)
    shared = (tmp_path / "team-artifacts").as_uri()
    trainer = Settings(home=tmp_path / "trainer", artifact_root=shared)
    task = get_task("gemm")
    paths = sample_paths("gemm", tmp_path / "data")
    trained = train(task, trainer, Catalogue.load(trainer.devices_file), paths=paths, promote=True)
    assert trained.promotion.promoted

    # the service has a home of its own: the champion comes from the shared registry and artifact store
    with TestClient(create_app(Settings(home=tmp_path / "service", artifact_root=shared))) as client:
        response = client.post("/v1/gemm/predict", json={"items": [ITEM]})
    assert response.status_code == 200, response.text
    body = response.json()
    model = body["model"]
    assert model["name"] == "preflight.gemm" and model["version"] == trained.promotion.info.version
    assert body["predictions"][0]["runtime_ms"]["value"] > 0
    assert not (tmp_path / "service" / "mlflow.db").exists()
    assert (tmp_path / "team-artifacts").is_dir() and not (tmp_path / "trainer" / "artifacts").exists()
