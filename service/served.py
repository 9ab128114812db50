"""The served models: a model per task, loaded, falling back, trained at first start and reloaded,
each adapted to the home's device registry (``models/registry/devices.py``), which the service composes with
them.

Each task loads, fails and reports on its own (:class:`TaskStatus`): one damaged version or side
file never takes another task down. A task whose champion cannot load serves its newest loadable
version and says so. Models are replaced, never changed in place: a registration or a reload builds
the new model first and swaps it in under the registry's lock, so a request in flight keeps the one it
started with. Devices and measurements are the registry's (``models/registry/devices.py``, shared with the
Python API): each model answers adapted to them, and is refitted whenever they change.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace

from preflight.data.catalogue import Catalogue, DeviceSpec
from preflight.data.errors import ModelUnavailable, NotReadyYet, NotTrained
from preflight.data.settings import Settings
from preflight.models.core.datasets import available_sources
from preflight.models.core.task import Task, all_tasks, get_task
from preflight.models.registry import tracking
from preflight.models.registry.devices import (
    Champion,
    DevicePublic,
    DeviceRegistry,
    Idempotency,
    Registration,
)
from preflight.service.batching import Batcher

log = logging.getLogger("preflight.service")

#: Task states that answer predictions.
SERVING = ("ready", "fallback")
#: The product's lead task: loaded and trained first at start-up, so that it answers soonest.
LEAD_TASK = "gemm"
#: Seconds a client is told to wait (``Retry-After``) before asking again for a task still starting.
RETRY_AFTER_S = 10


@dataclass
class TaskStatus:
    """One task's state: loading, training, ready, fallback, failed or untrained, and why."""

    state: str
    detail: str = ""
    version: str | None = None


@dataclass
class ServedModels:
    """A champion per task (loaded, falling back, bootstrapped, reloaded), each adapted to the
    ``devices`` registry, with the batchers that merge concurrent requests."""

    settings: Settings
    devices: DeviceRegistry
    champions: dict[str, Champion] = field(default_factory=dict)
    tasks: dict[str, TaskStatus] = field(default_factory=dict)
    started: bool = False
    _loading: threading.Lock = field(default_factory=threading.Lock, repr=False)  # one (re)load at a time
    batchers: dict[str, Batcher] = field(default_factory=dict, repr=False)  # concurrent requests merged
    _aliases: dict[str, str | None] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.devices.on_change = self._readapt_all

    @classmethod
    def create(cls, settings: Settings) -> ServedModels:
        """A home's models, none loaded yet, over its devices and measurements (read, an interrupted
        change completed first)."""
        models = cls(settings, DeviceRegistry.open(settings))
        models.tasks = {
            t.name: TaskStatus("loading", "loading its model from the registry") for t in all_tasks()
        }
        return models

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
        turns = [f"{i} of {len(untrained)}" for i in range(1, len(untrained) + 1)]
        for task, turn in zip(untrained, turns):
            self.tasks[task.name] = TaskStatus("training", f"queued to train its first version ({turn})")
        for task, turn in zip(untrained, turns):
            log.info("training %s (%s)", task.name, turn)
            self.tasks[task.name] = TaskStatus(
                "training", f"training its first version from the data at hand ({turn})"
            )
            began = time.monotonic()
            if self._starting(task, self._train):
                log.info("trained %s (%s) in %.0f s", task.name, turn, time.monotonic() - began)

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
            loaded = Champion.loaded(serving.predictor, serving.info, serving.fallback)
            with self.devices.lock:  # adapted to the measurements as they are when it is swapped in
                old = self.champions.get(task.name)
                self.champions[task.name] = self.devices.adapted(task, loaded)
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
                self.devices.sync()
            except Exception:  # the watcher must outlive any one failure
                log.exception("reloading failed; trying again in %g s", interval)

    def _train(self, task: Task) -> None:
        from preflight.models.core.training import train

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
            notes = [status.detail, *self.devices.notes(name)]
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

    # devices and measurements: the registry's, with the served models refitted to them

    @property
    def catalogue(self) -> Catalogue:
        """The devices the models answer for: the catalogue with those registered in the home."""
        return self.devices.catalogue

    def register_device(self, registration: Registration, once: Idempotency | None = None) -> DevicePublic:
        """Carry out a registration (see ``DeviceRegistry.register``), its task's model adapted to the
        measurements swapped in with it."""
        with self.devices.lock:
            answer, champions = self.devices.register(registration, self.champion, once)
            self.champions.update(champions)
        return answer

    def remove_device(self, name: str) -> DeviceSpec:
        """Unregister a user's device and forget its measurements; one a served model was trained on
        cannot be removed (see ``DeviceRegistry.remove_device``)."""
        return self.devices.remove_device(name, lambda: self.champions)

    def _readapt_all(self) -> None:
        """Every champion refitted from its base to the measurements and devices as they now are (the
        registry calls it, under its lock, when they changed)."""
        for name, champion in list(self.champions.items()):
            self.champions[name] = self.devices.adapted(get_task(name), champion)
