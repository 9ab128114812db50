"""Gradient-boosted trees (LightGBM) on the featurizer's table ``X``, one booster per target, each on
its target's scale, relative to the reference where every training row has one (``Encoding``); a
binary target (an event) gets a classifier (LightGBM's ``binary`` objective, predicting probabilities).

A loaded family that has predicted ``COMPILE_AFTER_ROWS`` rows (a service's, not a one-off load's)
compiles its boosters to machine code with lleaves (LLVM) in a child process, then predicts with them:
about 6x LightGBM's speed at 1,000 rows, 4x at one. Each compiled booster is checked against LightGBM
on the rows that triggered it (``COMPILED_RTOL``; ``COMPILE_CHECK_ROWS`` of them) and cached under
``PREFLIGHT_HOME/cache/trees`` by the model's text, compiler and CPU, so a model compiles once per home
and machine (seconds per 100 trees, in the background) and loads in milliseconds after (then at once,
before the rows that triggered it are predicted).
A booster that cannot be compiled keeps predicting through LightGBM, said in one log line.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import subprocess
import sys
import tempfile
import threading
from importlib import metadata
from pathlib import Path
from typing import Any

import lightgbm as lgb
import numpy as np
import pandas as pd
from preflight.data.errors import ModelStateError
from preflight.data.settings import Settings
from preflight.features import Features
from preflight.models.core.parallel import local_cpus
from preflight.models.core.targets import Encoding, Target, encoded, encodings_from_state

#: Below this many rows, a second LightGBM thread costs more in synchronisation than it saves.
PARALLEL_MIN_ROWS = 20_000
#: Rows a loaded family predicts before it compiles its boosters (which takes seconds per 100 trees).
COMPILE_AFTER_ROWS = 10_000
#: How far (relative) a compiled booster may differ from LightGBM's to replace it (absolute near zero).
COMPILED_RTOL, COMPILED_ATOL = 1e-9, 1e-12
#: Rows (of those that triggered it) a compiled booster is checked on against LightGBM.
COMPILE_CHECK_ROWS = 1_000

log = logging.getLogger("preflight.models")


def cache_dir() -> Path:
    """Compiled boosters, one object file per model text, compiler version and host CPU:
    ``PREFLIGHT_HOME/cache/trees``, read when a booster compiles."""
    return Settings().cache_dir / "trees"


def compiled(booster: lgb.Booster) -> Any | None:
    """The booster compiled by lleaves (an ``lleaves.Model``; from the cache when it holds it), or
    None where it cannot be, logged. The compiling happens in a child process: lleaves generates its
    LLVM code in Python, which held the GIL for seconds in the serving process."""
    try:
        import lleaves

        text = booster.model_to_string()
        cached = _object_file(text)
        cached.parent.mkdir(parents=True, exist_ok=True)
        # whole object files only, whoever compiles
        with tempfile.TemporaryDirectory(dir=cached.parent) as tmp:
            model_file = Path(tmp) / "model.txt"
            model_file.write_text(text)
            if not cached.exists():
                _compile_in_child(model_file, Path(tmp) / "model.o")
                os.replace(Path(tmp) / "model.o", cached)
            model = lleaves.Model(model_file=str(model_file))
            model.compile(cache=str(cached))  # loads the object file: no code generation here
        return model
    except Exception as exc:  # no lleaves, an objective it lacks, an unwritable cache...
        log.warning("a booster was not compiled; LightGBM predicts (%s: %s)", type(exc).__name__, exc)
        return None


def is_cached(booster: lgb.Booster) -> bool:
    """Whether the cache holds the booster compiled for this machine (so that it loads in milliseconds)."""
    try:
        return _object_file(booster.model_to_string()).exists()
    except ImportError:  # no lleaves: nothing compiles
        return False


def _object_file(text: str) -> Path:
    """Where the cache keeps a model text compiled by this lleaves and LLVM for this CPU."""
    from llvmlite import binding

    host = [metadata.version("lleaves"), metadata.version("llvmlite"), binding.get_host_cpu_name()]
    host.append(binding.get_host_cpu_features().flatten())
    key = hashlib.sha256("\n".join([text, *host]).encode()).hexdigest()
    return cache_dir() / f"{key}.o"


#: What the child process runs: compile a model file to an object file.
_CHILD = "import sys, lleaves; lleaves.Model(model_file=sys.argv[1]).compile(cache=sys.argv[2])"
#: A compile taking longer than this (seconds) is given up (LightGBM keeps predicting).
COMPILE_TIMEOUT_S = 600


def _compile_in_child(model_file: Path, object_file: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(model_file), str(object_file)],
        capture_output=True,
        text=True,
        timeout=COMPILE_TIMEOUT_S,
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "no output")


def lgb_params(num_leaves: int, learning_rate: float, min_child_samples: int, n_rows: int, seed: int) -> dict:
    """The LightGBM settings every boosted-tree family shares: its size and rate, leaves of at least
    ``min_child_samples`` rows (a tenth of the rows where they are few), seeded and deterministic."""
    return {
        "num_leaves": num_leaves,
        "learning_rate": learning_rate,
        "min_data_in_leaf": min(min_child_samples, max(1, n_rows // 10)),
        "seed": seed,
        "deterministic": True,
        "verbosity": -1,
    }


class TreeFamily:
    name = "tree"
    concurrent = True

    def __init__(
        self,
        *,
        targets: dict[str, Target],
        num_leaves: int = 31,
        learning_rate: float = 0.05,
        n_estimators: int = 500,
        min_child_samples: int = 10,
        feature_fraction: float = 0.9,
        relative: bool = True,
        objective: str = "regression",
        seed: int = 0,
    ) -> None:
        self.num_leaves, self.learning_rate, self.n_estimators = num_leaves, learning_rate, n_estimators
        self.min_child_samples, self.feature_fraction = min_child_samples, feature_fraction
        self.targets, self.relative, self.objective, self.seed = targets, relative, objective, seed

    def get_params(self) -> dict:
        return {
            k: getattr(self, k)
            for k in (
                "num_leaves",
                "learning_rate",
                "n_estimators",
                "min_child_samples",
                "feature_fraction",
                "relative",
                "objective",
                "seed",
            )
        }

    def _lgb_params(self, n_rows: int, monotone: dict[str, int], event: bool) -> dict:
        constraints = [monotone.get(c, 0) for c in self.columns_]
        return {
            **lgb_params(self.num_leaves, self.learning_rate, self.min_child_samples, n_rows, self.seed),
            **({"monotone_constraints": constraints} if any(constraints) else {}),
            "objective": "binary" if event else self.objective,
            "feature_fraction": self.feature_fraction,
            "num_threads": 1 if n_rows < PARALLEL_MIN_ROWS else min(2, local_cpus()),
            "force_col_wise": True,
        }

    def fit(self, features: Features, Y: pd.DataFrame, sample_weight: np.ndarray | None = None) -> TreeFamily:
        self.columns_ = list(features.X.columns)
        self.boosters_: dict[str, lgb.Booster] = {}
        self._serving(None)  # a fresh fit serves no traffic: it never compiles
        self.encodings_: dict[str, Encoding] = {}
        for name, rows, encoding, z in encoded(self.targets, Y, features.reference, self.relative):
            weight = None if sample_weight is None else np.asarray(sample_weight)[rows]
            data = lgb.Dataset(features.X[rows], z, weight=weight, free_raw_data=True)
            # physics' directions hold for the ratio to the reference, not for the bare target
            monotone = features.monotone.get(name, {}) if encoding.relative else {}
            params = self._lgb_params(int(rows.sum()), monotone, encoding.target.kind.event)
            self.boosters_[name] = lgb.train(params, data, self.n_estimators)
            self.encodings_[name] = encoding
        return self

    def predict(self, features: Features) -> pd.DataFrame:
        matrix = self._matrix(features.X)
        self._count(matrix)
        out = {
            name: self.encodings_[name].decode(self._raw(name, matrix), features.reference[name])
            for name in self.boosters_
        }
        return pd.DataFrame(out, index=features.X.index)

    def _matrix(self, X: pd.DataFrame) -> np.ndarray:
        """The trained-on columns of ``X`` as floats, row after row in memory (numpy skips LightGBM's
        pandas checks; each compiled booster would copy a frame's column-major matrix again)."""
        if list(X.columns) == self.columns_:  # the usual case: selecting them again costs a copy
            return np.ascontiguousarray(X.to_numpy(dtype=float))
        present = set(X.columns)
        if missing := [c for c in self.columns_ if c not in present]:
            named = ", ".join(missing[:5]) + ("..." if len(missing) > 5 else "")
            raise ModelStateError(
                f"this model was trained on features this version no longer computes ({named}): "
                "retrain it (`preflight train TASK`)"
            )
        return np.ascontiguousarray(X[self.columns_].to_numpy(dtype=float))

    def _serving(self, rows_until_compile: int | None) -> None:
        """LightGBM predicts until ``rows_until_compile`` rows (None: for good)."""
        self.compiled_: dict[str, Any] = {}
        self.rows_until_compile_ = rows_until_compile
        self.lock_ = threading.Lock()

    def _count(self, matrix: np.ndarray) -> None:
        """Compile once a loaded family has been asked about ``COMPILE_AFTER_ROWS`` rows: here, before
        they are predicted, where the cache holds every booster; else in the background."""
        if self.rows_until_compile_ is None:
            return
        with self.lock_:
            if self.rows_until_compile_ is None:  # another request started it meanwhile
                return
            self.rows_until_compile_ -= len(matrix)
            if self.rows_until_compile_ > 0:
                return
            self.rows_until_compile_ = None
            if all(is_cached(booster) for booster in self.boosters_.values()):
                self.compile(matrix)
                return
        # not a daemon: the interpreter waits for it at exit, where a daemon thread inside LLVM crashes it
        threading.Thread(target=self.compile, args=(matrix,), name="preflight-compile").start()

    def compile(self, sample: np.ndarray) -> None:
        """Compile every booster; each replaces LightGBM where it predicts the first
        ``COMPILE_CHECK_ROWS`` rows of ``sample`` (trained-on columns, as floats) alike."""
        self.rows_until_compile_ = None  # once is enough
        sample = sample[:COMPILE_CHECK_ROWS]
        for name, booster in self.boosters_.items():
            model = compiled(booster)
            if model is None:
                continue
            expected = booster.predict(sample, num_threads=1)
            got = model.predict(sample, n_jobs=1)
            if np.allclose(got, expected, rtol=COMPILED_RTOL, atol=COMPILED_ATOL):
                self.compiled_[name] = model
            else:
                log.warning("the compiled %s booster differs from LightGBM's; LightGBM predicts", name)

    def _raw(self, name: str, matrix: np.ndarray) -> np.ndarray:
        """A target's booster output: compiled where it was, else LightGBM's."""
        if name in self.compiled_:
            return self.compiled_[name].predict(matrix, n_jobs=1)
        return np.asarray(self.boosters_[name].predict(matrix, num_threads=1))

    def save(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        for name, booster in self.boosters_.items():
            booster.save_model(directory / f"{name}.lgb")
        encodings = {t: e.state() for t, e in self.encodings_.items()}
        state = {"params": self.get_params(), "columns": self.columns_, "encodings": encodings}
        (directory / "tree.json").write_text(json.dumps(state, indent=2))

    @classmethod
    def load(cls, directory: Path) -> TreeFamily:
        state = json.loads((directory / "tree.json").read_text())
        encodings = encodings_from_state(state)
        params = {
            k: v for k, v in state["params"].items() if k != "target_transform"
        }  # saved before issue 11
        family = cls(targets={t: e.target for t, e in encodings.items()}, **params)
        family.columns_, family.encodings_ = state["columns"], encodings
        family.boosters_ = {t: lgb.Booster(model_file=str(directory / f"{t}.lgb")) for t in encodings}
        family._serving(COMPILE_AFTER_ROWS)
        return family
