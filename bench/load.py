"""Load on 127.0.0.1: preflight's ``/v1/gemm/predict`` beside MLflow's scoring server on the same booster.

One run starts two single-process servers and measures both with the same asyncio client (aiohttp):

- preflight: ``uvicorn --factory preflight.service.app:create_app`` on a copy of ``--home`` (its
  ``mlflow.db`` and small files; its artifacts are linked, not copied), or on a temporary home where
  ``preflight train gemm --family tree`` trains a champion first (a few minutes on 2 busy cores):
  MLflow serves the same LightGBM booster, so the gemm champion must be a tree (the default family
  is physics, whose shape term is several boosters inside a law);
- MLflow: the gemm champion's LightGBM booster (``predictor/family/runtime_ms.lgb``) logged with
  ``mlflow.lightgbm.log_model`` into a temporary MLflow store and served by ``mlflow models serve
  --env-manager local -w 1``. Its input is the feature matrix that booster sees (preflight's
  featurizer, run client-side before the clock starts), sent as ``{"dataframe_split": ...}``; it
  answers the booster's raw output, without preflight's featurizing, calibration, intervals,
  out-of-distribution flags and derived power/energy.

Rows: (a) 1-item requests from ``--clients`` concurrent clients; (b) 1,000-item batches from 4
clients; (c) the response size for 1,000 out-of-distribution items; (d) requests lost (5xx or
connection errors) while the gemm ``champion`` alias moves to a second version (registered from the
champion's artifacts) and ``POST /v1/admin/reload`` runs under load; (e) health-probe latency while
a 50 MB invalid body goes to the predict route; (f) the serving processes' RSS. Each timed phase
lasts ``--seconds``. Prints a markdown table and the commands; exits non-zero only on a script error.

    .venv/bin/python bench/load.py [--home DIR] [--seconds N]
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiohttp
import numpy as np
import psutil

if TYPE_CHECKING:
    from preflight.models.families.tree import TreeFamily

BIN = Path(sys.executable).parent
API_KEY = "load-bench-key-0123456789"
PREDICT = "/v1/gemm/predict"
RELOAD = "/v1/admin/reload"
DTYPES = ("fp32", "fp16", "bf16")
DEVICES = ("NV_P100", "Tesla V100-SXM2-16GB", "NVIDIA GeForce RTX 4070", "AMD_MI25")
OOD_DEVICE = "NVIDIA H100 80GB HBM3"
BATCH = 1000
BATCH_CLIENTS = 4
POOL = 256  # distinct 1-item bodies, cycled


def log(message: str) -> None:
    print(f"[load] {message}", file=sys.stderr, flush=True)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n", 1)[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument("--home", type=Path, help="PREFLIGHT_HOME with a gemm champion (default: train one)")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each timed phase")
    parser.add_argument("--clients", type=int, default=32, help="concurrent clients for 1-item requests")
    parser.add_argument("--body-mb", type=int, default=50, help="size of the invalid body in row (e)")
    return parser.parse_args(argv)


# ----------------------------------------------------------------------------- the model on both sides


def prepare_home(home: Path | None, work: Path, commands: list[str]) -> Path:
    """A home the bench may change: a copy of ``home`` (its tables left out, its artifacts linked,
    since the bench only reads them), or a new one with a gemm champion from ``preflight train gemm
    --family tree``."""
    target = work / "home"
    if home is not None:
        shutil.copytree(home, target, ignore=shutil.ignore_patterns("artifacts", "tables"))
        (target / "artifacts").symlink_to((home / "artifacts").resolve(), target_is_directory=True)
        return target
    command = [str(BIN / "preflight"), "train", "gemm", "--family", "tree"]
    commands.append(f"PREFLIGHT_HOME={target} {shlex.join(command)}")
    log("training a gemm champion (preflight train gemm --family tree)")
    subprocess.run(command, env=preflight_env(target), check=True, stdout=subprocess.DEVNULL)
    return target


def second_version(home: Path) -> Callable[[], str]:
    """Register the champion's artifacts again as a new version; returns what moves the alias there."""
    from preflight.data.settings import Settings
    from preflight.models.registry import tracking

    client = tracking.client(Settings(home=home))
    name = tracking.model_name("gemm")
    champion = client.get_model_version_by_alias(name, tracking.CHAMPION)
    new = client.create_model_version(name, champion.source, champion.run_id, tags=champion.tags)

    def move() -> str:
        client.set_registered_model_alias(name, tracking.CHAMPION, new.version)
        return f"v{champion.version} -> v{new.version}"

    return move


