"""A home's devices and the measurements users give of them: one registry for the service and the
Python API alike.

The devices users registered live in ``HOME/devices.json``, their measurements in
``HOME/measurements.json``, and the answers of registrations sent with an ``Idempotency-Key`` in
``HOME/idempotency.json``. Every change of them is written as one (``data/store.write_together``: a
journal first, completed under the home's lock, at start-up or by the next writer, when a crash
interrupted it), under a lock that every worker and process sharing the home takes. A stored
measurement that no longer applies (malformed, or of a task or device that is gone) is set aside into a
side file when read, named in the log and in its task's notes; the others keep adapting.

A model answers for a measured device adapted to its measurements (:meth:`DeviceRegistry.adapted`),
wherever it answers.
"""

from __future__ import annotations

import fcntl
import json
import logging
import math
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, get_args

import numpy as np
import pandas as pd
from preflight.data.catalogue import Catalogue, DeviceSpec
from preflight.data.errors import DataError, DeviceConflict, InvalidFields, PreflightError, UnknownTask
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
from preflight.models.core.datasets import device_spec
from preflight.models.core.predictor import Predictor
from preflight.models.core.targets import Target
from preflight.models.core.task import Task, get_task
from preflight.models.registry import plausibility
from preflight.models.registry.tracking import ModelInfo
from pydantic import BaseModel, Field, ValidationError

log = logging.getLogger("preflight.state")

#: Registrations whose answers are remembered by Idempotency-Key (the oldest forgotten first).
MAX_IDEMPOTENCY_KEYS = 1_000


# A subject that measurements adapt (a kernel) as others see it.
class SubjectPublic(BaseModel):
    task: str
    subject: str = Field(description="what the measurements adapt: a kernel's name")
    measurements: int = Field(description="measurements held for it (a kernel's synthesized designs)")


# A device as others see it: its spec sheet and the measurements held for it (the HTTP answer too).
class DevicePublic(BaseModel):
    spec: DeviceSpec
    measurements: dict[str, int] = Field(description="measurements held per task")


@dataclass(frozen=True)
class Champion:
    """A task's model as it answers: ``predictor`` adapted to the stored measurements, ``base`` as
    loaded (``fallback`` says why an older version answers, if one does)."""

    predictor: Predictor
    base: Predictor
    info: ModelInfo
    fallback: str | None = None

    @classmethod
    def loaded(cls, predictor: Predictor, info: ModelInfo, fallback: str | None = None) -> Champion:
        """A model as loaded, not adapted yet."""
        return cls(predictor, predictor, info, fallback)

    def unadapted(self) -> Champion:
        """The model as loaded, answering with no measurements."""
        return replace(self, predictor=self.base, info=replace(self.info, adaptation=None))


@dataclass(frozen=True)
class Idempotency:
    """A request's Idempotency-Key and a digest of what it asks."""

    key: str
    request: str


@dataclass(frozen=True)
class Registration:
    """What a registration asks, checked: a spec sheet to register (``new``: or update) or a known
    device, and measurements of one task as stored rows."""

    spec: DeviceSpec
    new: bool
    task: Task | None
    rows: list[dict]


