"""Configuration, read from ``PREFLIGHT_*`` environment variables."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

#: The shortest API key accepted: a short key is guessed (a generated one has 43 characters).
MIN_KEY_LENGTH = 16


class Settings(BaseSettings):
    """Where preflight keeps its state and finds public datasets."""

    model_config = SettingsConfigDict(env_prefix="PREFLIGHT_", extra="ignore", hide_input_in_errors=True)

    home: Path = Field(default=Path(".preflight"), description="tables, MLflow DB, artifacts")
    datasets: Path | None = Field(
        default=None,
        description="the folder of the full public sets, each at its path in the README's Data table",
    )
    api_keys: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description=f"keys for X-API-Key, a JSON list or comma-separated, each of at least {MIN_KEY_LENGTH} "
        "printable ASCII characters; empty: one generated in HOME/api-key. Routes that change state "
        "(registration, reload) always need one",
    )
    artifact_root: str | None = Field(
        None,
        description="where new experiments keep artifacts (a team's shared store); default HOME/artifacts",
    )
    protect_reads: bool = Field(False, description="predictions and listings need a key too")
    max_body_bytes: int = Field(4 * 2**20, ge=1024, description="larger request bodies get a 413")
    request_timeout_s: float = Field(60.0, gt=0, description="a request running longer gets a 504")
    reload_interval_s: float = Field(
        30.0,
        ge=0,
        description="how often to look for a moved champion alias; 0: only on POST /v1/admin/reload",
    )

    @field_validator("api_keys", mode="before")
    @classmethod
    def _keys(cls, value: object) -> object:
        """``'["a", "b"]'``, ``'a,b'`` or empty (no keys configured)."""
        if not isinstance(value, str):
            return value
        text = value.strip()
        if text.startswith("["):
            return json.loads(text)
        return [key.strip() for key in text.split(",") if key.strip()]

    @field_validator("api_keys")
    @classmethod
    def _strong_keys(cls, keys: list[str]) -> list[str]:
        """Each key long enough not to be guessed, and sendable in a header (printable ASCII); the
        message says which key by position, never the key."""
        for i, key in enumerate(keys, 1):
            which = f"PREFLIGHT_API_KEYS: key {i} of {len(keys)}"
            if len(key) < MIN_KEY_LENGTH:
                raise ValueError(
                    f"{which} is {len(key)} character(s) long; a key needs at least {MIN_KEY_LENGTH} "
                    "(make one: python -c 'import secrets; print(secrets.token_urlsafe(32))')"
                )
            if not (key.isascii() and key.isprintable()):
                raise ValueError(f"{which} is not printable ASCII, which an HTTP header cannot carry")
        return keys

    def validation_context(self) -> dict[str, Settings]:
        """The context to validate items with when a validator reads configuration (an FPGA item finds
        a kernel's graph in these settings' datasets)."""
        return {"settings": self}

    @classmethod
    def of_context(cls, context: object) -> Settings:
        """The settings a validation context carries (:meth:`validation_context`), else the environment's."""
        found = context.get("settings") if isinstance(context, dict) else None
        return found if isinstance(found, Settings) else cls()

    @property
    def tracking_uri(self) -> str:
        """MLflow's tracking URI: ``MLFLOW_TRACKING_URI`` wins, else SQLite under home."""
        import os

        return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{self.home.resolve() / 'mlflow.db'}"

    @property
    def cache_dir(self) -> Path:
        """What may be rebuilt at will: compiled boosters, this host's measured memory bandwidth."""
        return self.home / "cache"

    @property
    def tables_dir(self) -> Path:
        return self.home / "tables"

    @property
    def api_key_file(self) -> Path:
        """The key generated for a home with no ``PREFLIGHT_API_KEYS`` (readable by its owner only)."""
        return self.home / "api-key"

    @property
    def devices_file(self) -> Path:
        """Devices registered by users (spec sheets and measurements)."""
        return self.home / "devices.json"
