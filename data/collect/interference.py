"""The project's own co-location interference profiler: micro-workloads slowed down by stressor neighbours.

A *target* micro-workload runs in its own process for ``seconds`` of wall time and counts its work
units: ``compute`` (a pure-Python integer loop), ``memory`` (streaming copies of a 256 MiB array, far
beyond the LLC), ``cache`` (random gathers over an array of a quarter of the LLC, at most 8 MiB, that an
LLC thrasher evicts) or ``io`` (4 KiB writes, each fsynced). Beside it run *stressors*, one process per
unit of intensity: the project's own (``cpu``: a spin loop; ``membw``: a stream copy of two arrays of
4x the LLC, at least 128 MiB; ``l3``: random writes over twice the LLC; ``io``: 64 KiB write + fsync) or,
with ``backend="stress-ng"``, ``stress-ng --cpu/--stream/--cache/--hdd N``. Stressors start 0.3 s
before the target; they are killed when the run ends, and the own ones (and the target) also exit by
themselves when the collector dies (they watch their parent and a deadline). Files are written to
unlinked temporary files in the output's directory (the disk the results go to), so nothing is left.

The seeded plan (``plan``): for each workload a solo run, then each stressor kind at intensities 1 and
2 and four two-kind mixes in a seeded order, then a second solo run (a drift check). ``norm_perf`` is a
run's rate over that of the workload's first solo run in the file (the ``local-interference`` loader
divides by the median of its solo runs instead).

Metrics, sampled once a second with psutil (the last, partial interval too): the target's CPU time
over wall time (``cpu_util``, in cores) and its context switches per second, the host's busy fraction
(``host_cpu_util``, mean weighted by interval), all kept per sample in ``trace`` (JSON, with the planned
run length ``planned_s``) together with ``others_cpu``, the host's busy fraction that neither the target
nor its stressors account for: background load that confounds the run. ``ipc`` comes from
``perf stat -e instructions,cycles -p PID`` where perf exists and the counters are supported (probed
once), else it is empty. ``host_mem_bw_proxy`` is left empty: neither psutil nor an unprivileged
process sees the host's memory bandwidth.

Each run is one line appended with one write (``csvlog``): an interrupted collection keeps whole runs,
and a rerun with the same seed, run length and host measures only the runs the file lacks.

Heavy imports (numpy, psutil, pandas, pydantic, rich) stay inside functions: every target and stressor
process imports this module (``python -m preflight.data.collect.interference``) and should start fast.
"""

from __future__ import annotations

import json
import math
import os
import random
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import cycle
from pathlib import Path
from typing import TYPE_CHECKING, Any

from preflight.data.collect.csvlog import append, check_same, open_log, positive_number
from preflight.data.errors import PreflightError, UsageError

if TYPE_CHECKING:
    from preflight.data.collect.host import HostFacts

WORKLOADS = ("compute", "memory", "cache", "io")
STRESSORS = ("cpu", "membw", "l3", "io")
INTENSITIES = (1, 2)
MIXES = (("cpu", "membw"), ("l3", "membw"), ("cpu", "l3"), ("cpu", "io"))
BACKENDS = ("own", "stress-ng")
#: The stress-ng stressor standing in for each kind.
STRESS_NG = {"cpu": "cpu", "membw": "stream", "l3": "cache", "io": "hdd"}
#: Stressors run this long before the target starts.
WARMUP_S = 0.3
#: Children give up this long after their run should have ended, should nobody stop them.
GRACE_S = 30.0
#: Waiting longer than this for a child to set up (allocate, import) is a failure.
READY_TIMEOUT_S = 120.0
MIB = 1 << 20
TARGET_STREAM_BYTES = 256 * MIB
CHUNK_BYTES = 16 * MIB
GATHER = 32_768
SPIN = 20_000
_MODULE = "preflight.data.collect.interference"


@dataclass(frozen=True)
class Run:
    run: int
    workload: str
    mix: tuple[tuple[str, int], ...]  # (kind, intensity), kinds sorted; empty: alone

    @property
    def neighbours(self) -> str:
        from preflight.data.interference import mix_label

        return mix_label(dict(self.mix))


