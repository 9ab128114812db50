"""Where the generated API key lies: the README's commands and the service's log name the home's own."""

import logging
import re
import subprocess
from pathlib import Path

import pytest
from preflight.data.settings import Settings
from preflight.service.deps import api_keys

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_key_paths() -> set[str]:
    """The path each README command reads the key from (``$(cat PATH)``), as written."""
    return set(re.findall(r"\$\(cat ([^)]*api-key[^)]*)\)", README.read_text()))


@pytest.mark.parametrize("home", [None, "elsewhere/home"])
def test_the_readme_reads_the_key_of_the_home_in_use(home, tmp_path, monkeypatch):
    """Expanded by the shell, with ``PREFLIGHT_HOME`` set or not, each is the file the service writes."""
    (written,) = readme_key_paths()
    env = {"PATH": "/usr/bin:/bin"} | ({"PREFLIGHT_HOME": home} if home else {})
    shell = subprocess.run(
        ["bash", "-c", f"echo {written}"], env=env, capture_output=True, text=True, check=True
    )
    if home:
        monkeypatch.setenv("PREFLIGHT_HOME", home)
    assert Path(shell.stdout.strip()) == Settings().api_key_file


def test_every_start_logs_where_the_key_is(tmp_path, caplog):
    settings = Settings(home=tmp_path / "home")  # no PREFLIGHT_API_KEYS: the home's own key
    with caplog.at_level(logging.INFO, logger="preflight.service"):
        api_keys(settings)  # generates it
        api_keys(settings)  # reads it
    where = [r.getMessage() for r in caplog.records if "API key" in r.getMessage()]
    assert len(where) == 2 and all(m.endswith(f" {(tmp_path / 'home' / 'api-key').resolve()}") for m in where)