@dataclass
class DeviceRegistry:
    """The devices registered in a home and the measurements held for them, in step with the files
    that every process sharing the home reads and writes. ``on_change`` is called (under ``lock``)
    whenever what was registered changed otherwise than by new measurements, so that a holder of
    adapted models refits them (:meth:`adapted`)."""

    settings: Settings
    catalogue: Catalogue = field(default_factory=Catalogue.load)
    measurements: dict[str, list[dict]] = field(default_factory=dict)
    on_change: Callable[[], None] = field(default=lambda: None, repr=False)
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False)
    _on_disk: tuple = field(default=(), repr=False)  # the state files as last read or written
    # why a task's stored measurements were set aside, or could not adapt its model
    _set_aside_notes: dict[str, str] = field(default_factory=dict, repr=False)
    _unapplied_notes: dict[str, str] = field(default_factory=dict, repr=False)

    @classmethod
    def open(cls, settings: Settings) -> DeviceRegistry:
        """The registry of a home, read (an interrupted change completed first)."""
        registry = cls(settings)
        registry.sync()
        return registry

    @property
    def measurements_file(self) -> Path:
        return self.settings.home / "measurements.json"

    @property
    def idempotency_file(self) -> Path:
        """The answers of registrations made under an Idempotency-Key, by key (the newest last)."""
        return self.settings.home / "idempotency.json"

    def notes(self, task: str) -> list[str]:
        """What became of a task's stored measurements, where some were set aside or could not adapt."""
        return [note for note in (self._set_aside_notes.get(task), self._unapplied_notes.get(task)) if note]

    # reading and writing the home's files

    @contextmanager
    def _shared_files(self) -> Iterator[None]:
        """Hold the home's state lock (other workers share its files), with an interrupted change
        completed and the catalogue and measurements brought up to date with the disk first."""
        with self.lock, _home_lock(self.settings.home):
            finish_journal(self.settings.home)
            self._reread()
            yield  # a change that fails midway leaves the files as last read: the next look reads them
            self._on_disk = self._files_signature()

    def sync(self) -> None:
        """Re-read the devices and measurements if another worker or process changed them."""
        if self._files_signature() != self._on_disk:
            with self._shared_files():
                pass

    def _reread(self) -> None:
        """Read the devices and measurements again if their files changed (under the home's lock: a
        stored measurement that no longer applies is set aside)."""
        if self._files_signature() == self._on_disk:
            return
        self.catalogue = Catalogue.load(self.settings.devices_file)
        self.measurements = self._stored_measurements()
        self.on_change()
        self._on_disk = self._files_signature()

    def _files_signature(self) -> tuple:
        files = (self.settings.devices_file, self.measurements_file, self.settings.home / JOURNAL)
        return tuple((f.stat().st_mtime_ns, f.stat().st_size) if f.exists() else None for f in files)

    def _stored_measurements(self) -> dict[str, list[dict]]:
        """The stored measurements that still apply. A row that does not (malformed, or naming a task or
        device that is gone) is moved to a side file, named in the log and in its task's notes; the
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
        _, errors = _validate_measurement(task, _item_fields(task, row), _measured_targets(task, row))
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

    # registering and removing

    def describe(self, spec: DeviceSpec, measurements: dict[str, list[dict]] | None = None) -> DevicePublic:
        """A device with the number of measurements held for it per task."""
        held = self.measurements if measurements is None else measurements
        counts = {task: sum(row["device_id"] == spec.id for row in rows) for task, rows in held.items()}
        return DevicePublic(spec=spec, measurements={task: n for task, n in counts.items() if n})

    def describe_subject(self, task: Task, subject: str) -> SubjectPublic:
        """A subject (a kernel) with the number of its measurements held."""
        rows = self.measurements.get(task.name, [])
        held = sum(str(row.get(task.subject)) == subject for row in rows)
        return SubjectPublic(task=task.name, subject=subject, measurements=held)

    def remove_subject(self, task: Task, subject: str) -> SubjectPublic:
        """Forget a subject's measurements (a kernel's synthesized designs): its estimates are the
        unadapted model's again. The subject as it remains (no measurements)."""
        with self._shared_files():
            rows = [
                row for row in self.measurements.get(task.name, []) if str(row.get(task.subject)) != subject
            ]
            kept = {name: held for name, held in self.measurements.items() if name != task.name}
            kept |= {task.name: rows} if rows else {}
            self._commit(kept)
            self.measurements = kept
            self.on_change()
            return self.describe_subject(task, subject)

    def subject_registration(
        self, task: str, subject: str, measurements: Sequence[dict[str, Any]]
    ) -> Registration:
        """Measurements of one subject of a task that adapts to something else than a device (a
        kernel's synthesized designs): each the task's item fields, the subject left out, plus measured
        targets, on the device the first names (the item's default device where it names none)."""
        measured = _device_task(task)
        rows = [{**raw, str(measured.subject): subject} for raw in measurements]
        device = next(iter(rows), {}).get("device") or measured.item.model_fields["device"].default
        return self.registration(None, str(device), task, rows)

    def registration(
        self, spec: DeviceSpec | None, device: str | None, task: str, measurements: Sequence[dict[str, Any]]
    ) -> Registration:
        """A registration checked: a spec sheet, or a device by any name the catalogue resolves (a new
        one where the task learns devices from measurements alone), and measurements of ``task`` (item
        fields, the device omitted, plus measured targets). InvalidRegistration names each problem."""
        if spec is None and device is None:
            raise InvalidRegistration(
                [{"type": "missing", "loc": ("spec",), "msg": "give a spec or a device", "input": None}]
            )
        measured = _device_task(task) if measurements else None
        spec, new = (spec, True) if spec else device_spec(measured, device or "", self.catalogue)
        rows = _measurement_rows(measured, spec.id, measurements) if measured is not None else []
        return Registration(spec, new, measured, rows)

    def register(
        self,
        registration: Registration,
        champion: Callable[[str], Champion],
        once: Idempotency | None = None,
    ) -> tuple[DevicePublic, dict[str, Champion]]:
        """Register (or update) a spec sheet and/or add measurements, as one change on disk and in memory:
        a refused measurement registers nothing, an updated spec refits what it adapted, and a request
        repeated under its Idempotency-Key changes nothing again (the first answer is given). The device
        as registered, and the task's ``champion`` (by task name) adapted to the measurements."""
        spec, new = registration.spec, registration.new
        with self._shared_files():
            answered = self._answered(once)
            if answered is not None:
                return answered, {}
            earlier = self.catalogue.get(spec.id) if new else None
            if new:
                self.catalogue.register(spec, persist=False)
            try:
                champions, measurements = self._with_measurements(registration, champion)
                answer = self.describe(spec, measurements)
                self._commit(measurements, None if once is None else (once, answer))
            except Exception:
                self._restore(spec, earlier, new)
                raise
            self.measurements = measurements
            if earlier is not None and earlier != spec:
                self.on_change()
        return answer, champions

    def _restore(self, spec: DeviceSpec, earlier: DeviceSpec | None, new: bool) -> None:
        """The catalogue as it was before a registration that failed."""
        if earlier is not None:
            self.catalogue.register(earlier, persist=False)
        elif new:
            self.catalogue.unregister(spec.id, persist=False)

    def _with_measurements(
        self, registration: Registration, champion: Callable[[str], Champion]
    ) -> tuple[dict[str, Champion], dict[str, list[dict]]]:
        """The champion adapted to the stored measurements plus the registration's (checked first), and
        all the measurements; nothing is changed yet."""
        task, rows = registration.task, registration.rows
        if task is None or not rows:
            return {}, self.measurements
        served = champion(task.name)  # measurements are checked against a model, and adapt it
        self._check_plausible(task, served.base, rows)
        every = {**self.measurements, task.name: self.measurements.get(task.name, []) + rows}
        return {task.name: self.adapted(task, served, every[task.name], strict=True)}, every

    def remove_device(self, name: str, served: Callable[[], Mapping[str, Champion]]) -> DeviceSpec:
        """Unregister a user's device (by its id, name or alias as it looks) and forget its measurements.
        A catalogue entry, or a device one of the ``served`` models (by task) or the training data in the
        table store learned from, cannot be removed (DeviceConflict says why)."""
        with self._shared_files():
            spec = self.catalogue.named(name)
            if spec not in Catalogue.shipped():
                self._refuse_learned_from(spec, served())
            self.catalogue.unregister(spec.id, persist=False)
            kept = _without(self.measurements, spec.id, tasks=None)
            try:
                self._commit(kept)
            except Exception:
                self.catalogue.register(spec, persist=False)
                raise
            self.measurements = kept
            self.on_change()
        return spec

    def remove_measurements(self, name: str, task: Task | None) -> DevicePublic:
        """Forget a device's measurements (of one task, or of all), catalogue devices included. The
        device as it remains."""
        with self._shared_files():
            spec = self.catalogue.named(name)
            kept = _without(self.measurements, spec.id, tasks=None if task is None else {task.name})
            self._commit(kept)
            self.measurements = kept
            self.on_change()
            return self.describe(spec)

    def _refuse_learned_from(self, spec: DeviceSpec, served: Mapping[str, Champion]) -> None:
        """DeviceConflict when a served model was trained on the device, or the training data in the
        table store registered it: deleting it would leave their answers for it without a spec."""
        reasons = [
            f"the {name} champion v{champion.info.version} was trained on its measurements"
            for name, champion in sorted(served.items())
            if spec.id in _training_devices(champion.base)
        ]
        reasons += [
            f"the training data of source {source!r} registered it"
            for source, entry in TableStore(self.settings.tables_dir).manifest().items()
            if isinstance(entry, dict) and spec.id in _sheet_ids(entry.get("extra_devices"))
        ]
        if reasons:
            raise DeviceConflict(f"device {spec.id!r} cannot be deleted: {'; '.join(reasons)}")

    # idempotency

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

    # adaptation

    def _check_plausible(self, task: Task, predictor: Predictor, rows: list[dict]) -> None:
        frame = pd.DataFrame.from_records(rows)
        problems = plausibility.implausible(
            predictor, task.featurize(frame, self.catalogue), task.target_frame(frame)
        )
        if problems:
            raise ImplausibleMeasurements(problems)

    def adapted(
        self, task: Task, champion: Champion, rows: list[dict] | None = None, strict: bool = False
    ) -> Champion:
        """The champion's base refitted to ``rows`` (the stored measurements by default). Stored
        measurements that cannot adapt it are logged and named in the task's notes; ``strict`` (new
        measurements) raises instead, a DataError where the failure is not one of preflight's own."""
        rows = self.measurements.get(task.name, []) if rows is None else rows
        if not rows or task.subject is None:
            return champion.unadapted()
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
            return champion.unadapted()
        self._unapplied_notes.pop(task.name, None)
        return replace(
            champion, predictor=adapted, info=replace(champion.info, adaptation=adapted.adaptation)
        )