@dataclass
class CollectSummary:
    path: Path
    measured: int
    skipped_existing: int
    stopped_early: bool


@dataclass(frozen=True)
class Setup:
    """What every run of one collection shares."""

    seed: int
    seconds: float
    host: str
    backend: str
    scratch: Path
    llc_bytes: int
    perf: bool


@dataclass
class Measured:
    ops: int
    seconds: float
    cpu_util: float
    ctx_switches_per_s: float
    host_cpu_util: float
    ipc: float | None
    trace: dict[str, Any]


def collect_interference(
    out: Path,
    *,
    seconds: float = 3.0,
    seed: int = 0,
    max_minutes: float = 10.0,
    backend: str = "own",
    workloads: Sequence[str] = WORKLOADS,
    progress: bool = True,
) -> CollectSummary:
    """Measure the seeded plan's runs of ``workloads`` that ``out`` lacks, appending one line per run."""
    from preflight.data.sources.local_interference import COLUMNS, SOURCE
    from rich.progress import Progress

    check_options(seconds, max_minutes, backend, workloads)
    out = Path(out)
    setup = Setup(seed, float(seconds), host_name(), backend, out.parent.resolve(), llc_bytes(), perf_works())
    rows = open_log(out, COLUMNS, SOURCE)
    _check_same_plan(out, rows, setup)
    measured = [row for row in rows if positive_number(row["seconds"])]  # the loader rejects the rest
    done, solo = {row["run"] for row in measured}, _first_solo(measured)
    runs = [run for run in plan(seed) if run.workload in workloads]
    summary = CollectSummary(out, measured=0, skipped_existing=0, stopped_early=False)
    started = time.monotonic()
    fd = os.open(out, os.O_WRONLY | os.O_APPEND)
    try:
        with Progress(disable=not progress) as bar:
            task = bar.add_task("interference", total=len(runs))
            for run in runs:
                if str(run.run) in done:
                    summary.skipped_existing += 1
                elif time.monotonic() - started > max_minutes * 60:
                    summary.stopped_early = True
                    break
                else:
                    append(fd, [_row(run, measure(run, setup), setup, solo)])
                    summary.measured += 1
                bar.update(task, advance=1, description=f"interference: {summary.measured} measured")
    finally:
        os.close(fd)
    return summary


def check_options(seconds: float, max_minutes: float, backend: str, workloads: Sequence[str]) -> None:
    """Refuse options that cannot work, as usage errors."""
    if not (math.isfinite(seconds) and seconds > 0):
        raise UsageError(f"seconds must be a positive number, not {seconds}")
    if not max_minutes > 0:
        raise UsageError(f"max-minutes must be positive, not {max_minutes}")
    if backend not in BACKENDS:
        raise UsageError(f"unknown backend {backend!r}; known: {', '.join(BACKENDS)}")
    unknown = [w for w in workloads if w not in WORKLOADS]
    if unknown or not workloads:
        raise UsageError(f"unknown workloads {unknown or '(none given)'}; known: {', '.join(WORKLOADS)}")
    if backend == "stress-ng" and shutil.which("stress-ng") is None:
        raise UsageError(
            "backend 'stress-ng' needs stress-ng on PATH, and it is not there; use --backend own"
        )


def plan(seed: int = 0) -> list[Run]:
    """Per workload: alone, each kind at each intensity and the mixes in a seeded order, alone again."""
    rng = random.Random(seed)
    runs: list[Run] = []
    for workload in WORKLOADS:
        beside: list[tuple[tuple[str, int], ...]] = [((kind, n),) for kind in STRESSORS for n in INTENSITIES]
        beside += [tuple((kind, 1) for kind in sorted(mix)) for mix in MIXES]
        rng.shuffle(beside)
        for mix in [(), *beside, ()]:
            runs.append(Run(len(runs), workload, mix))
    return runs


# -- this machine --------------------------------------------------------------------------------------------


def host_name() -> str:
    """The CPU's model name and logical cores, e.g. ``AMD EPYC (2 logical cores)``."""
    facts = _host_facts()
    return f"{facts.cpu_name} ({facts.logical_cores} logical cores)"


