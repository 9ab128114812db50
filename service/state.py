"""What the running service holds: settings, the catalogue, a model per task, and user measurements.

Each task loads, fails and reports on its own (:class:`TaskStatus`): one damaged version or side
file never takes another task down. A task whose champion cannot load serves its newest loadable
version and says so. Models are replaced, never changed in place: a registration or a reload builds
the new model first and swaps it in under a lock, so a request in flight keeps the one it started with.

Devices and measurements live in ``HOME/devices.json`` and ``HOME/measurements.json``, and the answers
of registrations sent with an ``Idempotency-Key`` in ``HOME/idempotency.json``. Every change of them
is written as one (``data/store.write_together``: a journal first, completed under the home's lock,
at start-up or by the next writer, when a crash interrupted it), under a lock that other workers
share. A stored measurement that no longer applies (malformed, or of a task or device that is gone)
is set aside into a side file when read, named in the log and in its task's status; the others keep
adapting.
"""

from __future__ import annotations

import fcntl
import json
import logging
import math
import os
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import get_args

import pandas as pd
from preflight.data.catalogue import Catalogue, DeviceSpec
from preflight.data.errors import (
    DataError,
    DeviceConflict,
    ModelUnavailable,
    NotReadyYet,
    NotTrained,
    PreflightError,
    UnknownTask,
)
from preflight.data.settings import Settings
from preflight.data.store import (
    JOURNAL,
    TableStore,
    atomic_write_bytes,
    finish_journal,
    read_json_state,
    set_aside_damaged,
    set_aside_entries,
    write_together,
)
from preflight.models import plausibility, tracking
from preflight.models.datasets import available_sources
from preflight.models.predictor import Predictor
from preflight.models.task import Task, all_tasks, get_task
from preflight.service.batching import Batcher
from preflight.service.schemas import DevicePublic
from pydantic import BaseModel, ValidationError

log = logging.getLogger("preflight.service")

