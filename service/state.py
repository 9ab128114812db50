"""What the running service holds: settings, the catalogue, a model per task, and user measurements.

Each task loads, fails and reports on its own (:class:`TaskStatus`): one damaged version or side
file never takes another task down. A task whose champion cannot load serves its newest loadable
version and says so. Models are replaced, never changed in place: a registration or a reload builds
the new model first and swaps it in under a lock, so a request in flight keeps the one it started with.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace

import pandas as pd
from preflight.data.catalogue import Catalogue, DeviceSpec
from preflight.data.errors import DataError, ModelUnavailable, NotTrained
from preflight.data.settings import Settings
from preflight.data.store import atomic_write_bytes, read_json_state, set_aside_damaged
from preflight.models import plausibility, tracking
from preflight.models.datasets import available_sources
from preflight.models.predictor import Predictor
from preflight.models.task import Task, all_tasks, get_task
from preflight.service.batching import Batcher

log = logging.getLogger("preflight.service")

#: Task states that answer predictions.
SERVING = ("ready", "fallback")


@dataclass(frozen=True)
class Champion:
    """A task's model as served: ``predictor`` adapted to the stored measurements, ``base`` as loaded."""

    predictor: Predictor
    base: Predictor
    info: tracking.ModelInfo
    fallback: str | None = None


@dataclass
class TaskStatus:
    """One task's state: loading, training, ready, fallback, failed or untrained, and why."""

    state: str
    detail: str = ""
    version: str | None = None