def llc_bytes() -> int:
    """Size of the last-level cache; 32 MiB where sysfs does not say."""
    llc_mb = _host_facts().llc_mb
    return int(llc_mb * MIB) if llc_mb else 32 * MIB


def _host_facts() -> HostFacts:
    from preflight.data.collect.host import (
        host_facts,
    )  # it imports torch: the collector's, not its children's

    return host_facts()


def perf_works() -> bool:
    """Whether ``perf stat`` counts instructions and cycles here (often not in a VM or container)."""
    if shutil.which("perf") is None:
        return False
    command = ["perf", "stat", "-x,", "-e", "instructions,cycles", "--", sys.executable, "-c", "pass"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return parse_ipc(done.stderr) is not None


def parse_ipc(perf_csv: str) -> float | None:
    """Instructions per cycle from ``perf stat -x,`` output; None where a counter is missing."""
    counts = {}
    for line in perf_csv.splitlines():
        fields = line.split(",")
        if len(fields) > 2:
            try:
                counts[fields[2].split(":")[0]] = float(fields[0])
            except ValueError:
                continue
    instructions, cycles = counts.get("instructions"), counts.get("cycles")
    return instructions / cycles if instructions and cycles else None


# -- one run -------------------------------------------------------------------------------------------------


def measure(run: Run, setup: Setup) -> Measured:
    """Start the run's stressors and its target, let the target work ``seconds``, stop them all."""
    stressors: list[subprocess.Popen[str]] = []
    children: list[subprocess.Popen[str]] = []
    try:
        for stressor in _start_stressors(
            run, setup
        ):  # one by one: a failed start leaves the others stoppable
            stressors.append(stressor)
        children += [*stressors, _spawn("target", run.workload, setup)]
        target = children[-1]
        for child in children:
            _await_ready(child)
        perf = _start_perf(target.pid) if setup.perf else None
        children += [perf] if perf else []
        time.sleep(WARMUP_S if run.mix else 0.0)
        measured = _observe(target, stressors, setup)
        measured.ipc = _stop_perf(perf) if perf else None
        _check_alive(stressors, run)
        return measured
    finally:
        for child in reversed(children or stressors):
            _stop(child)


def _start_stressors(run: Run, setup: Setup) -> Iterator[subprocess.Popen[str]]:
    if not run.mix:
        return
    if setup.backend == "own":
        for kind, n in run.mix:
            for _ in range(n):
                yield _spawn("stressor", kind, setup)
        return
    command = ["stress-ng", "--quiet", "--temp-path", str(setup.scratch)]
    command += ["--timeout", f"{math.ceil(setup.seconds + WARMUP_S + GRACE_S + READY_TIMEOUT_S)}s"]
    for kind, n in run.mix:
        command += [f"--{STRESS_NG[kind]}", str(n)]
    yield _popen(command, stdout=subprocess.DEVNULL)


def _spawn(role: str, kind: str, setup: Setup) -> subprocess.Popen[str]:
    """A target or an own stressor: this module run in a fresh interpreter, in its own session."""
    spec = {
        "seconds": setup.seconds,
        "llc": setup.llc_bytes,
        "scratch": str(setup.scratch),
        "parent": os.getpid(),
        "deadline": time.time() + setup.seconds + WARMUP_S + READY_TIMEOUT_S + GRACE_S,
    }
    command = [sys.executable, "-m", _MODULE, role, kind, json.dumps(spec)]
    return _popen(command, stdin=subprocess.PIPE if role == "target" else subprocess.DEVNULL)


def _popen(command: list[str], **pipes: Any) -> subprocess.Popen[str]:
    settings = {"stdin": subprocess.DEVNULL, "stdout": subprocess.PIPE, "stderr": subprocess.PIPE} | pipes
    return subprocess.Popen(command, text=True, start_new_session=True, **settings)


def _await_ready(child: subprocess.Popen[str]) -> None:
    """Wait for an own child's ``ready`` line: it has imported and allocated what it needs."""
    if child.stdout is None:  # stress-ng says nothing
        return
    readable, _, _ = select.select([child.stdout], [], [], READY_TIMEOUT_S)
    line = child.stdout.readline() if readable else ""
    if line.strip() != "ready":
        raise PreflightError(f"{_name(child)} did not start: {_failure(child)}")


def _name(child: subprocess.Popen[str]) -> str:
    """``target compute``, ``stressor l3``, ``stress-ng``: what a child is."""
    args = [str(arg) for arg in child.args] if isinstance(child.args, list) else [str(child.args)]
    return " ".join(args[3:5]) if _MODULE in args else Path(args[0]).name


def _failure(child: subprocess.Popen[str]) -> str:
    """What a failed child wrote to stderr, or its exit status."""
    return _stop(child).strip()[-2000:] or f"exit status {child.returncode}"


def _check_alive(stressors: list[subprocess.Popen[str]], run: Run) -> None:
    """A stressor that died during the run leaves a measurement of fewer neighbours than planned."""
    for stressor in stressors:
        if stressor.poll() is not None:
            raise PreflightError(f"a stressor of run {run.run} ({run.neighbours}) died: {_failure(stressor)}")


def _stop(child: subprocess.Popen[str]) -> str:
    """Terminate a child's whole process group (stress-ng forks workers), kill it if it lingers, close
    its pipes; returns what it wrote to stderr."""
    for sig, wait_s in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 10.0)):
        if child.poll() is not None:
            break
        try:
            os.killpg(child.pid, sig)
            child.wait(wait_s)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            continue
    if child.poll() is None:
        child.wait()
    with suppress(ProcessLookupError, PermissionError):  # workers that outlived their leader (stress-ng)
        os.killpg(child.pid, signal.SIGKILL)
    errors = child.stderr.read() if child.stderr is not None and not child.stderr.closed else ""
    for pipe in (child.stdin, child.stdout, child.stderr):
        if pipe is not None and not pipe.closed:
            with suppress(OSError):
                pipe.close()
    return errors