#: Task states that answer predictions.
SERVING = ("ready", "fallback")
#: The product's lead task: loaded and trained first at start-up, so that it answers soonest.
LEAD_TASK = "gemm"
#: Seconds a client is told to wait (``Retry-After``) before asking again for a task still starting.
RETRY_AFTER_S = 10
#: Registrations whose answers are remembered by Idempotency-Key (the oldest forgotten first).
MAX_IDEMPOTENCY_KEYS = 1_000


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
    # why a task's stored measurements were set aside, or could not adapt its model (in its status)
    _set_aside_notes: dict[str, str] = field(default_factory=dict, repr=False)
    _unapplied_notes: dict[str, str] = field(default_factory=dict, repr=False)

    @classmethod
    def create(cls, settings: Settings) -> ServiceState:
        """The state of a home: its devices and measurements read (an interrupted change completed first)."""
        state = cls(settings, Catalogue.load(), {}, api_keys=_api_keys(settings))  # the home's devices: sync
        state.tasks = {
            t.name: TaskStatus("loading", "loading its model from the registry") for t in all_tasks()
        }
        state.sync()
        return state

    def start(self, bootstrap: bool) -> None:
        """Load every task's model, :data:`LEAD_TASK` first; with ``bootstrap``, train those with no
        version and data at hand, in the same order (never over an existing registry: a task whose
        versions all fail stays failed). Each task answers as soon as its own model has loaded."""
        tasks = sorted(all_tasks(), key=lambda task: task.name != LEAD_TASK)
        for task in tasks:
            self._starting(task, self.load)
        if bootstrap:
            self._bootstrap(
                [t for t in tasks if self.tasks[t.name].state == "untrained" and self._has_data(t)]
            )
        self.started = True

    def _bootstrap(self, untrained: list[Task]) -> None:
        """Train each task in turn. All are marked training at once, so that until its own model loads
        each answers 503 with ``Retry-After`` rather than "run preflight train"."""
        for i, task in enumerate(untrained, 1):
            self.tasks[task.name] = TaskStatus(
                "training", f"queued to train its first version ({i} of {len(untrained)})"
            )
        for i, task in enumerate(untrained, 1):
            which = f"{task.name} ({i} of {len(untrained)})"
            log.info("training %s", which)
            self.tasks[task.name] = TaskStatus(
                "training", f"training its first version from the data at hand ({i} of {len(untrained)})"
            )
            began = time.monotonic()
            if self._starting(task, self._train):
                log.info("trained %s in %.0f s", which, time.monotonic() - began)

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
            except tracking.RegistryLost as exc:
                self._failed(task, "failed", str(exc))
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

        # the gate promotes a first version; one another trainer registered meanwhile is kept
        train(task, self.settings, self.catalogue, paths=available_sources(task, self.settings))
        self.load(task)

    def _hint(self, task: Task) -> str:
        """What an untrained task needs, when its sources are not at hand."""
        if self._has_data(task):
            return ""
        return (
            f"; its datasets are needed ({', '.join(task.sources)}): download them (the README's Data "
            "section names each file's path and upstream), set PREFLIGHT_DATASETS to their folder and restart"
        )

    def _has_data(self, task: Task) -> bool:
        return bool(available_sources(task, self.settings))

    @property
    def ready(self) -> bool:
        """At least one task answers and none is still loading from the registry; others may still be
        training (see :meth:`training`)."""
        states = [status.state for status in self.tasks.values()]
        return any(state in SERVING for state in states) and "loading" not in states

    def training(self) -> list[str]:
        """The tasks still training their first version at start-up, by name."""
        return sorted(name for name, status in self.tasks.items() if status.state == "training")

    def task_states(self) -> dict[str, dict]:
        """Each task's state, served version and why, by task name (what /readyz shows), with what
        became of its stored measurements where some were set aside or could not adapt its model."""
        states = {}
        for name, status in sorted(self.tasks.items()):
            notes = (status.detail, self._set_aside_notes.get(name), self._unapplied_notes.get(name))
            states[name] = asdict(status) | {"detail": "; ".join(note for note in notes if note)}
        return states

    def champion(self, task: str) -> Champion:
        """The model to answer with; NotReadyYet, NotTrained or ModelUnavailable say why there is none."""
        champion = self.champions.get(task)
        if champion is not None:
            return champion
        status = self.tasks.get(task)
        if status is not None and status.state in ("loading", "training"):
            raise NotReadyYet(task, status.detail, RETRY_AFTER_S)
        if status is not None and status.state == "failed":
            raise ModelUnavailable(task, status.detail)
        raise NotTrained(task, self._hint(get_task(task)) if status is not None else "")

    # measurements and devices

    @property
    def measurements_file(self) -> Path:
        return self.settings.home / "measurements.json"

    @property
    def idempotency_file(self) -> Path:
        """The answers of registrations made under an Idempotency-Key, by key (the newest last)."""
        return self.settings.home / "idempotency.json"

    @contextmanager
    def _shared_files(self) -> Iterator[None]:
        """Hold the home's state lock (other workers share its files), with an interrupted change
        completed and the catalogue and measurements brought up to date with the disk first."""
        with self._lock, _home_lock(self.settings.home):
            finish_journal(self.settings.home)
            self._reread()
            yield  # a change that fails midway leaves the files as last read: the next look reads them
            self._on_disk = self._files_signature()

    def sync(self) -> None:
        """Re-read devices and measurements that another worker changed, and refit the adaptations."""
        if self._files_signature() != self._on_disk:
            with self._shared_files():
                pass

    def _reread(self) -> None:
        """Read the devices and measurements again if their files changed (under the home's lock: a
        stored measurement that no longer applies is set aside), and refit the adaptations."""
        if self._files_signature() == self._on_disk:
            return
        self.catalogue = Catalogue.load(self.settings.devices_file)
        self.measurements = self._stored_measurements()
        self._readapt_all()
        self._on_disk = self._files_signature()

    def _files_signature(self) -> tuple:
        files = (self.settings.devices_file, self.measurements_file, self.settings.home / JOURNAL)
        return tuple((f.stat().st_mtime_ns, f.stat().st_size) if f.exists() else None for f in files)

    def _stored_measurements(self) -> dict[str, list[dict]]:
        """The stored measurements that still apply. A row that does not (malformed, or naming a task or
        device that is gone) is moved to a side file, named in the log and in its task's status; the
        others keep adapting."""
        stored: object = read_json_state(self.measurements_file, {})
        if not (isinstance(stored, dict) and all(isinstance(rows, list) for rows in stored.values())):
            set_aside_damaged(self.measurements_file, "not a mapping of task to a list of measurements")
            return {}
        kept: dict[str, list[dict]] = {}
        aside = []
        for task_name, rows in stored.items():
            for i, row in enumerate(rows):
                why = self._stored_row_problem(task_name, row)
                if why is None:
                    kept.setdefault(task_name, []).append(row)
                else:
                    aside.append({"task": task_name, "row": i, "why": why, "measurement": row})
        if aside:
            self._set_aside(aside, kept)
        return kept

    def _stored_row_problem(self, task_name: str, row: object) -> str | None:
        """Why a stored measurement no longer applies, or None."""
        try:
            task = get_task(task_name)
        except UnknownTask:
            return f"there is no task {task_name!r}"
        if not isinstance(row, dict):
            return "not an object"
        device = row.get("device_id")
        if not isinstance(device, str) or self.catalogue.get(device) is None:
            return f"device {device!r} is not in the catalogue (deleted, or its devices.json was set aside)"
        _, errors = validate_measurement(task, _item_fields(task, row), measured_targets(task, row))
        return None if not errors else f"{'.'.join(map(str, errors[0]['loc']))}: {errors[0]['msg']}"

    def _set_aside(self, aside: list[dict], kept: dict[str, list[dict]]) -> None:
        """Move stored measurements that no longer apply to a side file, and say so per task."""
        side = set_aside_entries(self.measurements_file, aside)
        atomic_write_bytes(self.measurements_file, json.dumps(kept).encode())
        for task_name in dict.fromkeys(entry["task"] for entry in aside):
            mine = [entry for entry in aside if entry["task"] == task_name]
            note = (
                f"{len(mine)} stored measurement(s) set aside to {side} (first: row {mine[0]['row']}, "
                f"{mine[0]['why']})"
            )
            log.warning("%s: %s", task_name, note)
            self._set_aside_notes[task_name] = note

    def describe(self, spec: DeviceSpec, measurements: dict[str, list[dict]] | None = None) -> DevicePublic:
        """A device with the number of measurements held for it per task."""
        held = self.measurements if measurements is None else measurements
        counts = {task: sum(row["device_id"] == spec.id for row in rows) for task, rows in held.items()}
        return DevicePublic(spec=spec, measurements={task: n for task, n in counts.items() if n})

    def register_device(
        self,
        spec: DeviceSpec,
        new: bool,
        task: Task | None,
        rows: list[dict],
        once: Idempotency | None = None,
    ) -> DevicePublic:
        """Register (or update, when ``new``) a spec sheet and/or add measurements, as one change on disk
        and in memory: a refused measurement registers nothing, an updated spec refits what it adapted,
        and a request repeated under its Idempotency-Key changes nothing again (the first answer is
        given)."""
        with self._shared_files():
            answered = self._answered(once)
            if answered is not None:
                return answered
            earlier = self.catalogue.get(spec.id) if new else None
            if new:
                self.catalogue.register(spec, persist=False)
            try:
                champions, measurements = self._with_measurements(task, rows)
                answer = self.describe(spec, measurements)
                self._commit(measurements, None if once is None else (once, answer))
            except Exception:
                self._restore(spec, earlier, new)
                raise
            self.champions.update(champions)
            self.measurements = measurements
            if earlier is not None and earlier != spec:
                self._readapt_all()
        return answer

    def _restore(self, spec: DeviceSpec, earlier: DeviceSpec | None, new: bool) -> None:
        """The catalogue as it was before a registration that failed."""
        if earlier is not None:
            self.catalogue.register(earlier, persist=False)
        elif new:
            self.catalogue.unregister(spec.id, persist=False)

    def _with_measurements(
        self, task: Task | None, rows: list[dict]
    ) -> tuple[dict[str, Champion], dict[str, list[dict]]]:
        """The champion adapted to the stored measurements plus ``rows`` (checked first), and all the
        measurements; nothing is changed yet."""
        if task is None or not rows:
            return {}, self.measurements
        champion = self.champion(task.name)  # measurements are checked against a model, and adapt it
        self._check_plausible(task, champion.base, rows)
        every = {**self.measurements, task.name: self.measurements.get(task.name, []) + rows}
        return {task.name: self._adapted(task, champion, every[task.name], strict=True)}, every

    def remove_device(self, name: str) -> DeviceSpec:
        """Unregister a user's device (by its id, name or alias as it looks) and forget its measurements
        (the adaptations are refitted). A catalogue entry, or a device a served model learned from,
        cannot be removed (DeviceConflict says why)."""
        with self._shared_files():
            spec = self.catalogue.named(name)
            if spec not in Catalogue.shipped():
                self._refuse_learned_from(spec)
            self.catalogue.unregister(spec.id, persist=False)
            kept = _without(self.measurements, spec.id, tasks=None)
            try:
                self._commit(kept)
            except Exception:
                self.catalogue.register(spec, persist=False)
                raise
            self.measurements = kept
            self._readapt_all()
        return spec

    def remove_measurements(self, name: str, task: Task | None) -> DevicePublic:
        """Forget a device's measurements (of one task, or of all), catalogue devices included; the
        adaptations are refitted. The device as it remains."""
        with self._shared_files():
            spec = self.catalogue.named(name)
            kept = _without(self.measurements, spec.id, tasks=None if task is None else {task.name})
            self._commit(kept)
            self.measurements = kept
            self._readapt_all()
            return self.describe(spec)

    def _refuse_learned_from(self, spec: DeviceSpec) -> None:
        """DeviceConflict when a served model was trained on the device, or the training data in the
        table store registered it: deleting it would leave their answers for it without a spec."""
        reasons = [
            f"the {name} champion v{champion.info.version} was trained on its measurements"
            for name, champion in sorted(self.champions.items())
            if spec.id in _training_devices(champion.base)
        ]
        reasons += [
            f"the training data of source {source!r} registered it"
            for source, entry in TableStore(self.settings.tables_dir).manifest().items()
            if isinstance(entry, dict) and spec.id in _sheet_ids(entry.get("extra_devices"))
        ]
        if reasons:
            raise DeviceConflict(f"device {spec.id!r} cannot be deleted: {'; '.join(reasons)}")

    def _commit(
        self, measurements: dict[str, list[dict]], remember: tuple[Idempotency, DevicePublic] | None = None
    ) -> None:
        """Write the devices, the measurements and (``remember``) an answer under its Idempotency-Key,
        as one change (see ``write_together``)."""
        files = {
            self.settings.devices_file.name: self.catalogue.user_file_contents(),
            self.measurements_file.name: json.dumps(measurements).encode(),
        }
        if remember is not None:
            files[self.idempotency_file.name] = self._remembered_with(*remember)
        write_together(self.settings.home, files)

    def _remembered(self) -> dict[str, dict]:
        """The answers remembered by Idempotency-Key (read under the home's lock)."""
        found: object = read_json_state(self.idempotency_file, {})
        if isinstance(found, dict):
            return found
        set_aside_damaged(self.idempotency_file, "not a mapping of idempotency keys to answers")
        return {}

    def _remembered_with(self, once: Idempotency, answer: DevicePublic) -> bytes:
        """The remembered answers with one more, the oldest forgotten past :data:`MAX_IDEMPOTENCY_KEYS`."""
        kept = list(self._remembered().items())[-(MAX_IDEMPOTENCY_KEYS - 1) :]
        entry = {"request": once.request, "answer": answer.model_dump(mode="json")}
        return json.dumps(dict(kept) | {once.key: entry}).encode()

    def _answered(self, once: Idempotency | None) -> DevicePublic | None:
        """The answer given to an earlier request under the same Idempotency-Key, if any;
        IdempotencyKeyReused when that request asked something else."""
        found = self._remembered().get(once.key) if once is not None else None
        if once is None or not isinstance(found, dict):
            return None
        if found.get("request") != once.request:
            raise IdempotencyKeyReused(once.key)
        try:
            answer = DevicePublic.model_validate(found.get("answer"))
        except ValidationError:
            log.error("the answer remembered under an Idempotency-Key is damaged; the request is carried out")
            return None
        if not any(spec.id == answer.spec.id for spec in self.catalogue):  # deleted since: say so
            raise DeviceConflict(
                f"the request under this Idempotency-Key registered {answer.spec.id!r}, which has since "
                "been deleted: it is not carried out again (send it with a new key to register anew)"
            )
        return answer

    def _readapt_all(self) -> None:
        """Every champion refitted from its base to the measurements and devices as they now are."""
        for name, champion in list(self.champions.items()):
            self.champions[name] = self._adapted(get_task(name), champion)

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
        """The champion's base refitted to ``rows`` (the stored measurements by default). Stored
        measurements that cannot adapt it are logged and named in the task's status; ``strict`` (new
        measurements) raises instead, a DataError where the failure is not one of preflight's own."""
        rows = self.measurements.get(task.name, []) if rows is None else rows
        if not rows or task.device_column is None:
            return _unadapted(champion)
        frame = pd.DataFrame.from_records(rows)
        try:
            features = task.featurize(frame, self.catalogue)
            adapted = champion.base.adapted(features, task.target_frame(frame))
        except Exception as exc:  # stored rows that no longer apply must not take the task down
            why = f"{type(exc).__name__}: {exc}"
            if strict and isinstance(exc, PreflightError):
                raise
            if strict:
                raise DataError(f"the measurements cannot adapt the model ({why})") from exc
            log.error("stored measurements for %s were not applied: %s", task.name, why)
            self._unapplied_notes[task.name] = f"its stored measurements could not adapt the model ({why})"
            return _unadapted(champion)
        self._unapplied_notes.pop(task.name, None)
        return replace(
            champion, predictor=adapted, info=replace(champion.info, adaptation=adapted.adaptation)
        )


