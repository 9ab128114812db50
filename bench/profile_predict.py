"""Where one in-process GEMM prediction spends its time, per stage, for batches of 1 and 1,000 items.

    PREFLIGHT_HOME=/tmp/fastpath .venv/bin/preflight train gemm     # once: a champion to profile
    PREFLIGHT_HOME=/tmp/fastpath .venv/bin/python bench/profile_predict.py [--seconds 5] [--trees] [--json]

``--predictor DIR`` profiles a saved predictor folder (``artifacts.save``) instead of the champion.

Stages, the median and the least over repetitions (each batch size stops after ``--seconds``):
validate (the request's item models), rows, featurize, boosters, intervals (calibration, few-shot,
derived power and energy), reasons (the OOD envelope), records, and encode (the PredictResponse
built and dumped to JSON bytes as FastAPI does); ``total`` is their sum, with its p99.

The tree family's boosters are compiled first (``TreeFamily.compile``; a service compiles them once a
loaded family has predicted ``COMPILE_AFTER_ROWS`` rows), so the stages time the compiled path.
``--trees`` times LightGBM's boosters against their lleaves compilation and a tl2cgen build (gcc;
skipped unless tl2cgen is installed) in this process. ``--json`` times pydantic's JSON
dump against orjson and prints the response size for 1,000 out-of-distribution items against the
``{"predictions": {target: [floats...]}}`` shape of MLflow's scoring server.

Items are seeded like ``bench/serve_latency.py``'s: m, n, k log-uniform in [1, 16384], random dtypes,
devices cycling through catalogue names; the OOD items are shapes past the training range on a
device without measurements.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from preflight.data.catalogue import Catalogue
from preflight.data.settings import Settings
from preflight.models.core import artifacts
from preflight.models.core.actions import ModelInfoPublic
from preflight.models.core.predictor import Predictor
from preflight.models.core.task import get_task
from preflight.models.registry import tracking
from preflight.service.schemas import PredictResponse, predict_request
from pydantic import TypeAdapter
from serve_latency import DEVICES, DTYPES, MAX_DIM  # the same item mix as the latency benchmark

TASK = get_task("gemm")
BATCHES = (1, 1000)
REQUEST, RESPONSE = predict_request(TASK), TypeAdapter(PredictResponse)


def make_items(count: int, seed: int = 0) -> list[dict[str, Any]]:
    """``count`` GEMM items: log-uniform shapes, random dtypes, devices cycling."""
    rng = np.random.default_rng(seed)
    dims = np.clip(np.rint(np.exp(rng.uniform(0.0, np.log(MAX_DIM), size=(count, 3)))), 1, MAX_DIM)
    dtypes = rng.integers(0, len(DTYPES), size=count)
    return [
        {"m": int(m), "n": int(n), "k": int(k), "dtype": DTYPES[d], "device": DEVICES[i % len(DEVICES)]}
        for i, ((m, n, k), d) in enumerate(zip(dims.astype(int), dtypes))
    ]


def ood_items(count: int) -> list[dict[str, Any]]:
    """Items outside the envelope: thin shapes far past the training range on an unmeasured device."""
    return [
        {"m": MAX_DIM, "n": 1 + i % 7, "k": MAX_DIM, "dtype": "fp64", "device": "NVIDIA H100 80GB HBM3"}
        for i in range(count)
    ]


class Stopwatch:
    """Seconds spent per stage, summed within one call."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def wrap(self, stage: str, function: Callable) -> Callable:
        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.seconds[stage] = self.seconds.get(stage, 0.0) + time.perf_counter() - start

        return timed


def instrumented(predictor: Predictor, watch: Stopwatch) -> Predictor:
    """A shallow copy of the predictor whose boosters, reasons and derived targets are timed."""
    timed = Predictor.__new__(Predictor)
    timed.__dict__.update(predictor.__dict__)
    family = type(predictor.family_).__new__(type(predictor.family_))
    family.__dict__.update(predictor.family_.__dict__)
    family.predict = watch.wrap("boosters", family.predict)  # type: ignore[method-assign]
    timed.family_ = family
    timed._reasons = watch.wrap("reasons", predictor._reasons)  # type: ignore[method-assign]
    if predictor.task.derive is not None:
        timed.task = replace(predictor.task, derive=watch.wrap("derived", predictor.task.derive))
    return timed