class InvalidRegistration(InvalidFields):
    """A registration that cannot be carried out as given: each error's ``loc`` inside the
    registration (``("measurements", 3, "m")``)."""


class ImplausibleMeasurements(InvalidRegistration):
    """Measurements that contradict the device's roofline or the model by far: ``problems`` lists
    ``(row, target, why)``."""

    def __init__(self, problems: list[tuple[int, str, str]]) -> None:
        self.problems = problems
        super().__init__(
            [
                {"type": "value_error", "loc": ("measurements", i, target), "msg": why}
                for i, target, why in problems
            ]
        )


class IdempotencyKeyReused(DataError):
    """An Idempotency-Key sent again with a request that asks something else than the first did."""

    def __init__(self, key: str) -> None:
        self.key = key
        super().__init__(
            "this Idempotency-Key was used for a different request; a retry sends the same body, and a new "
            "request a new key"
        )


def _device_task(name: str) -> Task:
    """The task measurements belong to; InvalidRegistration when nothing of it adapts to them."""
    task = get_task(name)
    if task.subject is None:
        raise InvalidRegistration(
            [
                {
                    "type": "value_error",
                    "loc": ("task",),
                    "input": name,
                    "msg": f"task {task.name!r} has nothing that measurements adapt; they adapt a "
                    "device's model (e.g. gemm, nas-latency) or a kernel's (fpga)",
                }
            ]
        )
    return task