def _observe(target: subprocess.Popen[str], stressors: list[subprocess.Popen[str]], setup: Setup) -> Measured:
    """Tell the target to go, sample once a second until it reports, then read its counters."""
    import psutil

    assert target.stdin is not None and target.stdout is not None
    sampler = _Sampler(psutil.Process(target.pid), [psutil.Process(s.pid) for s in stressors])
    target.stdin.write("go\n")
    target.stdin.flush()
    deadline = sampler.t0 + setup.seconds + GRACE_S
    while True:
        wait = min(sampler.last_t + 1.0, deadline) - time.monotonic()
        if select.select([target.stdout], [], [], max(wait, 0.0))[0]:
            break
        if time.monotonic() >= deadline:
            raise PreflightError(f"the {_name(target)} did not finish in {setup.seconds + GRACE_S} s")
        sampler.sample()
    report = target.stdout.readline()
    sampler.sample()
    try:
        result = json.loads(report)
    except json.JSONDecodeError:
        raise PreflightError(f"the {_name(target)} failed: {_failure(target)}") from None
    return sampler.measured(int(result["ops"]), float(result["seconds"]), setup.seconds)


class _Sampler:
    """Per-interval samples: the target's CPU time and context switches, the host's busy share, and the
    share of it that neither the target nor its stressors account for (``others_cpu``: background load)."""

    def __init__(self, target: Any, stressors: list[Any]) -> None:  # psutil.Process
        import psutil

        self.target, self.stressors, self.cores = target, stressors, psutil.cpu_count() or 1
        psutil.cpu_percent()  # starts the host's first interval
        self.t0 = self.last_t = time.monotonic()
        self.first = self.last = self._counters()
        self.trace: dict[str, list[float]] = {
            "t": [], "host_cpu": [], "target_cpu": [], "ctx_switches": [], "others_cpu": []
        }  # fmt: skip
        self.weights: list[float] = []

    def _counters(self) -> tuple[float, int, float]:
        """The target's CPU seconds and context switches, and its stressors' CPU seconds."""
        times, switches = self.target.cpu_times(), self.target.num_ctx_switches()
        return (
            times.user + times.system,
            switches.voluntary + switches.involuntary,
            _tree_cpu_s(self.stressors),
        )

    def sample(self) -> None:
        import psutil

        now, counters = time.monotonic(), self._counters()
        dt = max(now - self.last_t, 1e-9)
        target, host = (counters[0] - self.last[0]) / dt, psutil.cpu_percent() / 100
        stressors = max(counters[2] - self.last[2], 0.0) / dt
        self.trace["t"].append(round(now - self.t0, 3))
        self.trace["host_cpu"].append(round(host, 4))
        self.trace["target_cpu"].append(round(target, 4))
        self.trace["ctx_switches"].append(round((counters[1] - self.last[1]) / dt, 1))
        self.trace["others_cpu"].append(round(max(host - (target + stressors) / self.cores, 0.0), 4))
        self.weights.append(dt)
        self.last_t, self.last = now, counters

    def measured(self, ops: int, seconds: float, planned_s: float) -> Measured:
        wall = max(self.last_t - self.t0, 1e-9)
        host = sum(h * w for h, w in zip(self.trace["host_cpu"], self.weights)) / sum(self.weights)
        return Measured(
            ops=ops,
            seconds=seconds,
            cpu_util=(self.last[0] - self.first[0]) / wall,
            ctx_switches_per_s=(self.last[1] - self.first[1]) / wall,
            host_cpu_util=host,
            ipc=None,
            trace={"planned_s": planned_s, **self.trace},
        )


