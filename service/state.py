"""What the running service holds: settings, the catalogue, champions, and user measurements."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field

import pandas as pd

from preflight.data.catalogue import Catalogue
from preflight.data.errors import NotTrained
from preflight.data.settings import Settings
from preflight.data.store import atomic_write_bytes
from preflight.models import tracking
from preflight.models.evaluate import target_frame
from preflight.models.predictor import Predictor
from preflight.models.task import Task, all_tasks

log = logging.getLogger("preflight.service")


@dataclass
class Champion:
    predictor: Predictor
    info: tracking.ModelInfo


@dataclass
class ServiceState:
    settings: Settings
    catalogue: Catalogue
    champions: dict[str, Champion] = field(default_factory=dict)

    @classmethod
    def start(cls, settings: Settings) -> "ServiceState":
        state = cls(settings, Catalogue.load(settings.devices_file))
        state.load_champions()
        return state

    @property
    def measurements_file(self):
        return self.settings.home / "measurements.json"

    def load_champions(self) -> None:
        for task in all_tasks():
            try:
                predictor, info = tracking.load_champion(self.settings, task.name)
            except NotTrained:
                log.warning("task %s has no champion; run `preflight train %s`", task.name, task.name)
                continue
            self.champions[task.name] = Champion(predictor, info)
            self._adapt(task)

    @property
    def ready(self) -> bool:
        return bool(self.champions) and all(t.name in self.champions for t in all_tasks())

    def champion(self, task: str) -> Champion:
        if task not in self.champions:
            raise NotTrained(task)
        return self.champions[task]

    def measurements(self) -> dict[str, list[dict]]:
        """Stored measurements per task: canonical rows with targets."""
        if not self.measurements_file.exists():
            return {}
        return json.loads(self.measurements_file.read_text())

    def add_measurements(self, task: Task, rows: list[dict]) -> None:
        stored = self.measurements()
        stored[task.name] = stored.get(task.name, []) + rows
        atomic_write_bytes(self.measurements_file, json.dumps(stored).encode())
        self._adapt(task)

    def _adapt(self, task: Task) -> None:
        rows = self.measurements().get(task.name)
        if rows and task.name in self.champions:
            frame = pd.DataFrame.from_records(rows)
            self.champions[task.name].predictor.adapt(task.featurize(frame, self.catalogue), target_frame(task, frame))
