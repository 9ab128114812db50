"""Small hostile requests replayed against a live ``preflight serve``: what each costs the service.

    .venv/bin/python bench/attack.py --home /tmp/pf-home [--pythonpath DIR] [--out NAME]

Starts the server on 127.0.0.1 (a free port) on ``--home`` (a home that holds champions: the
sample-trained one the tests build, or a served embedded default), with a 10 s request deadline and
an API key, then sends each attack of issue 25 in turn. Per attack: the HTTP status, the seconds to
the answer, the worst ``/healthz`` latency seen while it ran (probed every 20 ms from another
connection), and the server's CPU seconds spent in the 3 s after the answer (work that outlived
it). Then ``STALLED`` connections that each send part of a request head and nothing more, beside
the server's limit of ``FD_LIMIT`` open descriptors (many systems' default): whether ``/healthz``
answers while they are held and after ``ARRIVAL_TIMEOUT_S``, and how many are still open; and one
connection sending 100 MB of 8-byte headers (the server's RSS before and after). Then the server's
RSS after the large requests against its warm level, and the p99 of
one-item GEMM requests before, during and after the lleaves compile that 10,000 served rows
trigger (a fresh compile cache). ``--pythonpath`` serves another checkout's code (a folder holding
a ``preflight`` package of links, as ``make test`` builds for mypy) for a before/after comparison.
Writes ``bench/out/attack-NAME.json``.
"""

from __future__ import annotations

import argparse
import http.client
import itertools
import json
import os
import resource
import shutil
import socket
import statistics
import subprocess
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from preflight.service.protocol import ARRIVAL_TIMEOUT_S
from serve_latency import Client, free_port, preflight_command, stop_server, wait_ready

OUT = Path(__file__).parent / "out"
KEY = "attack-bench-key-0123456789"
DEADLINE_S = 10
#: The client gives up on an attack after this long (the server may still be at it).
ATTACK_TIMEOUT_S = 60.0
#: Connections held with part of a request head, beyond the server's limit of open descriptors.
STALLED, FD_LIMIT = 1100, 1024
SWITCH = {
    "model_type": "switch_transformers",
    "d_model": 64,
    "d_kv": 16,
    "d_ff": 128,
    "num_heads": 4,
    "vocab_size": 100,
    "num_experts": 4,
}
H100_GEMM = {"m": 4096, "n": 4096, "k": 4096, "dtype": "fp16"}
#: A spec sheet named with the Cyrillic look-alike of H100, with an inflated peak.
LOOK_ALIKE = {
    "id": "lab-h100",
    "name": "\u041d100",
    "kind": "gpu",
    "vendor": "nvidia",
    "peak_tflops": {"fp32": 900.0},
    "memory_bandwidth_gbs": 9000,
    "compute_units": 500,
}


@dataclass
class Attack:
    name: str
    method: str
    path: str
    body: Any = None
    headers: dict[str, str] | None = None


@dataclass
class Outcome:
    name: str
    status: int | str
    seconds: float
    worst_healthz_ms: float
    cpu_after_s: float
    answer: str


def _switch(layers: int | float) -> dict:
    return {"model": SWITCH | {"num_layers": layers}, "batch": 1, "seq": 8, "device": "H100"}


def _dense_graph(nodes: int = 256) -> dict:
    graph = {"nodes": [{"op": "input"}] + [{"op": "conv", "kernel": 3}] * (nodes - 2) + [{"op": "output"}]}
    graph["edges"] = [[a, b] for a, b in itertools.combinations(range(nodes), 2)]
    return {"space": "opgraph", "arch": graph, "dataset": "cifar10", "curve": [0.3, 0.4], "budget": 200}