def _tree_cpu_s(processes: list[Any]) -> float:
    """CPU seconds of processes and their children (stress-ng's workers), those still running."""
    import psutil

    total = 0.0
    for process in processes:
        with suppress(psutil.Error):
            for member in [process, *process.children(recursive=True)]:
                with suppress(psutil.Error):
                    times = member.cpu_times()
                    total += times.user + times.system
    return total


def _start_perf(pid: int) -> subprocess.Popen[str]:
    command = ["perf", "stat", "-x,", "-e", "instructions,cycles", "-p", str(pid)]
    return _popen(command, stdout=subprocess.DEVNULL)


def _stop_perf(perf: subprocess.Popen[str]) -> float | None:
    perf.send_signal(signal.SIGINT)
    try:
        _, errors = perf.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        return None
    return parse_ipc(errors)


# -- the output file -----------------------------------------------------------------------------------------


def _check_same_plan(out: Path, rows: list[dict[str, str]], setup: Setup) -> None:
    """Refuse a file whose runs belong to another seed, run length, host or backend: they do not compare."""
    check_same(
        out,
        {
            "seed": (setup.seed, (row["seed"] for row in rows)),
            "seconds": (f"{setup.seconds:g}", (_planned_s(row) for row in rows)),
            "host": (setup.host, (row["host"] for row in rows)),
            "backend": (setup.backend, (row["backend"] for row in rows)),
        },
    )


def _planned_s(row: dict[str, str]) -> str:
    try:
        return f"{float(json.loads(row['trace'])['planned_s']):g}"
    except (ValueError, KeyError, TypeError):
        return "unknown"


def _first_solo(rows: Iterable[dict[str, str]]) -> dict[str, float]:
    """Each workload's rate in its first solo run in the file: what ``norm_perf`` divides by."""
    solo: dict[str, float] = {}
    for row in rows:
        if row["neighbours"] == "alone":
            solo.setdefault(row["workload"], float(row["ops_per_s"]))
    return solo


def _row(run: Run, m: Measured, setup: Setup, solo: dict[str, float]) -> list[object]:
    """The run as one CSV row; a workload's first solo run becomes its reference rate."""
    rate = float(f"{m.ops / m.seconds:.6g}")
    if not run.mix:
        solo.setdefault(run.workload, rate)
    if run.workload not in solo:
        raise PreflightError(f"run {run.run} has no solo run of {run.workload} before it to compare with")
    return [
        run.run,
        setup.seed,
        setup.host,
        run.workload,
        run.neighbours,
        setup.backend,
        f"{m.seconds:.4f}",
        m.ops,
        f"{rate:.6g}",
        f"{solo[run.workload]:.6g}",
        f"{rate / solo[run.workload]:.6g}",
        f"{m.cpu_util:.4g}",
        f"{m.ctx_switches_per_s:.4g}",
        "" if m.ipc is None else f"{m.ipc:.4g}",
        f"{m.host_cpu_util:.4g}",
        "",  # host_mem_bw_proxy: not measurable here (see the module docstring)
        json.dumps(m.trace, separators=(",", ":")),
        datetime.now(UTC).isoformat(timespec="seconds"),
    ]


