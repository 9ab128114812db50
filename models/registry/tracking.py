"""MLflow: one experiment per task, runs with metrics and plots, ``preflight.<task>`` versions, ``@champion``.

The promotion gate: a new version takes the ``champion`` alias when there is none, when asked
(``--promote``), or when its primary metric is no worse than the champion's on the same data
(checksum) and split. Versions trained on other data are not comparable, so they wait for ``--promote``.

A run's ``predictor`` folder is an MLflow model (``pyfunc.py``) that the service still reads natively; a
run records the training table it learned from (digest, schema and size, never its rows), the git
commit of the checkout and a note that says what it is.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import subprocess
import tempfile
import time
import warnings
from contextlib import closing
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pandas as pd
from preflight.data.errors import ModelStateError, ModelUnavailable, NotTrained, UnknownVersion
from preflight.data.settings import Settings
from preflight.models import pyfunc
from preflight.models.core import artifacts
from preflight.models.core.metrics import higher_is_better
from preflight.models.core.predictor import Predictor
from preflight.models.core.task import Task
from preflight.models.registry import relocation

CHAMPION = "champion"

log = logging.getLogger("preflight.state")


class RegistryLost(ModelStateError):
    """The home's registry database is damaged, or missing or empty while model artifacts exist: a
    registry lost or truncated, never one to train anew over (that would orphan the artifacts and the
    old champions)."""


@dataclass
class ModelInfo:
    name: str
    version: str
    run_id: str
    family: str
    split: str = ""  # the split its metrics were cross-validated on: ``grouped-cv:shape``
    adaptation: str | None = None  # the measurements the served predictor is adapted to (a digest)


@dataclass
class Serving:
    """The version a service answers with: the champion, or the newest loadable version when the
    champion cannot load (``fallback`` says why)."""

    predictor: Predictor
    info: ModelInfo
    alias: str | None  # the version the champion alias named when it was read
    fallback: str | None = None


@dataclass
class TrainingTable:
    """The rows a run learned from, logged as its input: name, digest, schema and size (not the rows)."""

    rows: pd.DataFrame
    name: str
    location: str  # the URI of its source files (their common folder, when several)
    digest: str


@dataclass
class Promotion:
    info: ModelInfo
    promoted: bool
    reason: str


def model_name(task: str) -> str:
    return f"preflight.{task}"


def client(settings: Settings):
    """An MLflow client on the configured tracking URI (SQLite under PREFLIGHT_HOME by default).

    No global MLflow state is touched: ``mlflow.set_tracking_uri`` would write the URI into the
    environment and pin every later Settings to the first home. MLflow and the home are set up once
    (:func:`_configure_mlflow`, :func:`_prepare_home`); a client is then only a client.
    """
    _configure_mlflow()
    uri = settings.tracking_uri
    _prepare_home(settings.home.resolve(), uri, own_store=not os.environ.get("MLFLOW_TRACKING_URI"))
    from mlflow import MlflowClient

    return MlflowClient(tracking_uri=uri, registry_uri=uri)


@cache
def _configure_mlflow() -> None:
    """MLflow's own switches, which it reads from the environment only (once per process; a value
    already set wins): no telemetry, no progress bars in the service log."""
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")


@cache
def _prepare_home(home: Path, uri: str, own_store: bool) -> None:
    """The home's folder, and for its own SQLite store (not a team's) the lost-registry check and
    relocation; once per home and URI (a failed check is made again by the next client)."""
    home.mkdir(parents=True, exist_ok=True)
    if own_store:
        try:
            _refuse_lost_registry(home)
            relocation.relocate(home)
        except sqlite3.DatabaseError as exc:  # not a database, or a damaged one
            log.error("the registry %s could not be read: %s", home / "mlflow.db", exc)
            raise RegistryLost(
                f"the model registry could not be read (mlflow.db in PREFLIGHT_HOME: {exc}): restore it "
                "from a backup, or move it and the artifacts folder aside to start afresh"
            ) from None


def _refuse_lost_registry(home: Path) -> None:
    """RegistryLost when ``mlflow.db`` is missing or holds no experiment while run folders exist under
    ``artifacts``: MLflow would start an empty registry, and every task would be trained anew over it."""
    artifacts = home / "artifacts"
    runs = sum(1 for p in artifacts.iterdir() if p.is_dir()) if artifacts.is_dir() else 0
    lost = _lost(home / "mlflow.db") if runs else None
    if lost is None:
        return
    log.error(
        "the registry %s is %s while %d run folders exist in %s", home / "mlflow.db", lost, runs, artifacts
    )
    raise RegistryLost(
        f"the model registry (mlflow.db in PREFLIGHT_HOME) is {lost} while {runs} artifact folder(s) of "
        "trained models exist in PREFLIGHT_HOME/artifacts; nothing is trained over it: restore mlflow.db "
        "from a backup, or remove the artifacts folder to start over (every task is then trained anew)"
    )


def _lost(database: Path) -> str | None:
    """How a registry database is lost (missing, empty, holding no experiment), or None: it holds
    experiments, or it is not a database at all (MLflow then says it cannot be read)."""
    if not database.exists():
        return "missing"
    if database.stat().st_size == 0:
        return "empty (0 bytes)"
    try:
        with closing(sqlite3.connect(f"{database.resolve().as_uri()}?mode=ro", uri=True)) as db:
            tables = db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='experiments'")
            if tables.fetchone() is None:
                return "empty (no tables)"
            found = db.execute("SELECT count(*) FROM experiments WHERE name != 'Default'").fetchone()[0]
    except sqlite3.DatabaseError:
        return None
    return "empty (no experiments)" if found == 0 else None


def _experiment(mlflow_client, settings: Settings, task: str) -> str:
    found = mlflow_client.get_experiment_by_name(task)
    if found is not None:
        return found.experiment_id
    location = settings.artifact_root or relocation.artifact_root(settings.home)
    return mlflow_client.create_experiment(task, artifact_location=location)


def log_run(
    settings: Settings,
    task: Task,
    *,
    params: dict,
    metrics: dict,
    figures: dict,
    tags: dict,
    predictor: Predictor | None = None,
    report: dict | None = None,
    run_name: str | None = None,
    note: str | None = None,
    table: TrainingTable | None = None,
) -> str:
    """Log one run (training or evaluation) and return its id; ``note`` is its description."""
    from mlflow.entities import Metric, Param

    mlflow_client = client(settings)
    tags = tags | _source_tags(note)
    experiment = _experiment(mlflow_client, settings, task.name)
    run_id = mlflow_client.create_run(experiment, tags=tags, run_name=run_name).info.run_id
    now = int(time.time() * 1000)
    mlflow_client.log_batch(
        run_id,
        params=[Param(k, str(v)) for k, v in params.items()],
        metrics=[Metric(k, v, now, 0) for k, v in metrics.items() if v == v],
    )  # NaN-free
    if table is not None:
        _log_table(mlflow_client, run_id, table)
    for name, fig in figures.items():
        mlflow_client.log_figure(run_id, fig, f"plots/{name}.png")
    if report is not None:
        mlflow_client.log_dict(run_id, report, "report.json")
    if predictor is not None:
        with tempfile.TemporaryDirectory() as tmp:
            model = Path(tmp) / "predictor"
            pyfunc.save(predictor, model, table.rows if table is not None else None)
            mlflow_client.log_artifacts(run_id, str(model), artifact_path="predictor")
    mlflow_client.set_terminated(run_id)
    return run_id


def _source_tags(note: str | None) -> dict[str, str]:
    """MLflow's tags for the code's git commit and the run's description, where known."""
    from mlflow.utils.mlflow_tags import MLFLOW_GIT_COMMIT, MLFLOW_RUN_NOTE

    found = {MLFLOW_GIT_COMMIT: git_commit(), MLFLOW_RUN_NOTE: note}
    return {key: value for key, value in found.items() if value}


