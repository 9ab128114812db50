"""Configuration, read from ``PREFLIGHT_*`` environment variables."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Where preflight keeps its state and finds public datasets."""

    model_config = SettingsConfigDict(env_prefix="PREFLIGHT_", extra="ignore")

    home: Path = Field(default=Path(".preflight"), description="tables, MLflow DB, artifacts")
    datasets: Path | None = Field(default=None, description="a folder laid out like shared/datasets")
    api_keys: list[str] = Field(default_factory=list, description="empty: no auth")

    @property
    def tracking_uri(self) -> str:
        """MLflow's tracking URI: ``MLFLOW_TRACKING_URI`` wins, else SQLite under home."""
        import os

        return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{self.home.resolve() / 'mlflow.db'}"

    @property
    def tables_dir(self) -> Path:
        return self.home / "tables"

    @property
    def devices_file(self) -> Path:
        """Devices registered by users (spec sheets and measurements)."""
        return self.home / "devices.json"
