"""Batch scoring of a large file of GEMM items without Ray: rows per second and peak memory.

    .venv/bin/python bench/score.py [--rows 1000000] [--batch-rows 50000] [--home HOME]

Writes ``--rows`` seeded GEMM items (m, n, k log-uniform powers of two from 16 to 8192, four dtypes,
six catalogue GPUs, an id column) to Parquet, then ``preflight.score`` streams them through the gemm
champion of ``--home`` (one is trained on the embedded default in a temporary home when none is
given) into another Parquet file. Prints rows/s and the process's peak RSS before and after scoring
(the items' frame is freed first), and writes them to bench/out/score.json. The first load of the
champion in the process (importing MLflow, SciPy, scikit-learn; ~3.5 s) is timed apart: ``rows_per_s``
is the scoring call's rate (which loads the version again, from a warm registry), and
``rows_per_s_with_first_load`` counts the first load too, as one ``preflight score`` command does.
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import preflight

OUT = Path(__file__).parent / "out" / "score.json"
DEVICES = ("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB", "Tesla T4", "Tesla V100-PCIE-32GB",
           "NVIDIA L4", "NVIDIA GeForce RTX 4090")  # fmt: skip


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def write_items(path: Path, rows: int) -> None:
    rng = np.random.default_rng(0)
    pd.DataFrame(
        {
            "id": np.arange(rows),
            "m": 2 ** rng.integers(4, 14, rows),
            "n": 2 ** rng.integers(4, 14, rows),
            "k": 2 ** rng.integers(4, 14, rows),
            "dtype": rng.choice(["fp32", "fp16", "bf16", "tf32"], rows),
            "device": rng.choice(DEVICES, rows),
        }
    ).to_parquet(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--batch-rows", type=int, default=preflight.SCORE_BATCH_ROWS)
    parser.add_argument("--home", type=Path, help="a home with a gemm champion (default: train one)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        home = args.home or Path(work) / "home"
        if args.home is None:
            preflight.train("gemm", home=home)
        items, scored = Path(work) / "items.parquet", Path(work) / "scored.parquet"
        write_items(items, args.rows)
        gc.collect()
        before = peak_rss_mb()
        began = time.monotonic()
        preflight.load("gemm", home=home)  # the libraries imported and the registry opened, once a process
        loading = time.monotonic() - began
        began = time.monotonic()
        result = preflight.score("gemm", items, scored, batch_rows=args.batch_rows, home=home)
        seconds = time.monotonic() - began
        figures = {
            "rows": result.rows,
            "batch_rows": args.batch_rows,
            "first_load_s": round(loading, 2),
            "seconds": round(seconds, 2),
            "rows_per_s": round(result.rows / seconds),
            "rows_per_s_with_first_load": round(result.rows / (seconds + loading)),
            "peak_rss_mb_before": round(before),
            "peak_rss_mb_after": round(peak_rss_mb()),
            "output_mb": round(scored.stat().st_size / 2**20, 1),
            "model": f"{result.model.name} v{result.model.version} ({result.model.family})",
        }
    print(json.dumps(figures, indent=2))
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