def _unadapted(champion: Champion) -> Champion:
    """The champion as loaded, answering with no measurements."""
    return replace(champion, predictor=champion.base, info=replace(champion.info, adaptation=None))


def _api_keys(settings: Settings) -> tuple[str, ...]:
    """``PREFLIGHT_API_KEYS``, or the home's own key, generated on first start (owner-only file)."""
    if settings.api_keys:
        return tuple(settings.api_keys)
    path = settings.api_key_file.resolve()  # the log names it wherever the service was started from
    settings.home.mkdir(parents=True, exist_ok=True)
    try:  # exclusive: of several workers starting at once, one writes the key and all read it
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        log.info("routes that change state take the API key in %s", path)
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


class IdempotencyKeyReused(DataError):
    """An Idempotency-Key sent again with a request that asks something else than the first did."""

    def __init__(self, key: str) -> None:
        self.key = key
        super().__init__(
            "this Idempotency-Key was used for a different request; a retry sends the same body, and a new "
            "request a new key"
        )


@dataclass(frozen=True)
class Idempotency:
    """A request's Idempotency-Key and a digest of what it asks."""

    key: str
    request: str


@contextmanager
def _home_lock(home: Path) -> Iterator[None]:
    """The lock on a home's state files that every worker (and process) writing them holds."""
    home.mkdir(parents=True, exist_ok=True)
    with open(home / ".state.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _without(
    measurements: dict[str, list[dict]], device_id: str, tasks: set[str] | None
) -> dict[str, list[dict]]:
    """The measurements less those of a device (of the given tasks, or of all); no empty task is kept."""
    kept = {
        task: [row for row in rows if row["device_id"] != device_id]
        if tasks is None or task in tasks
        else rows
        for task, rows in measurements.items()
    }
    return {task: rows for task, rows in kept.items() if rows}