def attacks() -> list[Attack]:
    repeated = {"nodes": [{"op": "input"}, {"op": "conv", "kernel": 3}, {"op": "skip"}, {"op": "output"}]}
    repeated["edges"] = [[0, 1], [1, 3], [0, 2], [2, 3]] * 60
    tiny_fpga = {
        "nodes": [{"text": "i32", "type": 2}, {"text": "add", "type": 0}],
        "edges": [{"source": 0, "target": 1}],
    }
    big = 2**31 - 1
    bmm = {"op": "bmm", "input_shapes": [[1, big, 1], [1, 1, 65536]], "output_shape": [1, big, 65536]}
    gpt3 = {"model": "gpt3_67", "batch": 1, "seq": 2048, "mode": "train"}
    key = {"X-API-Key": KEY}

    def measurement(**fields: Any) -> dict:
        return {"device": "H100", "task": "gemm", "measurements": [H100_GEMM | fields]}

    return [
        Attack("switch num_layers 1e8", "POST", "/v1/model-latency/predict", {"items": [_switch(10**8)]}),
        Attack(
            "12 x switch num_layers 1e8",
            "POST",
            "/v1/model-latency/predict",
            {"items": [_switch(10**8)] * 12},
        ),
        Attack(
            "opgraph, 4 edges x 60",
            "POST",
            "/v1/nas-curve/predict",
            {
                "items": [
                    {
                        "space": "opgraph",
                        "arch": repeated,
                        "dataset": "cifar10",
                        "curve": [0.3],
                        "budget": 200,
                    }
                ]
            },
        ),
        Attack("4 dense 256-node graphs", "POST", "/v1/nas-curve/predict", {"items": [_dense_graph()] * 4}),
        Attack(
            "what-if, 30 gpt3_67 training items",
            "POST",
            "/v1/whatif",
            {"workload": {"task": "model-latency", "items": [gpt3] * 30}},
        ),
        Attack(
            "10,000 inline FPGA graphs",
            "POST",
            "/v1/fpga/predict",
            {"items": [{"kernel": f"k{i}", "graph": tiny_fpga} for i in range(10_000)]},
        ),
        Attack("non-ASCII X-API-Key", "POST", "/v1/devices", {"device": "H100"}, {"X-API-Key": "k\u00e9y"}),
        Attack(
            "lone surrogate in a body",
            "POST",
            "/v1/gemm/predict",
            '{"items": [{"m": 8, "n": 8, "k": 8, "device": "\\ud800"}]}',
        ),
        Attack(
            "bmm of 2^31-1, model-latency",
            "POST",
            "/v1/model-latency/predict",
            {"items": [{"ops": [bmm], "device": "H100", "mode": "train"}]},
        ),
        Attack(
            "bmm of 2^31-1, what-if",
            "POST",
            "/v1/whatif",
            {"workload": {"task": "model-latency", "items": [{"ops": [bmm]}]}},
        ),
        Attack("H100 GEMM at 31x its peak", "POST", "/v1/devices", measurement(runtime_ms=0.00446), key),
        Attack("H100 GEMM at 1000x the estimate", "POST", "/v1/devices", measurement(runtime_ms=228.0), key),
        Attack(
            "250 kW on a 700 W board",
            "POST",
            "/v1/devices",
            measurement(runtime_ms=0.3, power_w=250_000.0),
            key,
        ),
        Attack(
            "undo a catalogue device's measurements", "DELETE", "/v1/devices/H100/measurements", None, key
        ),
        Attack(
            "Cyrillic look-alike of H100",
            "POST",
            "/v1/devices",
            {"spec": LOOK_ALIKE},
            key,
        ),
        Attack(  # a name normaliser backtracked quadratically over the digits: for good at this size
            "a device name of 1,000,000 digits",
            "POST",
            "/v1/gemm/predict",
            {"items": [{"m": 64, "n": 64, "k": 64, "device": "1" * 1_000_000}]},
        ),
        Attack(  # the source parser split the spaces between two quantifiers in every way
            "FPGA code: a type, 99,000 spaces, no name",
            "POST",
            "/v1/fpga/predict",
            {"items": [{"kernel": "k", "graph": tiny_fpga, "code": "void k(){\nint" + " " * 99_000 + "("}]},
        ),
        Attack(
            "FPGA code: 33,000 comments never closed",
            "POST",
            "/v1/fpga/predict",
            {"items": [{"kernel": "k", "graph": tiny_fpga, "code": "void k(){\n" + "/*a" * 33_000}]},
        ),
        # last: before issue 25 it never answered, and the server answered nothing after it
        Attack(
            "switch num_layers 10**400", "POST", "/v1/model-latency/predict", {"items": [_switch(10**400)]}
        ),
    ]


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class HealthProbe:
    """``GET /healthz`` every 20 ms on its own connection, each probe's start and latency kept."""

    def __init__(self, port: int) -> None:
        self.port, self.probes, self.stop = port, [(0.0, 0.0)], threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        with Client(self.port, timeout=120.0) as client:
            while not self.stop.is_set():
                start = time.perf_counter()
                client.request("GET", "/healthz")
                self.probes.append((start, time.perf_counter() - start))
                time.sleep(0.02)

    def worst(self, start: float, end: float) -> float:
        """The longest a probe sent between ``start`` and ``end`` waited (one still waiting counts)."""
        latencies = [latency for sent, latency in self.probes if start <= sent <= end]
        waiting = time.perf_counter() - self.probes[-1][0] - self.probes[-1][1]
        return max([*latencies, waiting if waiting > 0.1 else 0.0])


def _payload(attack: Attack) -> bytes:
    """The attack's body as bytes (encoded before it is timed: the client's own work is not the
    server's, and would hold up the probe thread)."""
    if isinstance(attack.body, str):
        return attack.body.encode()
    return b"" if attack.body is None else json.dumps(attack.body).encode()


