"""What the running service holds: settings, the catalogue, champions, and user measurements.

Champions are replaced, never changed in place: a registration builds an adapted copy and swaps it
in under a lock, so a request in flight keeps the model it started with.
"""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass, field

import pandas as pd
from preflight.data.catalogue import Catalogue
from preflight.data.errors import NotTrained, PreflightError
from preflight.data.settings import Settings
from preflight.data.store import atomic_write_bytes
from preflight.models import tracking
from preflight.models.datasets import available_sources
from preflight.models.predictor import Predictor
from preflight.models.task import Task, all_tasks

log = logging.getLogger("preflight.service")


@dataclass(frozen=True)
class Champion:
    predictor: Predictor
    info: tracking.ModelInfo


@dataclass
class ServiceState:
    settings: Settings
    catalogue: Catalogue
    champions: dict[str, Champion] = field(default_factory=dict)
    status: str = "starting"
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def create(cls, settings: Settings) -> ServiceState:
        return cls(settings, Catalogue.load(settings.devices_file))

    def start(self, bootstrap: bool) -> None:
        """Train missing champions (when asked), then load every champion there is."""
        from preflight.models.training import bootstrap as train_missing

        try:
            if bootstrap:
                self.status = "training champions"
                train_missing(self.settings, self.catalogue, all_tasks())
            self.status = "loading champions"
            self.load_champions()
            loaded = bool(self.champions) and all(name in self.champions for name in self.servable())
            self.status = "ready" if loaded else "not trained"
        except Exception as exc:  # a background start must say why it failed, not die silently
            log.exception("start-up failed")
            self.status = f"failed: {type(exc).__name__}: {exc}"

    def load_champions(self) -> None:
        for task in all_tasks():
            try:
                predictor, info = tracking.load_champion(self.settings, task.name)
            except NotTrained:
                log.warning("task %s has no champion; run `preflight train %s`", task.name, task.name)
                continue
            champion = Champion(predictor, info)
            rows = self.measurements().get(task.name, [])
            try:
                champion = self._adapted(task, champion, rows)
            except PreflightError as exc:
                log.error("stored measurements for %s were not applied: %s", task.name, exc)
            self.champions[task.name] = champion

    def servable(self) -> list[str]:
        """Tasks this service should answer: those with a champion or with data to train one."""
        return [
            t.name for t in all_tasks() if t.name in self.champions or available_sources(t, self.settings)
        ]

    @property
    def ready(self) -> bool:
        """Every champion there is to load is loaded (not merely those loaded so far)."""
        return self.status == "ready"

    def champion(self, task: str) -> Champion:
        if task not in self.champions:
            raise NotTrained(task)
        return self.champions[task]

    @property
    def measurements_file(self):
        return self.settings.home / "measurements.json"

    def measurements(self) -> dict[str, list[dict]]:
        """Stored measurements per task: canonical rows with targets."""
        if not self.measurements_file.exists():
            return {}
        return json.loads(self.measurements_file.read_text())

    def add_measurements(self, task: Task, rows: list[dict]) -> None:
        """Adapt the champion to the measurements, then store them (nothing is stored if adapting fails)."""
        with self._lock:
            stored = self.measurements()
            every = stored.get(task.name, []) + rows
            if task.name in self.champions:
                self.champions[task.name] = self._adapted(task, self.champions[task.name], every)
            stored[task.name] = every
            atomic_write_bytes(self.measurements_file, json.dumps(stored).encode())

    def _adapted(self, task: Task, champion: Champion, rows: list[dict]) -> Champion:
        if not rows:
            return champion
        frame = pd.DataFrame.from_records(rows)
        features = task.featurize(frame, self.catalogue)
        return Champion(champion.predictor.adapted(features, task.target_frame(frame)), champion.info)