@dataclass
class ServiceState:
    settings: Settings
    catalogue: Catalogue
    measurements: dict[str, list[dict]]
    champions: dict[str, Champion] = field(default_factory=dict)
    tasks: dict[str, TaskStatus] = field(default_factory=dict)
    api_keys: tuple[str, ...] = ()
    started: bool = False
    _lock: threading.RLock = field(default_factory=threading.RLock, repr=False)
    _loading: threading.Lock = field(default_factory=threading.Lock, repr=False)  # one (re)load at a time
    batchers: dict[str, Batcher] = field(default_factory=dict, repr=False)  # concurrent requests merged
    _aliases: dict[str, str | None] = field(default_factory=dict, repr=False)
    _on_disk: tuple = field(default=(), repr=False)  # the state files as last read or written

    @classmethod
    def create(cls, settings: Settings) -> ServiceState:
        state = cls(settings, Catalogue.load(settings.devices_file), {}, api_keys=_api_keys(settings))
        state.measurements = state._stored_measurements()
        state._on_disk = state._files_signature()
        state.tasks = {t.name: TaskStatus("loading") for t in all_tasks()}
        return state

    def start(self, bootstrap: bool) -> None:
        """Load every task's model; with ``bootstrap``, train those with no version and data at hand
        (never over an existing registry: a task whose versions all fail stays failed)."""
        tasks = all_tasks()
        for task in tasks:
            self._starting(task, self.load)
        if bootstrap:
            untrained = [t for t in tasks if self.tasks[t.name].state == "untrained" and self._has_data(t)]
            for i, task in enumerate(untrained, 1):
                which = f"{task.name} ({i} of {len(untrained)})"
                log.info("training %s", which)
                began = time.monotonic()
                if self._starting(task, self._train):
                    log.info("trained %s in %.0f s", which, time.monotonic() - began)
        self.started = True

    def _starting(self, task: Task, step: Callable[[Task], object]) -> bool:
        """Run one start-up step of a task; whether it went through. A task must never take the others
        down: a failure marks it failed."""
        try:
            step(task)
        except Exception as exc:
            log.exception("task %s failed to start", task.name)
            self.tasks[task.name] = TaskStatus("failed", f"start-up failed ({type(exc).__name__})")
            return False
        return True

    def load(self, task: Task) -> bool:
        """(Re)load a task's model from the registry; whether the served version changed. The alias
        is recorded only once its model serves, so a failed reload is tried again at the next look."""
        with self._loading:
            try:
                serving = tracking.load_serving(self.settings, task.name)
            except NotTrained:
                self._failed(
                    task, "untrained", f"no version yet: run `preflight train {task.name}`{self._hint(task)}"
                )
                return False
            except ModelUnavailable as exc:
                self._failed(task, "failed", exc.why)
                return False
            except Exception as exc:  # e.g. a registry database that cannot be read at all
                log.exception("task %s: the registry could not be read", task.name)
                self._failed(task, "failed", f"the model registry could not be read ({type(exc).__name__})")
                return False
            if serving.fallback:
                log.warning("%s: %s", task.name, serving.fallback)
            loaded = Champion(serving.predictor, serving.predictor, serving.info, serving.fallback)
            with self._lock:  # adapted to the measurements as they are when it is swapped in
                old = self.champions.get(task.name)
                self.champions[task.name] = self._adapted(task, loaded)
            self._aliases[task.name] = serving.alias
            state = "fallback" if serving.fallback else "ready"
            self.tasks[task.name] = TaskStatus(state, serving.fallback or "", serving.info.version)
            return old is None or old.info.version != serving.info.version

    def _failed(self, task: Task, state: str, why: str) -> None:
        """Record why a task could not load; a model already loaded keeps answering."""
        old = self.champions.get(task.name)
        if old is None:
            self.tasks[task.name] = TaskStatus(state, why)
        else:
            status = self.tasks[task.name]
            self.tasks[task.name] = replace(
                status, detail=f"reload failed ({why}); v{old.info.version} still serves"
            )

    def reload(self, retry: bool = False) -> list[str]:
        """Reload the tasks whose ``champion`` alias moved (and, with ``retry``, those not serving
        their champion: failed, fallback or untrained); the tasks whose served version changed."""
        changed = []
        for task in all_tasks():
            status = self.tasks[task.name]
            if status.state in ("training", "loading"):
                continue
            try:
                moved = tracking.champion_version(self.settings, task.name) != self._aliases.get(task.name)
            except Exception:  # an unreadable registry: keep serving what is loaded
                log.exception("task %s: could not read its champion alias", task.name)
                continue
            if (moved or retry and status.state != "ready") and self.load(task):
                log.info("task %s now serves v%s", task.name, self.champions[task.name].info.version)
                changed.append(task.name)
        return changed

    def watch(self, stop: threading.Event) -> None:
        """Every ``reload_interval_s`` until ``stop`` is set: reload moved champions, and read the
        devices and measurements other workers registered."""
        interval = self.settings.reload_interval_s
        while interval > 0 and not stop.wait(interval):
            try:
                self.reload()
                self.sync()
            except Exception:  # the watcher must outlive any one failure
                log.exception("reloading failed; trying again in %g s", interval)

    def _train(self, task: Task) -> None:
        from preflight.models.training import train

        self.tasks[task.name] = TaskStatus("training", "no version yet: training one from the data at hand")
        train(task, self.settings, self.catalogue, paths=available_sources(task, self.settings), promote=True)
        self.load(task)

    def _hint(self, task: Task) -> str:
        """What an untrained task needs, when its sources are not at hand."""
        if self._has_data(task):
            return ""
        return (
            f"; its datasets are needed ({', '.join(task.sources)}): set PREFLIGHT_DATASETS to a folder "
            "laid out like shared/datasets (README, Data) and restart"
        )

    def _has_data(self, task: Task) -> bool:
        return bool(available_sources(task, self.settings))

    @property
    def ready(self) -> bool:
        """Start-up has finished and at least one task answers."""
        return self.started and any(s.state in SERVING for s in self.tasks.values())

    def task_states(self) -> dict[str, dict]:
        """Each task's state, served version and why, by task name (what /readyz shows)."""
        return {name: asdict(status) for name, status in sorted(self.tasks.items())}

    def champion(self, task: str) -> Champion:
        """The model to answer with; NotTrained or ModelUnavailable say why there is none."""
        champion = self.champions.get(task)
        if champion is not None:
            return champion
        status = self.tasks.get(task)
        if status is not None and status.state == "failed":
            raise ModelUnavailable(task, status.detail)
        raise NotTrained(task, self._hint(get_task(task)) if status is not None else "")

    # measurements and devices

    @property
    def measurements_file(self):
        return self.settings.home / "measurements.json"

    def _stored_measurements(self) -> dict[str, list[dict]]:
        stored: object = read_json_state(self.measurements_file, {})
        if isinstance(stored, dict) and all(
            isinstance(rows, list) and all(isinstance(r, dict) and "device_id" in r for r in rows)
            for rows in stored.values()
        ):
            return stored
        set_aside_damaged(self.measurements_file, "not a mapping of task to a list of device measurements")
        return {}

    @contextmanager
    def _shared_files(self) -> Iterator[None]:
        """Hold the home's state lock (other workers share its files), with the catalogue and the
        measurements brought up to date with the disk first."""
        self.settings.home.mkdir(parents=True, exist_ok=True)
        with self._lock, open(self.settings.home / ".state.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            self.sync()
            try:
                yield
            finally:
                self._on_disk = self._files_signature()

    def sync(self) -> None:
        """Re-read devices and measurements that another worker changed, and refit the adaptations."""
        with self._lock:
            signature = self._files_signature()
            if signature == self._on_disk:
                return
            self.catalogue = Catalogue.load(self.settings.devices_file)
            self.measurements = self._stored_measurements()
            self._readapt_all()
            self._on_disk = signature

    def _files_signature(self) -> tuple:
        files = (self.settings.devices_file, self.measurements_file)
        return tuple((f.stat().st_mtime_ns, f.stat().st_size) if f.exists() else None for f in files)

    def register_device(self, spec: DeviceSpec | None, task: Task | None, rows: list[dict]) -> None:
        """Register (or update) a spec sheet and/or add measurements, as one change: a refused
        measurement registers nothing, and an updated spec refits what it adapted."""
        with self._shared_files():
            earlier = next((d for d in self.catalogue if spec is not None and d.id == spec.id), None)
            if spec is not None:
                self.catalogue.register(spec)
            try:
                if task is not None and rows:
                    self._add_measurements(task, rows)
            except Exception:
                if spec is not None and earlier is None:
                    self.catalogue.unregister(spec.id)
                elif earlier is not None:
                    self.catalogue.register(earlier)
                raise
            if earlier is not None and earlier != spec:
                self._readapt_all()

    def _add_measurements(self, task: Task, rows: list[dict]) -> None:
        """Check the measurements, adapt the champion to them, then store them (nothing is stored
        if a check or the adaptation fails)."""
        champion = self.champion(task.name)  # measurements are checked against a model, and adapt it
        self._check_plausible(task, champion.base, rows)
        every = self.measurements.get(task.name, []) + rows
        self.champions[task.name] = self._adapted(task, champion, every, strict=True)
        self._store({**self.measurements, task.name: every})

    def remove_device(self, name: str) -> DeviceSpec:
        """Unregister a user's device (by its exact id, name or alias) and forget its measurements (the
        adaptations are refitted)."""
        with self._shared_files():
            device_id = self.catalogue.named(name).id
            spec = self.catalogue.unregister(device_id)
            kept = {
                t: [r for r in rows if r.get("device_id") != device_id]
                for t, rows in self.measurements.items()
            }
            self._store({t: rows for t, rows in kept.items() if rows})
            self._readapt_all()
        return spec

    def _readapt_all(self) -> None:
        """Every champion refitted from its base to the measurements and devices as they now are."""
        for name, champion in list(self.champions.items()):
            self.champions[name] = self._adapted(get_task(name), champion)

    def _store(self, measurements: dict[str, list[dict]]) -> None:
        atomic_write_bytes(self.measurements_file, json.dumps(measurements).encode())
        self.measurements = measurements

    def _check_plausible(self, task: Task, predictor: Predictor, rows: list[dict]) -> None:
        frame = pd.DataFrame.from_records(rows)
        problems = plausibility.implausible(
            predictor, task.featurize(frame, self.catalogue), task.target_frame(frame)
        )
        if problems:
            raise ImplausibleMeasurements(problems)

    def _adapted(
        self, task: Task, champion: Champion, rows: list[dict] | None = None, strict: bool = False
    ) -> Champion:
        """The champion's base refitted to ``rows`` (the stored measurements by default). A stored
        measurement that no longer applies is logged and skipped at start-up; ``strict`` raises."""
        rows = self.measurements.get(task.name, []) if rows is None else rows
        if not rows or task.device_column is None:
            return _unadapted(champion)
        frame = pd.DataFrame.from_records(rows)
        try:
            features = task.featurize(frame, self.catalogue)
            adapted = champion.base.adapted(features, task.target_frame(frame))
            return replace(
                champion, predictor=adapted, info=replace(champion.info, adaptation=adapted.adaptation)
            )
        except Exception as exc:  # a stored row that no longer applies must not take the task down
            if strict:
                raise
            log.error("stored measurements for %s were not applied: %s", task.name, exc)
            return _unadapted(champion)


def _unadapted(champion: Champion) -> Champion:
    """The champion as loaded, answering with no measurements."""
    return replace(champion, predictor=champion.base, info=replace(champion.info, adaptation=None))


def _api_keys(settings: Settings) -> tuple[str, ...]:
    """``PREFLIGHT_API_KEYS``, or the home's own key, generated on first start (owner-only file)."""
    if settings.api_keys:
        return tuple(settings.api_keys)
    path = settings.api_key_file
    settings.home.mkdir(parents=True, exist_ok=True)
    try:  # exclusive: of several workers starting at once, one writes the key and all read it
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        pass
    else:
        with os.fdopen(fd, "w") as fh:
            fh.write(secrets.token_urlsafe(32) + "\n")
        log.warning("generated an API key for routes that change state: see %s", path)
    for _ in range(100):  # another worker may be writing it right now
        key = path.read_text().strip()
        if key:
            return (key,)
        time.sleep(0.01)
    raise DataError(f"{path} is empty: delete it to have a key generated, or set PREFLIGHT_API_KEYS")


class ImplausibleMeasurements(DataError):
    """Measurements that contradict the device's roofline or the model by far: ``problems`` lists
    ``(row, target, why)``."""

    def __init__(self, problems: list[tuple[int, str, str]]) -> None:
        self.problems = problems
        super().__init__("; ".join(f"measurements[{i}]: {why}" for i, _, why in problems[:5]))