# -- inside the target and stressor processes ----------------------------------------------------------------


def _units(role: str, kind: str, spec: dict[str, Any]) -> Callable[[], object]:
    """One unit of a workload's or stressor's work (a few ms), with what it needs allocated."""
    llc, scratch = int(spec["llc"]), str(spec["scratch"])
    if role == "target":
        makers = {
            "compute": _spin,
            "memory": lambda: _stream(TARGET_STREAM_BYTES),
            "cache": lambda: _gather(min(max(llc // 4, MIB), 8 * MIB)),
            "io": lambda: _fsync(4096, 4 * MIB, scratch),
        }
    else:
        makers = {
            "cpu": _spin,
            "membw": lambda: _stream(max(4 * llc, 128 * MIB)),
            "l3": lambda: _scatter(2 * llc),
            "io": lambda: _fsync(65536, 64 * MIB, scratch),
        }
    return makers[kind]()


def _spin() -> Callable[[], object]:
    def unit() -> int:
        x = 1
        for _ in range(SPIN):
            x = (x * 1103515245 + 12345) & 0xFFFFFFFF
        return x

    return unit


def _stream(nbytes: int) -> Callable[[], object]:
    """Copy the next chunk of a large array: the whole array streams through the caches in turn."""
    import numpy as np

    source, dest = np.ones(nbytes // 8), np.ones(nbytes // 8)
    step = CHUNK_BYTES // 8
    starts = cycle(range(0, len(source), step))

    def unit() -> None:
        start = next(starts)
        np.copyto(dest[start : start + step], source[start : start + step])

    return unit


def _gather(nbytes: int) -> Callable[[], object]:
    """Sum values at random places in an array that fits the LLC."""
    import numpy as np

    rng = np.random.default_rng(0)
    data = rng.random(nbytes // 8)
    picks = cycle([rng.integers(0, len(data), GATHER) for _ in range(4)])
    return lambda: float(data[next(picks)].sum())


def _scatter(nbytes: int) -> Callable[[], object]:
    """Write to random places in a buffer larger than the LLC: evicts whatever else was cached."""
    import numpy as np

    rng = np.random.default_rng(1)
    data = np.ones(nbytes // 8)
    picks = cycle([rng.integers(0, len(data), 4 * GATHER) for _ in range(4)])

    def unit() -> None:
        data[next(picks)] += 1.0

    return unit


def _fsync(block: int, wrap: int, scratch: str) -> Callable[[], object]:
    """Write a block and fsync it, to an unlinked temporary file (so it is gone however we end)."""
    handle = tempfile.TemporaryFile(dir=scratch, buffering=0)
    payload = os.urandom(block)

    def unit() -> None:
        if handle.tell() >= wrap:
            handle.seek(0)
        handle.write(payload)
        os.fsync(handle.fileno())

    return unit


def _say(line: str) -> None:
    try:
        print(line, flush=True)
    except BrokenPipeError:  # the collector is gone
        os._exit(0)


def _target(kind: str, spec: dict[str, Any]) -> None:
    """Set up, wait for ``go``, work ``seconds``, report; then hold on until the collector has read the
    process's counters (stdin closes when it stops it, or when it dies)."""
    unit = _units("target", kind, spec)
    _say("ready")
    if sys.stdin.readline().strip() != "go":
        return
    ops, start = 0, time.perf_counter()
    end = start + float(spec["seconds"])
    while (now := time.perf_counter()) < end:
        unit()
        ops += 1
    _say(json.dumps({"ops": ops, "seconds": now - start}))
    sys.stdin.read()


def _stressor(kind: str, spec: dict[str, Any]) -> None:
    """Work until stopped, until the collector dies (a new parent) or past the deadline."""
    unit = _units("stressor", kind, spec)
    _say("ready")
    while os.getppid() == spec["parent"] and time.time() < spec["deadline"]:
        unit()


def _child(argv: list[str]) -> None:
    role, kind, spec = argv[0], argv[1], json.loads(argv[2])
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    (_target if role == "target" else _stressor)(kind, spec)


if __name__ == "__main__":
    _child(sys.argv[1:])
