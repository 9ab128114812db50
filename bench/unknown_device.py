"""Few-shot adaptation of the NAS latency model to a device the catalogue has never heard of.

    PREFLIGHT_HOME=/tmp/unknown_device/home PREFLIGHT_DATASETS=../shared/datasets \\
        .venv/bin/python bench/unknown_device.py [--devices lat_titan_rtx_1 lat_pixel3 ...]

For each held-out column D of HELP's NAS-Bench-201 latency table (``nas/help_nb201_latency.csv``),
trains ``nas-latency`` on every other ``lat_*`` column (``--train-archs`` architectures drawn with
``--seed``: 525 x 19 devices ~ the 10,000 rows ``preflight train`` caps nas-latency at; 0 = all
15,625, over 30 min per evaluate on 2 cores) and tests on D's 15,625 architectures with K=10 shots
(``preflight evaluate ... --shots 10 --seed 0 --json``), twice: once under D's real name (a device
the catalogue knows, with spec-sheet features) and once renamed to ``lat_fpga`` / ``lat_eyeriss``
(alternating), a device known only by its measurements. Records Spearman, Kendall, median APE and
interval coverage for the model and the baseline, prints a table and writes
bench/out/unknown_device.json. HELP reports Spearman 0.932 for 10-shot adaptation, for reference.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
OUT_DIR = ROOT / "bench" / "out"
DEFAULT_DEVICES = ["lat_titan_rtx_1", "lat_pixel3", "lat_gold_6240", "lat_samsung_a50"]
UNKNOWN_NAMES = ["lat_fpga", "lat_eyeriss"]
KEYS = ["spearman", "kendall", "median_ape", "coverage"]


def write_files(
    table: pd.DataFrame, column: str, alias: str, work: Path, train_archs: int, seed: int
) -> tuple[Path, Path, Path]:
    """Train file without ``column`` (``train_archs`` rows drawn, 0 = all); test files with every row
    of it under its real name and under ``alias``."""
    work.mkdir(parents=True, exist_ok=True)
    train, real, renamed = work / "train.csv", work / "test_real.csv", work / "test_renamed.csv"
    rest = table.drop(columns=[column])
    if 0 < train_archs < len(rest):
        rest = rest.sample(train_archs, random_state=seed).sort_index()
    rest.to_csv(train, index=False)
    test = table[["arch_idx", "arch_str", column]]
    test.to_csv(real, index=False)
    test.rename(columns={column: alias}).to_csv(renamed, index=False)
    return train, real, renamed


def evaluate(train: Path, test: Path, log: Path, shots: int, seed: int) -> dict:
    """Run ``preflight evaluate`` in a subprocess; stderr goes to ``log``. Returns the parsed JSON."""
    command = [
        str(ROOT / ".venv" / "bin" / "preflight"), "evaluate", "nas-latency", "--source", "help-nb201",
        "--train", str(train), "--test", str(test), "--shots", str(shots), "--seed", str(seed), "--json",
    ]  # fmt: skip
    with log.open("w") as err:
        done = subprocess.run(command, stdout=subprocess.PIPE, stderr=err, text=True, cwd=ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"exit {done.returncode}: {log.read_text().strip().splitlines()[-1:]} (see {log})")
    return json.loads(done.stdout)


def pick(metrics: dict) -> dict:
    """The four numbers from ``metrics.latency_ms``: the ``mean`` entry, else the only device's."""
    latency = metrics["latency_ms"]
    entry = latency.get("mean") or next(iter(latency.values()))
    return {k: entry.get(k) for k in KEYS}


def run_device(table: pd.DataFrame, column: str, alias: str, work: Path, args: argparse.Namespace) -> dict:
    """Both runs (real name, renamed) for one held-out column."""
    shots, seed = args.shots, args.seed
    train, real, renamed = write_files(table, column, alias, work / column, args.train_archs, seed)
    row: dict = {"device": column, "alias": alias}
    for label, test in (("real", real), ("renamed", renamed)):
        start = time.perf_counter()
        try:
            result = evaluate(train, test, work / column / f"{label}.stderr.log", shots, seed)
        except (RuntimeError, json.JSONDecodeError) as error:
            row[label] = {"error": str(error)}
            print(f"{column} [{label}] FAILED: {error}", file=sys.stderr)
            continue
        row[label] = {
            "model": pick(result["metrics"]),
            "baseline": pick(result["baseline"]["metrics"]),
            "baseline_name": result["baseline"]["name"],
            "family": result["family"],
            "n_test": result["n_test"],
            "seconds": round(time.perf_counter() - start, 1),
        }
        print(f"{column} [{label}] done in {row[label]['seconds']}s", file=sys.stderr)
    return row


def _get(row: dict, label: str, who: str, key: str) -> str:
    value = row[label].get(who, {}).get(key)
    return "ERR" if value is None else f"{value:.3f}"


def _both(row: dict, who: str, key: str) -> str:
    return f"{_get(row, 'real', who, key)} / {_get(row, 'renamed', who, key)}"


def format_table(rows: list[dict]) -> str:
    """One line per device: real / renamed for each metric."""
    header = ["device (renamed)", "Spearman", "Kendall", "median APE %", "coverage", "baseline Spearman"]
    lines = [" | ".join(header), " | ".join("---" for _ in header)]
    for row in rows:
        cells = [f"{row['device']} ({row['alias']})"]
        cells += [_both(row, "model", k) for k in KEYS] + [_both(row, "baseline", "spearman")]
        lines.append(" | ".join(cells))
    return "\n".join(lines) + "\n(each cell: real name / renamed to an unknown device)"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--datasets", type=Path, default=os.environ.get("PREFLIGHT_DATASETS"))
    parser.add_argument("--devices", nargs="+", default=DEFAULT_DEVICES)
    parser.add_argument("--shots", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--train-archs", type=int, default=525, help="architectures in the train file (0 = all)"
    )
    parser.add_argument("--work", type=Path, default=Path("/tmp/unknown_device/work"))
    args = parser.parse_args()
    if args.datasets is None:
        raise SystemExit("set PREFLIGHT_DATASETS or pass --datasets")
    table = pd.read_csv(Path(args.datasets) / "nas" / "help_nb201_latency.csv")
    missing = [d for d in args.devices if d not in table.columns]
    if missing:
        raise SystemExit(f"not columns of the HELP table: {missing}")
    start = time.perf_counter()
    rows = [run_device(table, d, UNKNOWN_NAMES[i % 2], args.work, args) for i, d in enumerate(args.devices)]
    wall = time.perf_counter() - start
    print(format_table(rows))
    print(f"wall time: {wall:.0f}s")
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    out = {
        "shots": args.shots, "seed": args.seed, "train_archs": args.train_archs,
        "wall_s": round(wall, 1), "devices": rows,
    }  # fmt: skip
    (OUT_DIR / "unknown_device.json").write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {OUT_DIR / 'unknown_device.json'}")


if __name__ == "__main__":
    main()