def one_call(
    predictor: Predictor, catalogue: Catalogue, body: dict, info: ModelInfoPublic
) -> dict[str, float]:
    """Seconds per stage of one request's work, validation to JSON bytes."""
    watch = Stopwatch()
    timed = instrumented(predictor, watch)
    request = watch.wrap("validate", REQUEST.model_validate)(body)
    rows = watch.wrap("rows", TASK.items_to_rows)(request.items)
    features = watch.wrap("featurize", TASK.featurize)(rows, catalogue)
    estimates = watch.wrap("predict", timed.predict)(features, request.coverage)
    records = watch.wrap("records", estimates.records)()

    def encode() -> bytes:
        return RESPONSE.dump_json(PredictResponse(task=TASK.name, model=info, predictions=records))

    watch.wrap("encode", encode)()
    stages = dict(watch.seconds)
    inner = stages.pop("predict")
    stages["intervals"] = inner - sum(stages.get(s, 0.0) for s in ("boosters", "reasons", "derived"))
    stages["total"] = sum(stages.values())
    return stages


STAGES = ("validate", "rows", "featurize", "boosters", "intervals", "derived", "reasons", "records", "encode")


def profile(predictor: Predictor, catalogue: Catalogue, info: ModelInfoPublic, seconds: float) -> None:
    """Per batch size, ms per stage: the median and the least over calls (the least is the cost on a
    quiet machine), and the p99 of the whole call."""
    for size in BATCHES:
        body = {"items": make_items(size), "coverage": 0.9}
        one_call(predictor, catalogue, body, info)  # warm-up
        calls: list[dict[str, float]] = []
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline and len(calls) < 2000:
            calls.append(one_call(predictor, catalogue, body, info))
        totals = sorted(c["total"] for c in calls)
        p99 = 1e3 * totals[min(len(totals) - 1, int(0.99 * len(totals)))]
        print(f"batch {size} ({len(calls)} calls), ms per stage; whole call p99 {p99:.2f} ms")
        for label, pick in (("median", statistics.median), ("least", min)):
            ms = {s: 1e3 * pick(c.get(s, 0.0) for c in calls) for s in (*STAGES, "total")}
            rate = size / ms["total"] * 1e3
            print(
                f"  {label:6s} "
                + "  ".join(f"{s} {v:.3f}" for s, v in ms.items())
                + f"  ({rate:,.0f} items/s)"
            )


def best_of(function: Callable[[], Any], seconds: float) -> float:
    """The median ms of repeated calls, within a time budget."""
    function()
    times: list[float] = []
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline and len(times) < 5000:
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def compiled_trees(predictor: Predictor, matrix: np.ndarray, seconds: float) -> None:
    """LightGBM's predict against the family's lleaves compilation and a tl2cgen build of its boosters."""
    family: Any = predictor.family_
    boosters = family.boosters_
    variants = {"lightgbm": {t: partial(b.predict, num_threads=1) for t, b in boosters.items()}}
    if compiled := getattr(family, "compiled_", {}):
        variants["lleaves"] = {t: partial(m.predict, n_jobs=1) for t, m in compiled.items()}
    with tempfile.TemporaryDirectory(prefix="preflight-trees-") as tmp:
        try:
            variants["tl2cgen"] = {t: _tl2cgen(b, Path(tmp) / t) for t, b in boosters.items()}
        except ImportError as exc:
            print(f"tl2cgen: skipped ({exc})")
        reference = {t: variants["lightgbm"][t](matrix) for t in boosters}
        for name, predict in variants.items():
            worst = max(_relative(predict[t](matrix), reference[t]) for t in boosters)
            times = [best_of(partial(_each, predict, matrix[:n]), seconds) for n in BATCHES]
            print(
                f"{name:9s} batch 1: {times[0]:.4f} ms  batch 1000: {times[1]:.3f} ms  "
                f"max relative difference from lightgbm {worst:.1e}"
            )


def _relative(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a - b) / np.maximum(np.abs(b), 1e-300)))


def _each(predict: dict[str, Callable[[np.ndarray], np.ndarray]], matrix: np.ndarray) -> None:
    for function in predict.values():
        function(matrix)