def champion_booster(home: Path, work: Path) -> TreeFamily:
    """The gemm champion's tree family (booster and feature columns), read from its run's artifacts."""
    from preflight.data.settings import Settings
    from preflight.models.families.tree import TreeFamily
    from preflight.models.registry import tracking

    client = tracking.client(Settings(home=home))
    version = client.get_model_version_by_alias(tracking.model_name("gemm"), tracking.CHAMPION)
    work.mkdir(parents=True, exist_ok=True)
    folder = Path(client.download_artifacts(version.run_id, "predictor/family", str(work)))
    if not (folder / "tree.json").exists():
        raise SystemExit(
            f"the gemm champion of {home} is not a tree: MLflow serves its booster beside preflight, so "
            "train the bench's home with `preflight train gemm --family tree`"
        )
    return TreeFamily.load(folder)


def log_booster(family: TreeFamily, example: dict, store: str) -> str:
    """The primary target's booster logged to ``store`` (now MLflow's global tracking URI) with a
    float signature; its model URI."""
    import lightgbm as lgb
    import mlflow
    import pandas as pd
    from mlflow.models import infer_signature

    mlflow.set_tracking_uri(store)
    split = example["dataframe_split"]
    frame = pd.DataFrame(split["data"], columns=split["columns"], dtype=float)
    booster = family.boosters_["runtime_ms"]
    requirements = [f"lightgbm=={lgb.__version__}"]
    info = mlflow.lightgbm.log_model(
        booster, name="model", signature=infer_signature(frame), pip_requirements=requirements
    )
    return info.model_uri


def gemm_items(count: int, seed: int, ood: bool = False) -> list[dict[str, Any]]:
    """Seeded GEMM items: shapes log-uniform in [1, 16384] on measured devices, or (``ood``) in
    [2^20, 2^26], far past every training shape, on an H100."""
    rng = np.random.default_rng(seed)
    low, high = (20, 26) if ood else (0, 14)
    dims = np.rint(2 ** rng.uniform(low, high, size=(count, 3))).astype(int)
    return [
        {
            "m": int(m),
            "n": int(n),
            "k": int(k),
            "dtype": DTYPES[i % len(DTYPES)],
            "device": OOD_DEVICE if ood else DEVICES[i % len(DEVICES)],
        }
        for i, (m, n, k) in enumerate(dims)
    ]


class Bodies:
    """Request bodies for both servers, serialized ahead of the clock: items for preflight, the
    booster's feature matrix of the same items for MLflow."""

    def __init__(self, home: Path, columns: list[str]) -> None:
        from preflight.data.catalogue import Catalogue
        from preflight.models.core.task import get_task

        self.task, self.columns = get_task("gemm"), columns
        self.catalogue = Catalogue.load(home / "devices.json")

    def split(self, items: list[dict]) -> dict:
        """``{"dataframe_split": ...}`` of the items' feature matrix (NaN as null)."""
        rows = self.task.items_to_rows([self.task.item(**item) for item in items])
        X = self.task.featurize(rows, self.catalogue).X[self.columns]
        return {"dataframe_split": json.loads(X.to_json(orient="split", index=False))}

    def each(self, server: str, items: list[dict]) -> list[bytes]:
        """One 1-item body per item (featurized together)."""
        if server == "preflight":
            return [json.dumps({"items": [item]}).encode() for item in items]
        split = self.split(items)["dataframe_split"]
        return [json.dumps({"dataframe_split": split | {"data": [row]}}).encode() for row in split["data"]]

    def batch(self, server: str, items: list[dict]) -> bytes:
        """One body with every item."""
        return json.dumps({"items": items} if server == "preflight" else self.split(items)).encode()


