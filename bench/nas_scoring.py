r"""Scoring a whole search space: all 15,625 NAS-Bench-201 cells for one device, through a real server.

    PREFLIGHT_DATASETS=../shared/datasets .venv/bin/python bench/nas_scoring.py \
        [--device pixel3] [--repeats 5]

Trains a ``nas-latency`` champion on HELP NAS-Bench-201 (sampled as ``preflight serve`` would) into
a temporary home unless ``--home`` names one that holds it, starts ``preflight serve`` on
127.0.0.1, then sends the space as two requests (10,000 + 5,625 items, the API's limit per
request) on one keep-alive connection, ``--repeats`` times. End to end = first byte sent to last
byte of the second response read, as the client sees it. The first pass is reported apart: it
parses every architecture (later passes find them in the featurizer's cache).
Writes bench/out/nas_scoring.json.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from preflight.data import sources
from preflight.data.catalogue import Catalogue
from preflight.data.settings import Settings
from preflight.models.core.task import get_task
from preflight.models.core.training import train
from serve_latency import OUT_DIR, Client, free_port, start_server, stop_server, wait_ready

MAX_ITEMS = 10_000


def _champion_home(home: Path | None, datasets: Path) -> Path:
    if home is not None:
        return home
    home = Path(tempfile.mkdtemp(prefix="pf-nas-scoring-")) / "home"
    settings = Settings(home=home, datasets=datasets, api_keys=[])
    path = sources.default_path("help-nb201", datasets)
    train(
        get_task("nas-latency"), settings, Catalogue.load(settings.devices_file), paths={"help-nb201": path}
    )
    return home


def _space(datasets: Path) -> list[str]:
    return pd.read_csv(datasets / "nas" / "nb201_index_to_arch_str.csv")["arch_str"].tolist()


def _score(client: Client, bodies: list[dict], expected: int) -> float:
    start = time.perf_counter()
    answered = 0
    for body in bodies:
        status, payload = client.request("POST", "/v1/nas-latency/predict", body)
        if status != 200:
            raise RuntimeError(f"HTTP {status}: {payload[:300]!r}")
        answered += len(json.loads(payload)["predictions"])
    seconds = time.perf_counter() - start
    if answered != expected:
        raise RuntimeError(f"{answered} predictions for {expected} items")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--datasets", type=Path, default=Settings().datasets)
    parser.add_argument("--home", type=Path, default=None)
    parser.add_argument("--device", default="pixel3")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    if args.datasets is None:
        raise SystemExit("set PREFLIGHT_DATASETS or pass --datasets")
    home = _champion_home(args.home, args.datasets)
    archs = _space(args.datasets)
    items = [{"space": "nb201", "arch": a, "dataset": "cifar10", "device": args.device} for a in archs]
    bodies = [{"items": items[i : i + MAX_ITEMS]} for i in range(0, len(items), MAX_ITEMS)]
    port, log_path = free_port(), OUT_DIR / "nas_scoring_server.log"
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    server = start_server(port, home, None, log_path)
    try:
        wait_ready(server, port, timeout=900, log_path=log_path)
        with Client(port, timeout=120) as client:
            passes = [_score(client, bodies, len(items)) for _ in range(args.repeats + 1)]
    finally:
        stop_server(server)
    result = {
        "items": len(items),
        "requests": len(bodies),
        "device": args.device,
        "first_pass_s": passes[0],
        "warm_median_s": float(np.median(passes[1:])),
        "warm_max_s": float(np.max(passes[1:])),
        "warm_passes_s": passes[1:],
        "home": str(home),
    }
    (OUT_DIR / "nas_scoring.json").write_text(json.dumps(result, indent=2))
    print(
        f"{len(items)} architectures for {args.device} in {len(bodies)} requests: "
        f"first pass {passes[0]:.2f} s, then median {result['warm_median_s']:.2f} s "
        f"(max {result['warm_max_s']:.2f} s) over {args.repeats}"
    )


if __name__ == "__main__":
    main()
