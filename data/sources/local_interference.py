"""local-interference: slowdowns measured on this machine by ``preflight collect interference``
(``data/collect/interference.py``).

One line per measurement: a micro-workload (``compute``, ``memory``, ``cache``, ``io``) ran for a
fixed time alone (``neighbours`` = ``alone``) or next to stressor processes (``cpu=2``,
``l3=1,membw=1``). The loader takes ``norm_perf`` as the work rate over the median rate of the
workload's solo runs in the file (the collector's own column divides by the first solo run only,
whose noise would pass to every row), and the solo profile (``solo_*``) from the same solo runs.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from preflight.data.interference import ALONE
from preflight.data.sources._interference import check_interference, interference_frame
from preflight.data.tables import Loaded, RowChecks, file_sha256, numeric, read_csv

SOURCE = "local-interference"
#: The set collected on the project's own machine and shipped with preflight.
SHIPPED = Path(__file__).resolve().parents[1] / "local" / "local_interference.csv"
#: The layout the collector writes, in order; the loader needs every column.
COLUMNS = [
    "run",  # index in the seeded plan (a rerun skips the runs already in the file)
    "seed",
    "host",  # CPU model and logical cores of the machine measured
    "workload",  # compute | memory | cache | io
    "neighbours",  # canonical mix label: alone, cpu=2, l3=1,membw=1
    "backend",  # own | stress-ng: which stressors ran
    "seconds",  # wall time the workload ran
    "ops",  # work units it completed
    "ops_per_s",
    "solo_ops_per_s",  # rate of this workload's solo run in the same file
    "norm_perf",  # ops_per_s / solo_ops_per_s
    "cpu_util",  # the workload's CPU time over wall time, in cores
    "ctx_switches_per_s",
    "ipc",  # from perf counters where the kernel allows; empty otherwise
    "host_cpu_util",  # the whole machine's busy fraction, mean of per-second samples
    "host_mem_bw_proxy",  # see the collector
    "trace",  # JSON: per-second samples of the host's metrics during the run
    "collected_at",
]
#: The columns the loader reads (the rest document the run).
READ = ["workload", "host", "neighbours", "seconds", "ops_per_s", "cpu_util", "ipc"]


def load(path: Path) -> Loaded:
    raw = read_csv(path, READ, SOURCE)
    rate = numeric(raw, "ops_per_s")
    solo = raw.assign(rate=rate, cpu=numeric(raw, "cpu_util"), ipc=numeric(raw, "ipc"))[
        raw["neighbours"] == ALONE
    ]
    profile = solo.groupby("workload")[["rate", "cpu", "ipc"]].median().reindex(raw["workload"])
    rows = interference_frame(
        workload=raw["workload"].astype(str),
        host=raw["host"].astype(str),
        session=raw["host"].astype(str),
        mix=raw["neighbours"].astype(str),
        norm_perf=rate / profile["rate"].to_numpy(),
        solo={"ops_per_s": profile["rate"], "cpu_util": profile["cpu"], "ipc": profile["ipc"]},
    )
    checks = RowChecks(len(rows))
    checks.reject(np.isnan(profile["rate"].to_numpy()), "its workload has no solo run in the file")
    check_interference(rows, checks)
    checks.reject(numeric(raw, "seconds").fillna(0) <= 0, "no measured duration")
    return checks.finish(SOURCE, rows, file_sha256(path), path)
