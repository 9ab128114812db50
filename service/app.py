"""``create_app(settings)``: the FastAPI app, its lifespan (load models, watch for new champions),
limits and Prometheus metrics."""

import asyncio
import threading
import time
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI, Request, Response
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from preflight.data.settings import Settings
from preflight.service import errors
from preflight.service.deps import KEY_RESPONSES, require_read_key
from preflight.service.routes import (
    admin,
    devices,
    fpga,
    health,
    interference,
    nas,
    predict,
    reasons,
    tasks,
    whatif,
)
from preflight.service.state import ServiceState
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest


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

    @app.middleware("http")
    async def observe(request: Request, call_next):
        start = time.perf_counter()
        response = await call_next(request)
        route = request.scope.get("route")
        path = route.path if route is not None else "unmatched"
        latency.labels(path).observe(time.perf_counter() - start)
        requests.labels(path, str(response.status_code)).inc()
        return response

    @app.get("/metrics", include_in_schema=False)
    def metrics() -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)


def create_app(settings: Settings | None = None, bootstrap: bool = False) -> FastAPI:
    """The app. With ``bootstrap``, missing champions are trained in the background after start-up,
    so ``/healthz`` answers at once and ``/readyz`` says 503 until they are loaded."""
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        state = app.state.preflight = ServiceState.create(settings)
        if bootstrap:
            threading.Thread(
                target=state.start, args=(True,), name="preflight-bootstrap", daemon=True
            ).start()
        else:
            state.start(bootstrap=False)
        stop = threading.Event()
        threading.Thread(target=state.watch, args=(stop,), name="preflight-reload", daemon=True).start()
        yield
        stop.set()

    app = FastAPI(
        title="preflight",
        summary="Performance estimates before anything runs",
        version="0.1.0",
        lifespan=lifespan,
        generate_unique_id_function=_operation_id,
        max_body_size=settings.max_body_bytes,  # larger bodies: 413, refused as they arrive
    )
    errors.install(app)
    app.include_router(health.router)
    app.include_router(admin.router)
    reads, responses = [Depends(require_read_key)], errors.RESPONSES | KEY_RESPONSES
    routers = (tasks.router, devices.router, predict.router(), nas.router, whatif.router, interference.router)
    for router in (*routers, fpga.router, reasons.router):
        app.include_router(router, dependencies=reads, responses=responses)
    _deadline(app, settings.request_timeout_s)
    _metrics(app)
    return app


#: Paths of routes that change state: they run to the end, never cut off by the deadline.
CHANGES_STATE = ("/v1/devices", "/v1/admin")


def _deadline(app: FastAPI, seconds: float) -> None:
    """A request running past ``seconds`` gets a 504 (its work finishes in the background); routes
    that change state are exempt, so a client is never told 504 about a change that then lands."""

    @app.middleware("http")
    async def deadline(request: Request, call_next):
        if request.url.path.startswith(CHANGES_STATE):  # a change must not go on after its client is told 504
            return await call_next(request)
        try:
            return await asyncio.wait_for(call_next(request), seconds)
        except TimeoutError:
            detail = f"no answer within {seconds:g} s (PREFLIGHT_REQUEST_TIMEOUT_S); try fewer items"
            return JSONResponse({"detail": detail}, status_code=504)