# ----------------------------------------------------------------------------- servers


@dataclass
class Server:
    name: str
    command: list[str]
    env: dict[str, str]
    health: str
    predict: str
    port: int = 0
    proc: subprocess.Popen | None = None
    log_path: Path | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, work: Path) -> None:
        self.log_path = work / f"{self.name}.log"
        with self.log_path.open("wb") as out:
            self.proc = subprocess.Popen(
                self.command, env=self.env, cwd=work, stdout=out, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True,
            )  # fmt: skip

    def wait_up(self, timeout: float = 600.0) -> None:
        """Poll the health route until it answers 200 (uvicorn listens once its lifespan started)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited {self.proc.returncode}:\n{self.log_tail()}")
            try:
                if request(self.port, "GET", self.health, timeout=2)[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.5)
        raise RuntimeError(f"{self.name} not up after {timeout:.0f} s:\n{self.log_tail()}")

    def log_tail(self, lines: int = 20) -> str:
        assert self.log_path is not None
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def rss_mb(self) -> float:
        """RSS of the serving process: the deepest descendant (uvicorn under ``mlflow``), else itself."""
        assert self.proc is not None
        process = psutil.Process(self.proc.pid)
        serving = (process.children(recursive=True) or [process])[-1]
        return serving.memory_info().rss / 2**20

    def stop(self) -> None:
        """SIGTERM to the server's process group, SIGKILL after 10 s."""
        if self.proc is None or self.proc.poll() is not None:
            return
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.proc.pid, sig)
                self.proc.wait(timeout=10)
                return
            except ProcessLookupError:
                return
            except subprocess.TimeoutExpired:
                continue


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def preflight_env(home: Path) -> dict[str, str]:
    """The environment minus the caller's PREFLIGHT_* and MLflow URI, with this home and the bench key."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("PREFLIGHT_") and k != "MLFLOW_TRACKING_URI"
    }
    return env | {"PREFLIGHT_HOME": str(home), "PREFLIGHT_API_KEYS": json.dumps([API_KEY])}


def preflight_server(home: Path) -> Server:
    command = [str(BIN / "uvicorn"), "--factory", "preflight.service.app:create_app"]
    command += ["--host", "127.0.0.1", "--port", str(port := free_port())]
    return Server("preflight", command, preflight_env(home), "/healthz", PREDICT, port)


def mlflow_server(model_uri: str, store: str) -> Server:
    port = free_port()
    command = [str(BIN / "mlflow"), "models", "serve", "-m", model_uri, "--env-manager", "local"]
    command += ["-p", str(port), "--host", "127.0.0.1", "-w", "1"]
    env = os.environ | {"MLFLOW_TRACKING_URI": store, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    return Server("mlflow", command, env, "/ping", "/invocations", port)


# ----------------------------------------------------------------------------- load


@dataclass
class Load:
    latencies_ms: list[float] = field(default_factory=list)
    statuses: Counter = field(default_factory=Counter)
    errors: Counter = field(default_factory=Counter)
    wall_s: float = 0.0

    def percentile(self, q: float) -> float:
        return float(np.percentile(self.latencies_ms, q)) if self.latencies_ms else float("nan")

    @property
    def ok(self) -> int:
        return self.statuses[200]

    @property
    def lost(self) -> int:
        """5xx answers and connection errors."""
        return sum(n for s, n in self.statuses.items() if s >= 500) + sum(self.errors.values())

    @property
    def failed(self) -> int:
        return len(self.latencies_ms) - self.ok


HEADERS = {"X-API-Key": API_KEY, "Content-Type": "application/json", "Accept-Encoding": "identity"}


def request(
    port: int, method: str, path: str, body: bytes | None = None, timeout: float = 120
) -> tuple[int, bytes]:
    """One blocking request on a fresh connection: (status, body)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request(method, path, body=body, headers=HEADERS)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def client(url: str, connections: int = 1) -> aiohttp.ClientSession:
    connector = aiohttp.TCPConnector(limit=connections)
    timeout = aiohttp.ClientTimeout(total=120)
    return aiohttp.ClientSession(url, headers=HEADERS, connector=connector, timeout=timeout)