def _send(port: int, attack: Attack, payload: bytes) -> tuple[int | str, bytes]:
    """One attack on a connection of its own; a transport error is its status."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=ATTACK_TIMEOUT_S)
    try:
        headers = {"Content-Type": "application/json", **(attack.headers or {})}
        connection.request(attack.method, attack.path, body=payload or None, headers=headers)
        response = connection.getresponse()
        return response.status, response.read()
    except (OSError, http.client.HTTPException) as exc:
        return type(exc).__name__, b""
    finally:
        connection.close()


def run_attacks(proc_pid: int, port: int) -> list[Outcome]:
    probe, outcomes = HealthProbe(port), []
    for attack in attacks():
        payload = _payload(attack)
        time.sleep(0.5)
        start = time.perf_counter()
        status, answer = _send(port, attack, payload)
        seconds = time.perf_counter() - start
        worst = probe.worst(start, start + seconds)
        cpu = _cpu_seconds(proc_pid)
        time.sleep(3.0)
        outcome = Outcome(
            attack.name, status, seconds, worst * 1e3, _cpu_seconds(proc_pid) - cpu,
            answer[:160].decode(errors="replace"),
        )  # fmt: skip
        print(
            f"{outcome.name:42} {outcome.status!s:>5} {seconds:7.2f} s  healthz <= "
            f"{outcome.worst_healthz_ms:7.1f} ms  CPU after {outcome.cpu_after_s:5.2f} s",
            flush=True,
        )
        outcomes.append(outcome)
    probe.stop.set()
    return outcomes


def stalled_connections(proc_pid: int, port: int) -> dict[str, Any]:
    """``STALLED`` connections that each send part of a request head, then nothing: the server's open
    descriptors, whether ``/healthz`` answers on a new connection, and how many of them the server
    has not closed, 1 s after they opened and ``ARRIVAL_TIMEOUT_S`` + 5 s after."""
    held = []
    for _ in range(STALLED):
        connection = socket.create_connection(("127.0.0.1", port), timeout=5.0)
        connection.sendall(b"POST /v1/gemm/predict HTTP/1.1\r\nHost: x\r\n")
        connection.setblocking(False)
        held.append(connection)
    report: dict[str, Any] = {"stalled": STALLED, "server_fd_limit": FD_LIMIT}
    try:
        for moment, wait in (("held", 1.0), ("after the arrival deadline", ARRIVAL_TIMEOUT_S + 5.0)):
            time.sleep(wait)
            report[moment] = {
                "server_fds": len(os.listdir(f"/proc/{proc_pid}/fd")),
                "healthz": _healthz(port),
                "still_open": sum(_open(connection) for connection in held),
            }
            print(f"stalled connections, {moment}: {report[moment]}", flush=True)
    finally:
        for connection in held:
            connection.close()
    return report


def head_flood(proc_pid: int, port: int, megabytes: int = 100) -> dict[str, Any]:
    """One connection sending a request head of ``megabytes`` MB of 8-byte headers, as fast as the server
    reads it: the server's RSS before and after, what it answered, and the MB it took."""
    before = _rss_mb(proc_pid)
    connection = socket.create_connection(("127.0.0.1", port), timeout=30.0)
    headers, sent, answer = b"X-A: b\r\n" * (1 << 17), 0, b""
    try:
        connection.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        while sent < megabytes:
            connection.sendall(headers)
            sent += 1
        connection.sendall(b"\r\n")
    except OSError:
        pass  # refused while it was still sending
    try:
        answer = connection.recv(200)
    except OSError:
        pass
    finally:
        connection.close()
    report = {
        "sent_mb": sent,
        "answer": answer.split(b"\r\n", 1)[0].decode(errors="replace"),
        "rss_before_mb": before,
        "rss_after_mb": _rss_mb(proc_pid),
    }
    print(f"head flood: {report}", flush=True)
    return report


def _healthz(port: int) -> str:
    """``GET /healthz`` on a new connection: its status and seconds, or why none came within 5 s."""
    start = time.perf_counter()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5.0)
    try:
        connection.request("GET", "/healthz")
        status = connection.getresponse().status
        return f"{status} in {time.perf_counter() - start:.2f} s"
    except (OSError, http.client.HTTPException) as exc:
        return f"{type(exc).__name__} after {time.perf_counter() - start:.1f} s"
    finally:
        connection.close()


def _open(connection: socket.socket) -> bool:
    """Whether the server has not closed a non-blocking connection."""
    try:
        return connection.recv(1) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False


