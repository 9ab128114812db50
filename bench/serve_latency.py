"""End-to-end latency and throughput of ``POST /v1/gemm/predict`` on a real ``preflight serve``.

What it measures, on one freshly started server (127.0.0.1, a free port):

- ``single``: N sequential requests of 1 item each (default 300);
- ``batch``: N sequential requests of 1,000 items each (default 30);
- ``concurrent``: 4 client threads sending 1-item requests at the same time, for ``--max-seconds``/2.

Requests go through the standard library's ``http.client`` on persistent (keep-alive) connections,
one per client thread. Each figure is the wall time one request takes as the client sees it (send,
server work, reading the whole response), without the warm-up requests that come first. Every phase
stops after its request count or after its time budget, whichever comes first. Items are varied and
seeded (``numpy.random.default_rng(0)``): m, n, k log-uniform in [1, 16384], dtype among
fp32/fp16/bf16/fp64, devices cycling through real catalogue names. Every response must be a 200
carrying one prediction per item; anything else is counted as a failure, and a run with failures
exits 1.

The server gets ``PREFLIGHT_HOME`` = a temporary folder (so it trains its champions first, ~1 min
on 2 cores) unless ``--home DIR`` is given (a home that already holds champions skips training).
``PREFLIGHT_DATASETS`` is removed from its environment unless ``--datasets DIR`` is given, and so
are ``PREFLIGHT_API_KEYS`` and ``MLFLOW_TRACKING_URI``, so it runs without auth and keeps all of
its state in its home. Its log goes to ``bench/out/serve_latency_server.log``.

Prints a table on stdout and writes the same numbers to ``bench/out/serve_latency.json``.

Run from the repository root::

    .venv/bin/python bench/serve_latency.py
    .venv/bin/python bench/serve_latency.py --home /tmp/pf-home --single 100 --batch 10 --max-seconds 20
"""

from __future__ import annotations

import argparse
import datetime as dt
import http.client
import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from preflight.models.registry import tracking

REPO = Path(__file__).resolve().parents[1]
OUT_DIR = REPO / "bench" / "out"
PREDICT_PATH = "/v1/gemm/predict"
DTYPES = ("fp32", "fp16", "bf16", "fp64")
DEVICES = (
    "NV_P100",
    "Tesla V100-SXM2-16GB",
    "NVIDIA GeForce RTX 4070",
    "NVIDIA H100 80GB HBM3",
    "AMD_MI25",
    "Intel(R) Xeon(R) Gold 6226 CPU @ 2.70GHz",
)
MAX_DIM = 16384
MAX_ERRORS_KEPT = 10