async def timed_post(session: aiohttp.ClientSession, path: str, body: bytes, load: Load) -> bytes:
    """Post one body, recording its latency and status (or error); the answer's body."""
    start = time.perf_counter()
    content = b""
    try:
        async with session.post(path, data=body) as response:
            content = await response.read()
            load.statuses[response.status] += 1
    except (aiohttp.ClientError, TimeoutError) as exc:
        load.errors[type(exc).__name__] += 1
    load.latencies_ms.append((time.perf_counter() - start) * 1e3)
    return content


async def get(session: aiohttp.ClientSession, path: str) -> int:
    async with session.get(path) as response:
        await response.read()
        return response.status


async def closed_loop(server: Server, bodies: list[bytes], seconds: float, clients: int) -> Load:
    """``clients`` coroutines, each posting the next body as soon as its last one is answered."""
    load = Load()
    async with client(server.url, clients) as session:
        await asyncio.gather(*(get(session, server.health) for _ in range(clients)))  # open connections
        deadline = time.perf_counter() + seconds

        async def worker(i: int) -> None:
            while time.perf_counter() < deadline:
                await timed_post(session, server.predict, bodies[i % len(bodies)], load)
                i += clients

        start = time.perf_counter()
        await asyncio.gather(*(worker(i) for i in range(clients)))
        load.wall_s = time.perf_counter() - start
    return load


async def reload_under_load(
    server: Server, bodies: list[bytes], seconds: float, clients: int, move: Callable[[], str]
) -> tuple[Load, str]:
    """1-item load for ``seconds``; half-way, the alias moves and the admin reload is called."""
    running = asyncio.create_task(closed_loop(server, bodies, seconds, clients))
    await asyncio.sleep(seconds / 2)
    moved = await asyncio.to_thread(move)
    reload, check = Load(), Load()
    async with client(server.url) as session:
        await timed_post(session, RELOAD, b"", reload)
        version = json.loads(await timed_post(session, PREDICT, bodies[0], check))["model"]["version"]
    load, status = await running, next(iter(reload.statuses), "error")
    if status == 404:
        return load, "reload route missing"
    return load, f"alias {moved}, reload {status}, now serving v{version}"