def git_commit() -> str | None:
    """The commit of the git checkout this package runs from; None when it is no checkout (or is an
    installed copy inside someone else's repository), or git cannot tell."""
    here = Path(__file__).resolve()
    try:
        tracked = subprocess.run(
            ["git", "ls-files", "--error-unmatch", here.name],
            cwd=here.parent,
            capture_output=True,
            timeout=10,
        )
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=here.parent, capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if tracked.returncode or head.returncode:
        return None
    return head.stdout.strip() or None


def _log_table(mlflow_client, run_id: str, table: TrainingTable) -> None:
    """The training table as the run's ``training`` input."""
    from mlflow.data.dataset_source_registry import get_dataset_source_from_json
    from mlflow.data.pandas_dataset import from_pandas
    from mlflow.entities import Dataset, DatasetInput, InputTag
    from mlflow.utils.mlflow_tags import MLFLOW_DATASET_CONTEXT

    source = get_dataset_source_from_json(json.dumps({"uri": table.location}), source_type="local")
    dataset = from_pandas(table.rows, source=source, name=table.name, digest=table.digest)
    with warnings.catch_warnings():  # a hint for model signatures, not for a table's schema
        warnings.filterwarnings("ignore", "Hint: Inferred schema contains integer", UserWarning)
        entity = Dataset(**dataset.to_dict())
    context = InputTag(MLFLOW_DATASET_CONTEXT, "training")
    mlflow_client.log_inputs(run_id, datasets=[DatasetInput(entity, tags=[context])])