def log(message: str) -> None:
    print(f"[serve_latency] {message}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- arguments


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n", 1)[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument("--single", type=int, default=300, help="requests of 1 item (sequential)")
    parser.add_argument("--batch", type=int, default=30, help="requests of --batch-size items (sequential)")
    parser.add_argument(
        "--batch-size", type=int, default=1000, help="items per batch request (at most 10,000)"
    )
    parser.add_argument("--threads", type=int, default=4, help="client threads in the concurrent phase")
    parser.add_argument(
        "--warmup", type=int, default=5, help="uncounted requests of each size before measuring"
    )
    parser.add_argument(
        "--max-seconds",
        type=float,
        default=60.0,
        help="time budget of each sequential phase; the concurrent phase gets half",
    )
    parser.add_argument(
        "--startup-timeout", type=float, default=600.0, help="seconds to wait for /readyz = 200"
    )
    parser.add_argument("--request-timeout", type=float, default=120.0, help="seconds for one request")
    parser.add_argument("--coverage", type=float, default=0.9, help="interval coverage asked for")
    parser.add_argument(
        "--home", type=Path, default=None, help="PREFLIGHT_HOME to use (default: a temporary folder)"
    )
    parser.add_argument(
        "--datasets", type=Path, default=None, help="PREFLIGHT_DATASETS to pass (default: unset)"
    )
    parser.add_argument("--out", type=Path, default=OUT_DIR / "serve_latency.json", help="JSON results file")
    args = parser.parse_args(argv)
    if min(args.single, args.batch, args.batch_size, args.threads) < 1 or args.warmup < 0:
        parser.error("--single, --batch, --batch-size and --threads must be >= 1, --warmup >= 0")
    if args.batch_size > 10_000:
        parser.error("--batch-size is at most 10,000 (the API's limit)")
    return args


# ----------------------------------------------------------------------------- items


def make_items(rng: np.random.Generator, count: int, start: int) -> list[dict[str, Any]]:
    """``count`` GEMM items: log-uniform shapes, random dtypes, devices cycling from index ``start``."""
    dims = np.exp(rng.uniform(0.0, np.log(MAX_DIM), size=(count, 3)))
    dims = np.clip(np.rint(dims), 1, MAX_DIM).astype(int)
    dtypes = rng.integers(0, len(DTYPES), size=count)
    return [
        {
            "m": int(m),
            "n": int(n),
            "k": int(k),
            "dtype": DTYPES[d],
            "device": DEVICES[(start + i) % len(DEVICES)],
        }
        for i, ((m, n, k), d) in enumerate(zip(dims, dtypes))
    ]


class ItemSource:
    """One seeded stream of items, handed out as request bodies in order."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)
        self.issued = 0

    def bodies(self, requests: int, size: int, coverage: float) -> list[dict[str, Any]]:
        out = []
        for _ in range(requests):
            out.append({"items": make_items(self.rng, size, self.issued), "coverage": coverage})
            self.issued += size
        return out


# ----------------------------------------------------------------------------- HTTP client


class Client:
    """A persistent HTTP/1.1 connection to the server (reopened once if the server dropped it)."""

    def __init__(self, port: int, timeout: float) -> None:
        self.port, self.timeout = port, timeout
        self.conn: http.client.HTTPConnection | None = None

    def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, bytes]:
        """(status, body) of one request; raises OSError / http.client.HTTPException on transport errors."""
        payload = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"} if payload is not None else {}
        for attempt in (0, 1):
            reused = self.conn is not None
            if self.conn is None:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
            try:
                self.conn.request(method, path, body=payload, headers=headers)
                response = self.conn.getresponse()
                return response.status, response.read()
            except (OSError, http.client.HTTPException):
                self.close()
                if attempt == 1 or not reused:  # only a stale keep-alive connection gets a second try
                    raise
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


TRANSPORT_ERRORS = (OSError, http.client.HTTPException)


# ----------------------------------------------------------------------------- server


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def preflight_command() -> list[str]:
    """The ``preflight`` console script next to this interpreter, else the one on PATH."""
    beside = Path(sys.executable).parent / "preflight"
    found = str(beside) if beside.exists() else shutil.which("preflight")
    if found is None:
        raise SystemExit("no `preflight` console script found: install the project (pip install -e .)")
    return [found]


def server_env(home: Path, datasets: Path | None) -> dict[str, str]:
    env = dict(os.environ)
    for name in ("PREFLIGHT_DATASETS", "PREFLIGHT_API_KEYS", "MLFLOW_TRACKING_URI"):
        env.pop(name, None)
    env["PREFLIGHT_HOME"] = str(home)
    if datasets is not None:
        env["PREFLIGHT_DATASETS"] = str(datasets.resolve())
    return env


def start_server(port: int, home: Path, datasets: Path | None, log_path: Path) -> subprocess.Popen:
    """``preflight serve`` in its own session (so we can stop it and its children together)."""
    command = preflight_command() + ["serve", "--host", "127.0.0.1", "--port", str(port)]
    log(f"starting: {' '.join(command)} (PREFLIGHT_HOME={home}, log: {log_path})")
    log_file = log_path.open("wb")
    try:
        return subprocess.Popen(
            command,
            env=server_env(home, datasets),
            cwd=home,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    finally:
        log_file.close()  # the child holds its own descriptor


def stop_server(proc: subprocess.Popen, grace: float = 15.0) -> None:
    """SIGTERM to the server's process group, SIGKILL after ``grace`` seconds."""
    if proc.poll() is not None:
        return
    log(f"stopping server (pid {proc.pid})")
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def log_tail(log_path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(log_path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def wait_ready(proc: subprocess.Popen, port: int, timeout: float, log_path: Path) -> float:
    """Poll ``/readyz`` until every champion is loaded (``"status": "ready"``: a 200 comes as soon as one
    task answers, while others may still train); returns the seconds it took. Raises if the server dies
    or times out."""
    start = time.monotonic()
    last_report = start
    last_status: str = "no answer yet"
    with Client(port, timeout=5.0) as client:
        while True:
            elapsed = time.monotonic() - start
            if proc.poll() is not None:
                raise RuntimeError(
                    f"server exited with code {proc.returncode} after {elapsed:.0f} s:\n{log_tail(log_path)}"
                )
            if elapsed > timeout:
                raise RuntimeError(
                    f"server not ready after {timeout:.0f} s ({last_status}):\n{log_tail(log_path)}"
                )
            try:
                status, body = client.request("GET", "/readyz")
                if status == 200 and json.loads(body)["status"] == "ready":
                    log(f"ready after {elapsed:.1f} s")
                    return elapsed
                last_status = f"/readyz {status}"
            except TRANSPORT_ERRORS:
                last_status = "not listening (training champions?)"
            if time.monotonic() - last_report >= 10:
                tail = log_tail(log_path, 1)[:150]
                log(f"waiting {elapsed:.0f} s: {last_status}; server log: {tail}")
                last_report = time.monotonic()
            time.sleep(0.5)


# ----------------------------------------------------------------------------- measuring


@dataclass
class PhaseResult:
    name: str
    items_per_request: int
    latencies_ms: list[float] = field(default_factory=list)
    failures: int = 0
    errors: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    stopped_early: bool = False

    @property
    def requests(self) -> int:
        return len(self.latencies_ms)

    def record_failure(self, message: str) -> None:
        self.failures += 1
        if len(self.errors) < MAX_ERRORS_KEPT:
            self.errors.append(message)

    def summary(self) -> dict[str, Any]:
        lat = np.asarray(self.latencies_ms) if self.latencies_ms else np.asarray([np.nan])
        p50, p90, p99 = (float(np.percentile(lat, q)) for q in (50, 90, 99))
        rate = self.requests / self.wall_s if self.wall_s > 0 else float("nan")
        return {
            "requests": self.requests,
            "items_per_request": self.items_per_request,
            "failures": self.failures,
            "p50_ms": p50,
            "p90_ms": p90,
            "p99_ms": p99,
            "mean_ms": float(np.mean(lat)),
            "max_ms": float(np.max(lat)),
            "requests_per_s": rate,
            "items_per_s": rate * self.items_per_request,
            "wall_s": self.wall_s,
            "stopped_early": self.stopped_early,
            "errors": self.errors,
        }


def timed_post(client: Client, body: dict[str, Any], result: PhaseResult) -> None:
    """One request: its wall time goes to ``result`` (failed ones too); a non-200 or a short answer is a
    failure."""
    start = time.perf_counter()
    try:
        status, raw = client.request("POST", PREDICT_PATH, body)
    except TRANSPORT_ERRORS as exc:
        result.latencies_ms.append((time.perf_counter() - start) * 1e3)
        result.record_failure(f"{type(exc).__name__}: {exc}")
        return
    result.latencies_ms.append((time.perf_counter() - start) * 1e3)
    text = raw[:300].decode(errors="replace")
    if status != 200:
        result.record_failure(f"HTTP {status}: {text}")
        return
    try:
        predictions = json.loads(raw)["predictions"]
    except (ValueError, KeyError, TypeError) as exc:
        result.record_failure(f"bad body ({type(exc).__name__}): {text}")
        return
    if len(predictions) != len(body["items"]):
        result.record_failure(f"{len(predictions)} predictions for {len(body['items'])} items")


def run_sequential(
    client: Client, name: str, bodies: list[dict[str, Any]], max_seconds: float
) -> PhaseResult:
    """The bodies one after the other, stopping early when ``max_seconds`` have gone by."""
    result = PhaseResult(name, len(bodies[0]["items"]) if bodies else 0)
    start = time.perf_counter()
    for i, body in enumerate(bodies):
        if time.perf_counter() - start >= max_seconds:
            result.stopped_early = True
            log(f"{name}: time budget of {max_seconds:.0f} s spent after {i} of {len(bodies)} requests")
            break
        timed_post(client, body, result)
    result.wall_s = time.perf_counter() - start
    return result


def run_concurrent(
    port: int, name: str, per_thread: list[list[dict[str, Any]]], max_seconds: float, timeout: float
) -> PhaseResult:
    """One thread (and one persistent client) per list of bodies, all started together, until the deadline."""
    parts = [PhaseResult(name, 1) for _ in per_thread]
    barrier = threading.Barrier(len(per_thread) + 1)
    deadline: list[float] = []

    def worker(bodies: list[dict[str, Any]], part: PhaseResult) -> None:
        with Client(port, timeout) as client:
            try:
                client.request("GET", "/healthz")  # open the connection before the clock starts
            except TRANSPORT_ERRORS as exc:
                part.record_failure(f"/healthz before the phase: {type(exc).__name__}: {exc}")
            barrier.wait()
            for body in bodies:
                if time.perf_counter() >= deadline[0]:
                    part.stopped_early = True
                    break
                timed_post(client, body, part)

    threads = [
        threading.Thread(target=worker, args=(bodies, part), daemon=True)
        for bodies, part in zip(per_thread, parts)
    ]
    for thread in threads:
        thread.start()
    deadline.append(time.perf_counter() + max_seconds)  # set before the barrier lets the workers go
    barrier.wait()
    start = time.perf_counter()
    for thread in threads:
        thread.join()
    merged = PhaseResult(
        name,
        parts[0].items_per_request,
        wall_s=time.perf_counter() - start,
        stopped_early=any(p.stopped_early for p in parts),
    )
    for part in parts:
        merged.latencies_ms.extend(part.latencies_ms)
        merged.failures += part.failures
        merged.errors.extend(part.errors[: MAX_ERRORS_KEPT - len(merged.errors)])
    return merged


def measure(port: int, args: argparse.Namespace) -> tuple[list[PhaseResult], PhaseResult]:
    """Warm-up, then the single, batch and concurrent phases; returns (phases, warm-up)."""
    items = ItemSource(seed=0)
    warm_bodies = items.bodies(args.warmup, 1, args.coverage) + items.bodies(
        args.warmup, args.batch_size, args.coverage
    )
    single_bodies = items.bodies(args.single, 1, args.coverage)
    batch_bodies = items.bodies(args.batch, args.batch_size, args.coverage)
    concurrent_bodies = [items.bodies(args.single, 1, args.coverage) for _ in range(args.threads)]

    phases = []
    with Client(port, args.request_timeout) as client:
        log(f"warm-up: {len(warm_bodies)} requests")
        warmup = run_sequential(client, "warm-up", warm_bodies, args.max_seconds)
        log(f"single: up to {args.single} requests of 1 item, {args.max_seconds:.0f} s at most")
        phases.append(run_sequential(client, "single", single_bodies, args.max_seconds))
        log(
            f"batch: up to {args.batch} requests of {args.batch_size} items, {args.max_seconds:.0f} s at most"
        )
        phases.append(run_sequential(client, f"batch x{args.batch_size}", batch_bodies, args.max_seconds))
    log(f"concurrent: {args.threads} threads of 1-item requests, {args.max_seconds / 2:.0f} s at most")
    phases.append(
        run_concurrent(
            port, f"concurrent x{args.threads}", concurrent_bodies, args.max_seconds / 2, args.request_timeout
        )
    )
    return phases, warmup


# ----------------------------------------------------------------------------- reporting


def format_table(summaries: dict[str, dict[str, Any]]) -> str:
    header = (
        f"{'phase':<16}{'requests':>9}{'fail':>6}"
        f"{'p50 ms':>10}{'p90 ms':>10}{'p99 ms':>10}{'req/s':>10}{'items/s':>11}"
    )
    rows = [header, "-" * len(header)]
    for name, s in summaries.items():
        rows.append(
            f"{name:<16}{s['requests']:>9}{s['failures']:>6}{s['p50_ms']:>10.2f}{s['p90_ms']:>10.2f}"
            f"{s['p99_ms']:>10.2f}{s['requests_per_s']:>10.1f}{s['items_per_s']:>11.0f}"
        )
    return "\n".join(rows)


def write_report(
    path: Path,
    args: argparse.Namespace,
    startup_s: float,
    trained: bool,
    summaries: dict[str, dict[str, Any]],
    warmup: dict[str, Any],
) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    config = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    report = {
        "benchmark": "serve_latency",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "git_commit": (tracking.git_commit() or "")[:7] or None,
        "machine": {
            "cpu_count": os.cpu_count(),
            "platform": platform.platform(),
            "machine": platform.machine(),
            "processor": platform.processor() or None,
            "python": platform.python_version(),
        },
        "config": config,
        "startup_s": startup_s,
        "fresh_home": trained,
        "warmup": {
            "requests": warmup["requests"],
            "failures": warmup["failures"],
            "errors": warmup["errors"],
        },
        "phases": summaries,
        "failures": warmup["failures"] + sum(s["failures"] for s in summaries.values()),
    }
    path.write_text(json.dumps(report, indent=2) + "\n")
    log(f"wrote {path}")


# ----------------------------------------------------------------------------- main


def _sigterm_to_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _sigterm_to_interrupt)  # so `finally` stops the server on kill too
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    temporary = args.home is None
    home = Path(tempfile.mkdtemp(prefix="preflight-bench-")) if temporary else args.home.resolve()
    home.mkdir(parents=True, exist_ok=True)
    port = free_port()
    log_path = OUT_DIR / "serve_latency_server.log"
    proc = None
    try:
        proc = start_server(port, home, args.datasets, log_path)
        startup_s = wait_ready(proc, port, args.startup_timeout, log_path)
        phases, warmup = measure(port, args)
    except KeyboardInterrupt:
        log("interrupted")
        return 130
    except RuntimeError as exc:
        log(f"failed: {exc}")
        return 2
    finally:
        if proc is not None:
            stop_server(proc)
        if temporary:
            shutil.rmtree(home, ignore_errors=True)

    summaries = {p.name: p.summary() for p in phases}
    print(format_table(summaries))
    write_report(args.out, args, startup_s, temporary, summaries, warmup.summary())
    failures = warmup.failures + sum(p.failures for p in phases)
    if failures:
        log(f"{failures} failed request(s):")
        for phase in [warmup, *phases]:
            for error in phase.errors:
                log(f"  {phase.name}: {error}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