def _tl2cgen(booster, folder: Path) -> Callable[[np.ndarray], np.ndarray]:
    import tl2cgen
    import treelite

    folder.mkdir()
    booster.save_model(folder / "model.txt")
    model = treelite.frontend.load_lightgbm_model(folder / "model.txt")
    tl2cgen.export_lib(model, toolchain="gcc", libpath=str(folder / "model.so"), params={"parallel_comp": 8})
    library = tl2cgen.Predictor(str(folder / "model.so"), nthread=1)
    return lambda X: library.predict(tl2cgen.DMatrix(X, dtype="float64")).reshape(len(X))


def encodings(predictor: Predictor, catalogue: Catalogue, info: ModelInfoPublic, seconds: float) -> None:
    """Pydantic's JSON (FastAPI's default) against orjson, and the response size for 1,000 OOD items."""
    from preflight.models.core.inference import predict_items

    items = REQUEST.model_validate({"items": ood_items(1000)}).items
    estimates = predict_items(TASK, predictor, catalogue, items).estimates
    response = PredictResponse(task=TASK.name, model=info, predictions=estimates.records())
    body = RESPONSE.dump_json(response)
    mlflow = json.dumps({"predictions": {t: estimates.value[t].tolist() for t in estimates.value}}).encode()
    print(f"pydantic dump_json: {best_of(lambda: RESPONSE.dump_json(response), seconds):.3f} ms")
    try:
        import orjson

        ms = best_of(lambda: orjson.dumps(RESPONSE.dump_python(response, mode="json")), seconds)
        print(f"dump_python + orjson: {ms:.3f} ms")
    except ImportError as exc:
        print(f"orjson: skipped ({exc})")
    records = estimates.records()
    ood = sum(record["ood"] for record in records)
    warnings = Counter(w for record in records for w in record["warnings"])
    heaviest = sorted(warnings.items(), key=lambda pair: -pair[1] * len(pair[0]))[:3]
    in_warnings = sum(len(json.dumps(record["warnings"])) for record in records)
    print(f"bytes in warnings: {in_warnings / 1e3:.1f} KB; the heaviest, times they occur:")
    for warning, count in heaviest:
        print(f"  {count} x {warning[:100]!r}{'...' if len(warning) > 100 else ''}")
    print(
        f"1,000 items ({ood} OOD): response {len(body) / 1e3:.1f} KB, "
        f"MLflow-shaped {len(mlflow) / 1e3:.1f} KB ({len(body) / len(mlflow):.2f}x)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="time budget per measurement")
    parser.add_argument("--trees", action="store_true", help="compare compiled trees with LightGBM")
    parser.add_argument("--json", action="store_true", help="compare JSON encoders; response sizes")
    parser.add_argument("--predictor", type=Path, help="a saved predictor folder instead of the champion")
    args = parser.parse_args()
    settings = Settings()
    catalogue = Catalogue.load(settings.devices_file)
    if args.predictor:
        predictor = artifacts.load(args.predictor)
        public = ModelInfoPublic(name="local", version="0", run_id="", family=predictor.family)
    else:
        predictor, info = tracking.load_champion(settings, TASK.name)
        public = ModelInfoPublic(**vars(info))
    items = REQUEST.model_validate({"items": make_items(1000)}).items
    matrix = TASK.featurize(TASK.items_to_rows(items), catalogue).X.to_numpy(dtype=float)
    compile_boosters(predictor, matrix)
    profile(predictor, catalogue, public, args.seconds)
    if args.trees:
        compiled_trees(predictor, matrix, args.seconds)
    if args.json:
        encodings(predictor, catalogue, public, args.seconds)


def compile_boosters(predictor: Predictor, matrix: np.ndarray) -> None:
    """Compile the tree family's boosters now, as a busy service does after ``COMPILE_AFTER_ROWS``
    rows, so that the stages time what it runs then."""
    family: Any = predictor.family_
    if not hasattr(family, "compile"):
        print(f"{type(family).__name__}: boosters not compiled (this version cannot)")
        return
    start = time.perf_counter()
    family.compile(matrix)
    print(f"compiled {sorted(family.compiled_)} in {time.perf_counter() - start:.2f} s (from the cache: ms)")


if __name__ == "__main__":
    main()