def register(
    settings: Settings,
    task: Task,
    run_id: str,
    family: str,
    metric: float,
    data_sha: str,
    split: str,
    promote: bool,
    description: str | None = None,
) -> Promotion:
    """Create a model version from a run's predictor (``description`` says what it is) and apply the
    champion gate."""
    from mlflow.exceptions import MlflowException

    mlflow_client = client(settings)
    name = model_name(task.name)
    try:
        mlflow_client.get_registered_model(name)
    except MlflowException:
        mlflow_client.create_registered_model(name, description=f"preflight task {task.name}")
    source = f"{mlflow_client.get_run(run_id).info.artifact_uri}/predictor"
    tags = {
        "family": family,
        "metric": task.metric,
        "metric_value": repr(metric),
        "data_sha": data_sha,
        "split": split,
    }
    version = mlflow_client.create_model_version(
        name, source=source, run_id=run_id, tags=tags, description=description
    )
    promoted, reason = _gate(
        mlflow_client, name, metric, higher_is_better(task.metric), data_sha, split, promote
    )
    if promoted:
        mlflow_client.set_registered_model_alias(name, CHAMPION, version.version)
    return Promotion(ModelInfo(name, str(version.version), run_id, family, split), promoted, reason)


def _gate(
    mlflow_client, name: str, metric: float, higher_is_better: bool, data_sha: str, split: str, promote: bool
) -> tuple[bool, str]:
    from mlflow.exceptions import MlflowException

    if promote:
        return True, "promoted on request (--promote)"
    try:
        champion = mlflow_client.get_model_version_by_alias(name, CHAMPION)
    except MlflowException:
        return True, f"{name} had no champion yet"
    if champion.tags.get("data_sha") != data_sha or champion.tags.get("split") != split:
        return (
            False,
            f"champion v{champion.version} was scored on other data or split; use --promote to replace it",
        )
    old = float(champion.tags["metric_value"])
    if (metric >= old) if higher_is_better else (metric <= old):
        return True, f"{metric:.4g} is no worse than champion v{champion.version}'s {old:.4g}"
    return False, f"{metric:.4g} is worse than champion v{champion.version}'s {old:.4g}"


def load_champion(settings: Settings, task: str) -> tuple[Predictor, ModelInfo]:
    """The predictor to answer with (see :func:`load_serving`) and its version."""
    serving = load_serving(settings, task)
    if serving.fallback:
        log.warning("%s: %s", task, serving.fallback)
    return serving.predictor, serving.info


def load_serving(settings: Settings, task: str) -> Serving:
    """The champion, or else the newest version that loads (the last good one).

    NotTrained when the task has no version at all; ModelUnavailable when none loads. Why a version
    failed goes to the log, with paths; the error and ``fallback`` say it without them."""
    from mlflow.exceptions import MlflowException

    mlflow_client = client(settings)
    name = model_name(task)
    try:  # the alias first: a version promoted meanwhile is then among those listed
        champion = _alias_version(mlflow_client, name)
        versions = _newest_first(mlflow_client, name)
    except MlflowException as exc:
        log.error("%s: the registry could not be read: %s", task, exc)
        raise ModelUnavailable(task, "the model registry could not be read") from None
    if not versions:
        raise NotTrained(task)
    # the champion first, then newest first
    order = sorted(versions, key=lambda v: str(v.version) != champion)
    failures = []
    for version in order:
        try:
            predictor = _load_version(mlflow_client, version)
        except Exception as exc:  # any damage to one version's files: try the next one
            log.error("%s v%s could not be loaded: %s: %s", task, version.version, type(exc).__name__, exc)
            failures.append(f"v{version.version}: {_why(exc)}")
            continue
        info = _info(name, version)
        fallback = None
        if str(version.version) != champion:
            lost = (
                "no champion alias"
                if champion is None
                else f"champion v{champion} failed to load ({failures[0]})"
                if any(str(v.version) == champion for v in versions)
                else f"the champion alias names v{champion}, which does not exist"
            )
            fallback = f"{lost}; serving v{version.version}, the newest version that loads"
        return Serving(predictor, info, champion, fallback)
    raise ModelUnavailable(task, f"no version of {name} could be loaded ({'; '.join(failures[:3])})")