def upload(port: int, path: str, body: bytes) -> str:
    """Post a big body on its own connection; the answer (read even when the server stopped reading
    the body early), and how long it took."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    start, cut = time.perf_counter(), ""
    try:
        try:
            connection.request("POST", path, body=body, headers=HEADERS)
        except OSError as exc:
            cut = f", body cut off ({type(exc).__name__})"
        outcome = f"HTTP {connection.getresponse().status}{cut}"
    except (OSError, http.client.HTTPException) as exc:
        outcome = f"no answer ({type(exc).__name__}){cut}"
    finally:
        connection.close()
    return f"{outcome} after {time.perf_counter() - start:.1f} s"


async def health_during_upload(server: Server, size_mb: int) -> tuple[Load, str]:
    """Sequential health probes while another thread sends ``size_mb`` MB of invalid JSON to predict
    (for 1 s at least)."""
    body = b'{"items": [], "pad": "' + b"a" * (size_mb * 2**20)  # an unterminated string
    probes = Load()
    async with client(server.url) as session:
        await get(session, server.health)
        sending = asyncio.create_task(asyncio.to_thread(upload, server.port, server.predict, body))
        deadline = time.perf_counter() + 1.0
        while not sending.done() or time.perf_counter() < deadline:
            start = time.perf_counter()
            probes.statuses[await get(session, server.health)] += 1
            probes.latencies_ms.append((time.perf_counter() - start) * 1e3)
    return probes, f"{await sending}, {len(probes.latencies_ms)} probes"


def flagged(answer: bytes) -> int:
    """Predictions that preflight flags out of distribution."""
    return sum(bool(p["ood"]) for p in json.loads(answer)["predictions"])


# ----------------------------------------------------------------------------- the run


def ratio(a: float | str, b: float | str) -> str:
    if isinstance(a, str) or isinstance(b, str) or not b or not np.isfinite(a) or not np.isfinite(b):
        return "-"
    return f"{a / b:.2f}"


@dataclass
class Table:
    rows: list[tuple[str, str, str, str]] = field(default_factory=list)

    def add(self, what: str, preflight: float | str, mlflow: float | str, fmt: str = ",.1f") -> None:
        cells = [v if isinstance(v, str) else format(v, fmt) for v in (preflight, mlflow)]
        self.rows.append((what, cells[0], cells[1], ratio(preflight, mlflow)))

    def markdown(self) -> str:
        lines = ["| measure | preflight | MLflow | preflight / MLflow |", "| --- | ---: | ---: | ---: |"]
        rows = sorted(self.rows, key=lambda row: row[0][:3])  # by letter, in measuring order within one
        return "\n".join([*lines, *(f"| {' | '.join(row)} |" for row in rows)])


Servers = dict[str, Server]


async def single_rows(
    table: Table, servers: Servers, bodies: dict[str, list[bytes]], args: argparse.Namespace
) -> None:
    """(a): a 1-second warm-up, then ``--clients`` clients of 1-item requests, one server at a time."""
    loads = {}
    for name, server in servers.items():
        log(f"{name}: warm-up, then (a) 1-item load for {args.seconds:.0f} s")
        await closed_loop(server, bodies[name], 1.0, 4)
        loads[name] = await closed_loop(server, bodies[name], args.seconds, args.clients)
    pf, ml = loads["preflight"], loads["mlflow"]
    what = f"(a) 1 item, {args.clients} clients"
    table.add(f"{what}: p50 ms", pf.percentile(50), ml.percentile(50), ".2f")
    table.add(f"{what}: p99 ms", pf.percentile(99), ml.percentile(99), ".2f")
    table.add(f"{what}: requests/s", pf.ok / pf.wall_s, ml.ok / ml.wall_s)
    failed = {name: f"{load.failed} of {len(load.latencies_ms)}" for name, load in loads.items()}
    table.add(f"{what}: failed of sent", failed["preflight"], failed["mlflow"])


async def batch_rows(table: Table, servers: Servers, bodies: Bodies, args: argparse.Namespace) -> None:
    """(b) items/s of 1,000-item batches and (c) the size of the answer to 1,000 OOD items."""
    batches = [gemm_items(BATCH, 10_000 + seed) for seed in range(8)]
    per_s = {}
    for name, server in servers.items():
        log(f"{name}: (b) {BATCH}-item batches for {args.seconds:.0f} s")
        load = await closed_loop(
            server, [bodies.batch(name, b) for b in batches], args.seconds, BATCH_CLIENTS
        )
        per_s[name] = load.ok * BATCH / load.wall_s
    table.add(f"(b) {BATCH:,}-item batches, {BATCH_CLIENTS} clients: items/s", *per_s.values(), ",.0f")
    ood = gemm_items(BATCH, 99, ood=True)
    answers = {
        name: request(server.port, "POST", server.predict, bodies.batch(name, ood))
        for name, server in servers.items()
    }
    if any(status != 200 for status, _ in answers.values()):
        raise RuntimeError(f"(c) got {[status for status, _ in answers.values()]}")
    what = (
        f"(c) response bytes, {BATCH:,} OOD items ({flagged(answers['preflight'][1])} flagged by preflight)"
    )
    table.add(what, len(answers["preflight"][1]), len(answers["mlflow"][1]), ",d")


async def upload_rows(table: Table, servers: Servers, args: argparse.Namespace) -> None:
    """(e) health-probe latency while a big invalid body is sent."""
    probes, answers = {}, {}
    for name, server in servers.items():
        log(f"{name}: (e) {server.health} while a {args.body_mb} MB invalid body is sent")
        probes[name], answers[name] = await health_during_upload(server, args.body_mb)
    pf, ml = probes["preflight"], probes["mlflow"]
    what = f"(e) /healthz (MLflow: /ping) during a {args.body_mb} MB invalid body"
    table.add(f"{what}: max ms", max(pf.latencies_ms), max(ml.latencies_ms), ".2f")
    table.add(f"{what}: p99 ms", pf.percentile(99), ml.percentile(99), ".2f")
    table.add(f"{what}: the body's answer", answers["preflight"], answers["mlflow"])


async def measure(
    args: argparse.Namespace, servers: Servers, bodies: Bodies, move: Callable[[], str]
) -> Table:
    """Every row, (d) last since it moves the champion alias."""
    table = Table()
    items = gemm_items(POOL, 0)
    single = {name: bodies.each(name, items) for name in servers}
    await single_rows(table, servers, single, args)
    await batch_rows(table, servers, bodies, args)
    table.add("(f) RSS MB of the serving process", servers["preflight"].rss_mb(), servers["mlflow"].rss_mb())
    await upload_rows(table, servers, args)
    log(f"preflight: (d) hot reload under 1-item load for {args.seconds:.0f} s")
    reload, outcome = await reload_under_load(
        servers["preflight"], single["preflight"], args.seconds, args.clients, move
    )
    lost = f"{reload.lost} of {len(reload.latencies_ms)} ({outcome})"
    table.add("(d) lost (5xx, connection errors) during a hot reload", lost, "n/a: no reload route")
    return table


def commands_used(servers: dict[str, Server], home: Path, store: str, earlier: list[str]) -> str:
    pf, ml = servers["preflight"], servers["mlflow"]
    lines = [*earlier, f"PREFLIGHT_HOME={home} PREFLIGHT_API_KEYS='[\"{API_KEY}\"]' {shlex.join(pf.command)}"]
    lines.append(f"MLFLOW_TRACKING_URI={store} {shlex.join(ml.command)}")
    return "\n".join(f"    {line}" for line in lines)


def run(args: argparse.Namespace, work: Path) -> str:
    commands: list[str] = []
    home = prepare_home(args.home, work, commands)
    family = champion_booster(home, work / "booster")
    bodies = Bodies(home, family.columns_)
    move = second_version(home)
    store = f"sqlite:///{work / 'mlflow-serve.db'}"
    model_uri = log_booster(family, bodies.split(gemm_items(1, 0)), store)  # last: sets MLflow's URI
    servers = {"preflight": preflight_server(home), "mlflow": mlflow_server(model_uri, store)}
    try:
        for server in servers.values():
            server.start(work)
        for server in servers.values():
            server.wait_up()
            log(f"{server.name} up on {server.url}")
        loaded = json.loads(request(servers["preflight"].port, "GET", "/readyz")[1])["loaded"]
        table = asyncio.run(measure(args, servers, bodies, move))
    finally:
        for server in servers.values():
            server.stop()
    notes = f"preflight champions loaded: {', '.join(loaded)}; both servers: one uvicorn process."
    return f"{table.markdown()}\n\n{notes}\n\nCommands:\n\n{commands_used(servers, home, store, commands)}"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # `finally` stops the servers
    with tempfile.TemporaryDirectory(prefix="preflight-load-") as work:
        print(run(args, Path(work)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
