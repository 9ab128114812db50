"""``create_app(settings)``: the FastAPI app, its lifespan (load champions) and Prometheus metrics."""

import threading
import time
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI, Request, Response
from fastapi.routing import APIRoute
from preflight.data.settings import Settings
from preflight.service import errors
from preflight.service.deps import require_api_key
from preflight.service.routes import devices, fpga, health, interference, nas, predict, tasks, whatif
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
        yield

    app = FastAPI(
        title="preflight",
        summary="Performance estimates before anything runs",
        version="0.1.0",
        lifespan=lifespan,
        generate_unique_id_function=_operation_id,
    )
    errors.install(app)
    app.include_router(health.router)
    secured = [Depends(require_api_key)]
    app.include_router(tasks.router, dependencies=secured)
    app.include_router(devices.router, dependencies=secured)
    app.include_router(predict.router(), dependencies=secured)
    app.include_router(nas.router, dependencies=secured)
    app.include_router(whatif.router, dependencies=secured)
    app.include_router(interference.router, dependencies=secured)
    app.include_router(fpga.router, dependencies=secured)
    _metrics(app)
    return app