def champion_version(settings: Settings, task: str) -> str | None:
    """The version the ``champion`` alias points at, or None (no alias, or one that dangles)."""
    return _alias_version(client(settings), model_name(task))


def _newest_first(mlflow_client, name: str) -> list:
    """A registered model's versions, the newest first."""
    found = mlflow_client.search_model_versions(f"name='{name}'")
    return sorted(found, key=lambda v: int(v.version), reverse=True)


def _alias_version(mlflow_client, name: str) -> str | None:
    from mlflow.exceptions import MlflowException

    try:
        return str(mlflow_client.get_model_version_by_alias(name, CHAMPION).version)
    except MlflowException as exc:
        if "RESOURCE_DOES_NOT_EXIST" in str(exc.error_code) or "not found" in str(exc).lower():
            return None
        raise


def load_version(settings: Settings, task: str, version: str) -> tuple[Predictor, ModelInfo]:
    """One version of a task's model; ``UnknownVersion`` (listing the registered ones) when it has none
    of that number."""
    from mlflow.exceptions import MlflowException

    mlflow_client = client(settings)
    name = model_name(task)
    try:
        found = mlflow_client.get_model_version(name, version)
    except MlflowException:
        known = [str(v["version"]) for v in versions(settings, task)]
        if not known:
            raise NotTrained(task) from None
        raise UnknownVersion(task, version, known) from None
    try:
        return _load_version(mlflow_client, found), _info(name, found)
    except Exception as exc:  # any damage to the version's files, as load_serving says it
        log.error("%s v%s could not be loaded: %s: %s", task, version, type(exc).__name__, exc)
        raise ModelUnavailable(task, f"v{version}: {_why(exc)}") from None


#: What :func:`versions` says of each version.
VERSION_FIELDS = (
    "version", "champion", "family", "split", "metric", "metric_value", "created", "run_id", "description"
)  # fmt: skip


def versions(settings: Settings, task: str) -> list[dict]:
    """The task's registered versions, newest first: family, split, primary metric, whether it is the
    champion, when it was made, its run and description."""
    mlflow_client = client(settings)
    name = model_name(task)
    champion = _alias_version(mlflow_client, name)
    found = _newest_first(mlflow_client, name)
    return [
        {
            "version": str(v.version),
            "champion": str(v.version) == champion,
            "family": v.tags.get("family", ""),
            "split": v.tags.get("split", ""),
            "metric": v.tags.get("metric", ""),
            "metric_value": float(v.tags.get("metric_value", "nan")),
            "created": pd.Timestamp(v.creation_timestamp, unit="ms", tz="UTC"),
            "run_id": v.run_id,
            "description": v.description or "",
        }
        for v in found
    ]


def source_files(settings: Settings, run_id: str) -> dict[str, Path]:
    """The files a training run learned from, by source (those that are still there)."""
    recorded = json.loads(client(settings).get_run(run_id).data.params.get("source_files", "{}"))
    return {source: Path(path) for source, path in recorded.items() if Path(path).exists()}


def log_report(settings: Settings, run_id: str, files: list[Path]) -> None:
    """A report's files as artifacts (``report/``) of the run that made the version. The run's artifact
    store is looked up afresh: MLflow caches it by run id, and a copied home shares its run ids."""
    from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository

    repository = get_artifact_repository(client(settings).get_run(run_id).info.artifact_uri)
    for file in files:
        repository.log_artifact(str(file), artifact_path="report")


def _info(name: str, version) -> ModelInfo:
    return ModelInfo(
        name,
        str(version.version),
        version.run_id,
        version.tags.get("family", ""),
        version.tags.get("split", ""),
    )


def _load_version(mlflow_client, version) -> Predictor:
    with tempfile.TemporaryDirectory(prefix="preflight-") as tmp:  # the predictor is read into memory
        return artifacts.load(Path(mlflow_client.download_artifacts(version.run_id, "predictor", tmp)))


def _why(exc: Exception) -> str:
    """A failure in words that name no path."""
    if isinstance(exc, OSError):
        return "its artifacts are missing or unreadable"
    return f"its artifacts are damaged ({type(exc).__name__})"