def _measurement_rows(task: Task, device_id: str, measurements: Sequence[dict[str, Any]]) -> list[dict]:
    """Each measurement checked as the task's item plus positive targets, as a stored row;
    InvalidRegistration names every field at fault."""
    rows, errors = [], []
    for i, raw in enumerate(measurements):
        fields = {k: v for k, v in raw.items() if k not in task.targets} | {"device": device_id}
        measured = _measured_targets(task, raw)
        item, problems = _validate_measurement(task, fields, measured)
        errors += [{**e, "loc": ("measurements", i, *e["loc"])} for e in problems]
        if item is not None:
            rows.append(task.items_to_rows([item]).iloc[0].to_dict() | measured | {"device_id": device_id})
    if errors:
        raise InvalidRegistration(errors)
    return rows


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


def _measured_targets(task: Task, raw: dict) -> dict:
    """The measured targets of a measurement (those given a value)."""
    return {name: raw[name] for name in task.targets if raw.get(name) is not None}


def _validate_measurement(task: Task, fields: dict, measured: dict) -> tuple[BaseModel | None, list[dict]]:
    """One measurement checked as the task's item (``fields``) plus measured targets (finite numbers
    inside each target's domain: a positive time, a fraction of the board, 0 or 1 for an event; at
    least one): the item, and the problems as pydantic errors located inside the measurement."""
    try:
        item = task.item.model_validate(fields)
    except ValidationError as exc:
        return None, [dict(error) for error in exc.errors(include_url=False)]
    bad = [name for name, value in measured.items() if not _measured_value(task.targets[name], value)]
    if measured and not bad:
        return item, []
    problem = {
        "type": "value_error",
        "loc": tuple(bad[:1] or ["targets"]),
        "msg": f"needs finite measured values (positive times, fractions in [0, 1], 0 or 1 for an event) "
        f"for at least one of {list(task.targets)}",
    }
    return None, [problem]


def _measured_value(target: Target, value: object) -> bool:
    """A number inside the target's domain and bounds (a bool only for an event)."""
    if not isinstance(value, (int, float)) or (isinstance(value, bool) and not target.kind.event):
        return False
    try:
        number = float(value)
    except OverflowError:  # an integer of 400 digits
        return False
    if target.kind.event:
        return number in (0.0, 1.0)
    within = (target.lower is None or number >= target.lower) and (
        target.upper is None or number <= target.upper
    )
    return math.isfinite(number) and within and bool(target.present(np.array([number]))[0])
