"""``/docs`` and ``/redoc`` work air-gapped: their pages load scripts, styles and icons from the service
itself (files of a package), with no key even where reads need one, and no CDN."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient

from tests.client import api_client

PAGES = {"/docs": ("swagger-ui-bundle.js", "swagger-ui.css"), "/redoc": ("redoc.standalone.js",)}


def assets(html: str) -> list[str]:
    """Every URL the page loads: script sources, links, and the spec."""
    return re.findall(r'(?:src|href|spec-url)="([^"]+)"', html) + re.findall(r"url: '([^']+)'", html)


@pytest.fixture
def client(tmp_path):
    """A client without the API key, of a service whose reads need one."""
    with api_client(tmp_path / "home", protect_reads=True) as test_client:
        del test_client.headers["X-API-Key"]
        yield test_client


@pytest.mark.parametrize("page", PAGES)
def test_a_docs_page_loads_everything_from_the_service(client, page):
    answer = client.get(page)
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/html")
    urls = assets(answer.text)
    assert {url.rsplit("/", 1)[-1] for url in urls} >= {*PAGES[page], "openapi.json"}
    assert "://" not in answer.text
    for url in urls:
        assert url.startswith("/") and not url.startswith("//"), f"{page} loads {url} from elsewhere"
        loaded = client.get(url)
        assert loaded.status_code == 200 and loaded.content, url
    assert client.get("/v1/tasks").status_code == 401  # the key still guards the reads


def test_assets_stay_inside_their_folder(client):
    assert client.get("/docs/assets/%2e%2e/core.py").status_code == 404  # the package's code beside them
    assert client.get("/docs/assets/nothing.js").status_code == 404


def test_behind_a_proxy_the_page_loads_under_its_prefix(tmp_path):
    app = api_client(tmp_path / "home").app
    with TestClient(app, root_path="/preflight") as proxied:
        urls = assets(proxied.get("/docs").text)
        assert urls and all(url.startswith("/preflight/") for url in urls), urls