def _training_devices(predictor: Predictor) -> set[str]:
    """The devices a model was trained on: the values of its training rows' device and machine columns
    (a catalogue id, or for NAS the hardware's)."""
    task, (features, _) = predictor.task, predictor.train_
    columns = [
        c for c in dict.fromkeys((task.device_column, task.machine)) if c is not None and c in features.meta
    ]
    return {str(value) for column in columns for value in features.meta[column].unique()}


def _sheet_ids(sheets: object) -> set[str]:
    """The ids of the spec sheets a source's manifest entry says its file brought (``extra_devices``)."""
    if not isinstance(sheets, list):
        return set()
    return {sheet["id"] for sheet in sheets if isinstance(sheet, dict) and isinstance(sheet.get("id"), str)}


def _item_fields(task: Task, row: dict) -> dict:
    """A stored row's item fields, with those of a nested model (stored as columns) gathered back."""
    fields = {k: row[k] for k in task.item.model_fields if k in row}
    for name, model in _nested(task):
        fields[name] = {k: row[k] for k in model.model_fields if row.get(k) is not None} or None
    return fields


def _nested(task: Task) -> list[tuple[str, type[BaseModel]]]:
    """The item's fields that are models of their own (a kernel configuration), stored as columns."""
    found = []
    for name, info in task.item.model_fields.items():
        kinds = (info.annotation, *get_args(info.annotation))
        found += [(name, kind) for kind in kinds if isinstance(kind, type) and issubclass(kind, BaseModel)][
            :1
        ]
    return found


def measured_targets(task: Task, raw: dict) -> dict:
    """The measured targets of a measurement (those given a value)."""
    return {name: raw[name] for name in task.targets if raw.get(name) is not None}


def validate_measurement(task: Task, fields: dict, measured: dict) -> tuple[BaseModel | None, list[dict]]:
    """One measurement checked as the task's item (``fields``) plus measured targets (positive, finite;
    at least one): the item, and the problems as pydantic errors located inside the measurement."""
    try:
        item = task.item.model_validate(fields)
    except ValidationError as exc:
        return None, [dict(error) for error in exc.errors(include_url=False)]
    bad = [name for name, value in measured.items() if not _positive_number(value)]
    if measured and not bad:
        return item, []
    problem = {
        "type": "value_error",
        "loc": tuple(bad[:1] or ["targets"]),
        "msg": f"needs positive, finite measured values for at least one of {list(task.targets)}",
    }
    return None, [problem]


def _positive_number(value: object) -> bool:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value) and value > 0
    except OverflowError:  # an integer of 400 digits
        return False
