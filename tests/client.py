"""A TestClient on the real app that carries an API key (routes that change state need one)."""

from pathlib import Path

from fastapi.testclient import TestClient
from preflight.data.settings import Settings
from preflight.service.app import create_app

KEY = "test-key-0123456789"


def api_client(home: Path, bootstrap: bool = False, **settings) -> TestClient:
    """A client of a service on ``home`` (the background reload off unless asked for)."""
    settings = {"reload_interval_s": 0} | settings
    app = create_app(Settings(home=home, api_keys=[KEY], **settings), bootstrap=bootstrap)
    return TestClient(app, headers={"X-API-Key": KEY})