def _wait_healthy(port: int, proc: subprocess.Popen, timeout: float = 120.0) -> None:
    """Until ``/healthz`` answers (the server listens; champions may still be training)."""
    start = time.monotonic()
    while not _healthz(port).startswith("200"):
        if proc.poll() is not None or time.monotonic() - start > timeout:
            raise RuntimeError(f"the server did not answer /healthz within {timeout:.0f} s")
        time.sleep(0.5)


def _limit_descriptors() -> None:
    """The server's limit of open descriptors: ``FD_LIMIT``, as on many systems by default."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (FD_LIMIT, hard))


def memory(proc_pid: int, port: int) -> dict[str, float]:
    """RSS warm, after 13 requests of dense NAS graphs each, and 5 s later."""
    with Client(port, timeout=300.0) as client:
        warm = _rss_mb(proc_pid)
        for i in range(13):
            graph = _dense_graph(200 + i)  # each a new architecture
            client.request("POST", "/v1/nas-curve/predict", {"items": [graph]})
        after = _rss_mb(proc_pid)
        time.sleep(5.0)
        return {"warm_mb": warm, "after_mb": after, "settled_mb": _rss_mb(proc_pid)}


def _p99(client: Client, seconds: float) -> dict[str, float]:
    times, end = [], time.monotonic() + seconds
    while time.monotonic() < end:
        start = time.perf_counter()
        client.request("POST", "/v1/gemm/predict", {"items": [H100_GEMM | {"device": "H100"}]})
        times.append(time.perf_counter() - start)
    times.sort()
    return {
        "requests": len(times),
        "p50_ms": statistics.median(times) * 1e3,
        "p99_ms": times[int(0.99 * (len(times) - 1))] * 1e3,
    }


def compile_cliff(port: int) -> dict[str, dict[str, float]]:
    """p99 of one-item GEMM requests before, while and after 10,000 served rows start the compile."""
    items = [{"m": 64 * (1 + i % 64), "n": 512, "k": 256, "device": "H100"} for i in range(10_000)]
    with Client(port, timeout=300.0) as client:
        before = _p99(client, 10.0)
        client.request("POST", "/v1/gemm/predict", {"items": items})
        during = _p99(client, 20.0)
        time.sleep(20.0)
        after = _p99(client, 10.0)
    return {"before": before, "during": during, "after": after}


def _start(port: int, home: Path, env: dict[str, str], log_path: Path) -> subprocess.Popen:
    """``preflight serve`` on ``home`` with ``env`` (no datasets: it serves what the home holds)."""
    environment = {
        k: v for k, v in os.environ.items() if k not in ("PREFLIGHT_DATASETS", "MLFLOW_TRACKING_URI")
    }
    with log_path.open("wb") as log_file:
        return subprocess.Popen(
            [*preflight_command(), "serve", "--host", "127.0.0.1", "--port", str(port)],
            env=environment | env | {"PREFLIGHT_HOME": str(home)},
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_limit_descriptors,
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--home", type=Path, required=True, help="a home holding champions")
    parser.add_argument("--pythonpath", type=Path, help="serve the preflight package found here")
    parser.add_argument("--out", default="after", help="names bench/out/attack-NAME.json")
    parser.add_argument(
        "--connections-only",
        action="store_true",
        help="only the stalled connections and the head flood (no champion needed)",
    )
    args = parser.parse_args()
    port = free_port()
    OUT.mkdir(exist_ok=True)
    log_path = OUT / f"attack-{args.out}-server.log"
    # a fresh compile cache: the home's (this code's) and XDG's (a checkout from before it moved there)
    shutil.rmtree(args.home / "cache" / "trees", ignore_errors=True)
    with tempfile.TemporaryDirectory() as cache:
        env = {
            "PREFLIGHT_API_KEYS": KEY,
            "PREFLIGHT_REQUEST_TIMEOUT_S": str(DEADLINE_S),
            "XDG_CACHE_HOME": cache,
        }
        proc = _start(
            port, args.home, env | ({"PYTHONPATH": str(args.pythonpath)} if args.pythonpath else {}), log_path
        )
        try:
            report: dict[str, Any] = {}
            if not args.connections_only:
                wait_ready(proc, port, 600, log_path)
                report |= {"compile": compile_cliff(port), "memory": memory(proc.pid, port)}
                print(json.dumps(report, indent=2), flush=True)
            else:
                _wait_healthy(port, proc)
            report["stalled"] = stalled_connections(proc.pid, port)
            report["head_flood"] = head_flood(proc.pid, port)
            if not args.connections_only:  # last: before issue 25 the last attack left the server mute
                report["attacks"] = [asdict(o) for o in run_attacks(proc.pid, port)]
        finally:
            stop_server(proc)
    (OUT / f"attack-{args.out}.json").write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
