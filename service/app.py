"""``create_app(settings)``: the FastAPI app, its lifespan (load models, watch for new champions),
limits and Prometheus metrics."""

import threading
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI, Request, Response
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.routing import APIRoute
from fastapi.staticfiles import StaticFiles
from preflight.data.settings import Settings
from preflight.service import errors
from preflight.service.deps import KEY_RESPONSES, api_keys, require_api_key
from preflight.service.middleware import Deadline, HeadAsGet, Observed
from preflight.service.routes import actions, admin, devices, fpga, health, predict, reasons, tasks, whatif
from preflight.service.served import ServedModels
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest

#: Paths of routes that change state: they run to the end, never cut off by the deadline.
CHANGES_STATE = ("/v1/devices", "/v1/admin", "/v1/fpga/kernels")
#: Where /docs and /redoc find Swagger UI and ReDoc: files of the fastapi-offline package, no CDN.
DOCS_ASSETS = "/docs/assets"


def _operation_id(route: APIRoute) -> str:
    """Stable OpenAPI operation ids: the endpoint's name unless the route sets one."""
    return route.name


def _metrics(app: FastAPI) -> None:
    registry = CollectorRegistry()
    requests = Counter("preflight_requests_total", "HTTP requests", ["route", "status"], registry=registry)
    latency = Histogram(
        "preflight_request_seconds",
        "HTTP request latency",
        ["route"],
        registry=registry,
        buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
    )

    app.add_middleware(Observed, requests=requests, latency=latency)

    @app.get("/metrics", include_in_schema=False)
    def metrics() -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)


def _docs(app: FastAPI) -> None:
    """``/docs`` (Swagger UI) and ``/redoc`` from files shipped in a package, so that they work air-gapped."""
    app.mount(DOCS_ASSETS, StaticFiles(packages=[("fastapi_offline", "static")]), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "").rstrip("/")
        return get_swagger_ui_html(
            openapi_url=f"{root}{app.openapi_url}",
            title=f"{app.title} - Swagger UI",
            swagger_js_url=f"{root}{DOCS_ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{DOCS_ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{root}{DOCS_ASSETS}/favicon.png",
            swagger_ui_parameters={"validatorUrl": None},  # no badge from validator.swagger.io
        )

    @app.get("/redoc", include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "").rstrip("/")
        return get_redoc_html(
            openapi_url=f"{root}{app.openapi_url}",
            title=f"{app.title} - ReDoc",
            redoc_js_url=f"{root}{DOCS_ASSETS}/redoc.standalone.js",
            redoc_favicon_url=f"{root}{DOCS_ASSETS}/favicon.png",
            with_google_fonts=False,
        )


def _document_items(app: FastAPI) -> None:
    """The OpenAPI document names each predict route's item model (the routes validate items off the
    event loop, so FastAPI sees only their JSON)."""
    generate = app.openapi

    def openapi() -> dict:
        if app.openapi_schema is None:
            app.openapi_schema = predict.item_schemas(generate())
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def create_app(settings: Settings | None = None, bootstrap: bool = False) -> FastAPI:
    """The app. With ``bootstrap``, models are loaded and missing champions trained in the background
    (the lead task first), so ``/healthz`` answers at once, each task as soon as its own model loads,
    and ``/readyz`` says which tasks answer and which are still training."""
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        app.state.api_keys = api_keys(settings)
        models = app.state.models = ServedModels.create(settings)
        app.state.devices = models.devices
        if bootstrap:
            threading.Thread(
                target=models.start, args=(True,), name="preflight-bootstrap", daemon=True
            ).start()
        else:
            models.start(bootstrap=False)
        stop = threading.Event()
        threading.Thread(target=models.watch, args=(stop,), name="preflight-reload", daemon=True).start()
        yield
        stop.set()

    app = FastAPI(
        title="preflight",
        summary="Performance estimates before anything runs",
        version="0.1.0",
        lifespan=lifespan,
        docs_url=None,  # served by _docs from local files
        redoc_url=None,
        generate_unique_id_function=_operation_id,
        max_body_size=settings.max_body_bytes,  # larger bodies: 413, refused as they arrive
    )
    errors.install(app)
    _docs(app)
    app.include_router(health.router)
    app.include_router(admin.router)
    # reads need a key only when configured so; the OpenAPI document then says so too
    reads = [Depends(require_api_key)] if settings.protect_reads else []
    responses = errors.RESPONSES | (KEY_RESPONSES if settings.protect_reads else {})
    for router in (
        tasks.router, devices.router, predict.router(), actions.router(), whatif.router, fpga.router,
        reasons.router,
    ):  # fmt: skip
        app.include_router(router, dependencies=reads, responses=responses)
    _document_items(app)
    app.add_middleware(Deadline, seconds=settings.request_timeout_s, exempt=CHANGES_STATE)
    _metrics(app)
    app.add_middleware(HeadAsGet)
    return app
