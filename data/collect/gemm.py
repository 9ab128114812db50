"""The project's own GEMM profiler: a seeded sweep of torch GEMMs timed on this machine.

Each measured point is appended to a CSV as one line (O_APPEND, one write, fsync), so an
interrupted sweep leaves a valid file, and a rerun with the same seed continues the same sweep.
Beside the CSV, ``<out>.device.json`` holds the spec sheet of the device that was measured and
``<out>.seed`` the seed of the sweep: a file of another device or seed is refused.
What the machine is lives in ``host``, how a run is timed in ``timing``, its energy in ``energy``.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import torch
from preflight.data.cluster import cluster, fleet, fleet_size
from preflight.data.collect import energy, host, timing
from preflight.data.collect.csvlog import append, check_same, open_log, positive_number
from preflight.data.errors import UsageError
from preflight.data.sources.local_gemm import COLUMNS, SOURCE, read_device, side_file
from preflight.data.store import atomic_write_bytes
from preflight.data.threads import torch_threads
from rich.progress import Progress

#: m, n and k are drawn from these: powers of two, other sizes, and skinny ones (1, 16).
DIMS = (1, 16, 32, 64, 96, 128, 256, 384, 512, 768, 1000, 1024, 1536, 2048, 3000, 4096)
#: A GPU's sweep adds the sizes where its matrix units reach their plateau.
DIMS_BY_KIND = {"cpu": DIMS, "cuda": (*DIMS, 6144, 8192, 16384)}
LAYOUTS = ((False, False), (False, True), (True, False), (True, True))
#: tf32 is fp32 storage multiplied on the tensor cores (TF32 allowed); fp32 is kept to full fp32 math.
TORCH_DTYPES = {
    "fp64": torch.float64,
    "fp32": torch.float32,
    "tf32": torch.float32,
    "bf16": torch.bfloat16,
    "fp16": torch.float16,
}
DTYPES = {"cpu": ("fp32", "fp64", "bf16"), "cuda": ("fp32", "tf32", "fp64", "bf16", "fp16")}
_KEY_COLUMNS = COLUMNS[:7]  # m, n, k, dtype, trans_a, trans_b, device


@dataclass
class CollectSummary:
    path: Path
    device_id: str
    measured: int
    skipped_existing: int
    skipped_slow: int = 0


@dataclass(frozen=True)
class Point:
    m: int
    n: int
    k: int
    dtype: str
    trans_a: bool
    trans_b: bool


def collect_gemm(
    device: str,
    out: Path,
    *,
    points: int = 300,
    seed: int = 0,
    threads: int | None = None,
    repeats: int = 7,
    max_seconds_per_point: float = 2.0,
    progress: bool = True,
    dims: Sequence[int] | None = None,
    power: bool = True,
    devices: int | None = None,
) -> CollectSummary:
    """Measure the first ``points`` GEMMs of the seeded sweep on ``device`` ("cpu", "cuda", "cuda:N").

    Appends them to ``out``, skipping the points it already holds and those slower than the budget.
    ``power=False`` times only (each point then costs milliseconds instead of the power window's seconds).

    With ``RAY_ADDRESS``, ``devices`` sweeps run at once (default: one per GPU of the cluster, or one per
    node for "cpu"), each on a Ray worker holding its GPU (or its node's CPU): the ``k``-th worker on a
    device of one model sweeps seed ``seed + k`` into ``out/<device>_seed<seed + k>.csv``, so ``out`` is
    a folder that loads as one table and a rerun resumes each file wherever Ray places the workers.
    Only this process writes; a worker that dies is started again and its point measured again.
    """
    out, spread = Path(out), cluster() is not None
    if spread and device not in ("cpu", "cuda"):
        raise UsageError(
            f"on a Ray cluster the device is 'cpu' or 'cuda' (each worker's own), not {device!r}"
        )
    count = fleet_size(devices, "node" if device == "cpu" else "GPU")
    options = {"num_cpus": 1, "scheduling_strategy": "SPREAD"} if device == "cpu" else {"num_gpus": 1}
    summary = CollectSummary(out, "", measured=0, skipped_existing=0)
    with ExitStack() as files, Progress(disable=not progress) as bar:
        task, tables, planned_points = bar.add_task("gemm", total=0), dict[int, _Table](), 0

        def plan_of(i: int, described: tuple[str, dict]) -> list[Point]:
            nonlocal planned_points
            kind, spec = described
            own = seed + sum(table.device_id == spec["id"] for table in tables.values())  # its device's k-th
            table = _Table(out / f"{spec['id']}_seed{own}.csv" if spread else out, spec, own)
            tables[i] = files.enter_context(table)
            planned = sweep(points, table.seed, DTYPES[kind], DIMS_BY_KIND[kind] if dims is None else dims)
            pending = [point for point in planned if _key(point, table.device_id) not in table.done]
            summary.skipped_existing += len(planned) - len(pending)
            planned_points += len(pending)
            bar.update(task, total=planned_points)
            return pending

        sweeper = (device, threads, repeats, max_seconds_per_point / repeats, power)
        for i, point, row in fleet(Sweeper, sweeper, count, options, plan_of):
            tables[i].record(point, row, summary)
            bar.update(task, advance=1, description=f"gemm: {summary.measured} measured, "
                       f"{summary.skipped_slow} too slow")  # fmt: skip
    summary.device_id = ", ".join(sorted({table.device_id for table in tables.values()}))
    return summary


class Sweeper:
    """A fleet worker that measures GEMMs on one device of its machine (with its own energy meter)."""

    def __init__(self, device: str, threads: int | None, repeats: int, budget_s: float, power: bool) -> None:
        self.target = host.parse_device(device)
        self.threads = threads if self.target.type == "cpu" else None
        self.repeats, self.budget_s = repeats, budget_s
        self.meter = energy.energy_meter(self.target) if power else None

    def describe(self) -> tuple[str, dict]:
        """The device's kind (cpu or cuda) and spec sheet."""
        with self._on_device():
            spec = host.device_spec(self.target)
        return self.target.type, spec.model_dump(mode="json", exclude_none=True)

    def run(self, point: Point) -> list[str] | None:
        """The point's measured cells after its key, or None when it is slower than the budget."""
        with self._on_device():
            return _measure(point, self.target, self.repeats, self.budget_s, self.meter)

    @contextmanager
    def _on_device(self) -> Iterator[None]:
        with torch_threads(self.threads), _current_gpu(self.target):
            yield


class _Table:
    """One sweep's CSV, open for appending: the points it holds, and each new one appended at once."""

    def __init__(self, path: Path, spec: dict, seed: int) -> None:
        self.path, self.device_id, self.seed = path, str(spec["id"]), seed
        self.done = _measured_keys(path, self.device_id, seed)
        _write_side_files(spec, path, seed)

    def __enter__(self) -> _Table:
        self.fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        return self

    def __exit__(self, *_: object) -> None:
        os.close(self.fd)

    def record(self, point: Point, row: list[str] | None, summary: CollectSummary) -> None:
        """Append the measured ``row`` of ``point`` (None: it was too slow), and count what happened."""
        if row is None:
            summary.skipped_slow += 1
            return
        append(self.fd, [(*_key(point, self.device_id), *row)])
        summary.measured += 1


def sweep(points: int, seed: int, dtypes: Sequence[str], dims: Sequence[int] = DIMS) -> list[Point]:
    """The first ``points`` distinct GEMMs drawn with ``seed``; a longer sweep extends a shorter one."""
    if points > len(dims) ** 3 * len(dtypes) * len(LAYOUTS):
        raise UsageError(f"{points} points asked for, but the grid holds fewer distinct GEMMs")
    rng = np.random.default_rng(seed)
    drawn: dict[Point, None] = {}
    while len(drawn) < points:
        m, n, k = (int(d) for d in rng.choice(dims, size=3))
        trans_a, trans_b = LAYOUTS[rng.integers(len(LAYOUTS))]
        drawn.setdefault(Point(m, n, k, str(rng.choice(dtypes)), trans_a, trans_b))
    return list(drawn)


def _measured_keys(out: Path, device_id: str, seed: int) -> set[tuple[str, ...]]:
    """The key cells of the points ``out`` already holds with a runtime (after repairing a torn last
    line): a row whose runtime is missing or not positive, which the loader rejects, is measured again.
    Refuses a file of another device or of another seed's sweep."""
    rows = open_log(out, COLUMNS, SOURCE)
    devices = [row["device"] for row in rows] + ([read_device(out).id] if side_file(out).exists() else [])
    check_same(out, {"device": (device_id, devices), "seed": (seed, _recorded_seed(out))})
    return {tuple(row[c] for c in _KEY_COLUMNS) for row in rows if positive_number(row["runtime_ms"])}


def _recorded_seed(out: Path) -> list[str]:
    """The seed ``<out>.seed`` records; none for a new file, or one collected before seeds were recorded."""
    path = seed_file(out)
    return [path.read_text(errors="replace").strip()] if path.exists() else []


def _measure(
    point: Point, target: torch.device, repeats: int, budget_s: float, meter: energy.Meter | None
) -> list[str] | None:
    """The measured cells after the key (repeats ... collected_at), or None when one run exceeds the budget.

    A run clipped to ``timing.PROBE_DIM`` screens out hopeless points in milliseconds; one full run decides.
    """
    with _matmul_math(point.dtype):
        if _probe_s(point, target) > budget_s:
            return None
        run = _gemm(point, target)
        per_run_s = timing.once_s(run, target)
        if per_run_s > budget_s:
            return None
        timing.warm_up(run, target, per_run_s)
        p10, median, p90 = timing.spread_ms(run, target, repeats)
        power_w, energy_j = energy.power(run, target, per_run_s, meter) if meter else (None, None)
    collected_at = datetime.now(UTC).isoformat(timespec="seconds")
    return [str(repeats), *(_number(v) for v in (median, p10, p90, power_w, energy_j)), collected_at]


@contextmanager
def _matmul_math(dtype: str) -> Iterator[None]:
    """Let fp32 GEMMs use TF32 tensor-core math inside the block exactly when ``dtype`` is tf32."""
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def _probe_s(point: Point, target: torch.device) -> float:
    """Seconds per run of ``point`` guessed from its GEMM with m, n and k clipped, scaled by FLOPs."""

    def clipped(m: int, n: int, k: int) -> timing.Run:
        return _gemm(dataclasses.replace(point, m=m, n=n, k=k), target)

    return timing.probe_s((point.m, point.n, point.k), clipped, target)


def _gemm(point: Point, target: torch.device) -> timing.Run:
    """op(A) @ op(B) into a preallocated C; a transposed operand is a ``.t()`` view of a contiguous tensor."""
    dtype = TORCH_DTYPES[point.dtype]
    a = torch.randn((point.k, point.m) if point.trans_a else (point.m, point.k), dtype=dtype, device=target)
    b = torch.randn((point.n, point.k) if point.trans_b else (point.k, point.n), dtype=dtype, device=target)
    a, b = a.t() if point.trans_a else a, b.t() if point.trans_b else b
    c = torch.empty(point.m, point.n, dtype=dtype, device=target)
    return lambda: torch.mm(a, b, out=c)


def _current_gpu(target: torch.device) -> AbstractContextManager:
    """Make a GPU ``target`` torch's current device for the block; nothing on a CPU."""
    return torch.cuda.device(target) if target.type == "cuda" else nullcontext()


def seed_file(out: Path) -> Path:
    """Where the seed of the sweep in ``out`` is recorded: ``<out>.seed`` (the CSV has no seed column)."""
    return out.with_name(out.name + ".seed")


def _write_side_files(spec: dict, out: Path, seed: int) -> None:
    """Write ``<out>.device.json`` (the device's spec sheet) and ``<out>.seed`` where missing; a file
    collected before seeds were recorded is taken to be of this seed."""
    if not side_file(out).exists():
        atomic_write_bytes(side_file(out), json.dumps(spec, indent=2).encode())
    if not seed_file(out).exists():
        atomic_write_bytes(seed_file(out), f"{seed}\n".encode())


def _key(point: Point, device_id: str) -> tuple[str, ...]:
    """The point's key cells as the file holds them."""
    flag = {True: "true", False: "false"}
    return (
        str(point.m),
        str(point.n),
        str(point.k),
        point.dtype,
        flag[point.trans_a],
        flag[point.trans_b],
        device_id,
    )


def _number(value: float | None) -> str:
    """A measured value as its cell: six significant digits, empty when not measured."""
    return "" if value is None else f"{value:.6g}"
