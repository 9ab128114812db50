"""What a task predicts: a ``Target`` per quantity, declared in the task's spec, and the ``Encoding``
a family learns it in.

A target's ``scale`` is the space its errors live in: residuals, conformal scores, few-shot offsets
and intervals are all taken there, and an interval is ``g⁻¹(g(ŷ) ± q)``:

- ``log``: positive quantities (times, power, energy); relative intervals ``ŷ·e^{±q}``;
- ``log1p``: counts that may be 0 (a design's DSP blocks): ``zero_ok`` says 0 is a measurement;
- ``identity``: scores that reach zero or below (an accuracy, darcy's negative score); absolute intervals;
- ``logit``: fractions strictly inside (0, 1);
- ``binary``: an event that happens (1) or not (0), such as a design fitting its FPGA; estimates are
  probabilities, families learn it with a logistic loss, and its interval is the plausible range of
  that probability (``conformal.py``).

``lower`` and ``upper`` bound what the target can be (estimates and bounds are clipped to them).
A family learns a target on its scale, optionally relative to the featurizer's ``reference`` for it
(the roofline time for ``runtime_ms``, the last accuracy of a curve): ``g(y) - g(reference)``, i.e. a
log ratio on the log scale and a difference on the identity scale.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Literal

import numpy as np
import pandas as pd

Scale = Literal["log", "log1p", "identity", "logit", "binary"]
SCALES: tuple[str, ...] = ("log", "log1p", "identity", "logit", "binary")


@dataclass(frozen=True)
class Target:
    """One quantity a task predicts, with its unit and the scale its errors are measured on."""

    unit: str
    scale: Scale = "log"
    lower: float | None = None
    upper: float | None = None
    zero_ok: bool = False
    description: str = ""
    #: The reference is a physical limit the quantity never beats (a GEMM's roofline time): estimates
    #: and both interval ends are kept at or above it.
    at_least_reference: bool = False

    def __post_init__(self) -> None:
        if self.scale not in SCALES:
            raise ValueError(f"scale must be one of {SCALES}, got {self.scale!r}")
        if self.zero_ok and self.scale in ("log", "logit"):
            raise ValueError(f"a {self.scale} scale cannot learn zeros: use log1p or identity")
        if self.scale == "binary" and (self.lower, self.upper) != (0.0, 1.0):
            raise ValueError("a binary target is a probability: lower=0, upper=1")

    @property
    def binary(self) -> bool:
        """Whether this is an event's probability (classification) rather than a quantity."""
        return self.scale == "binary"

    @property
    def relative(self) -> bool:
        """Whether errors are relative (APE and relative interval widths mean something)."""
        return self.scale == "log"

    def error(self, measured: pd.Series, predicted: pd.Series) -> pd.Series:
        """Each estimate's error: the absolute percentage error for a relative quantity, the absolute
        error otherwise."""
        error = (predicted - measured).abs()
        return error / measured * 100 if self.relative else error

    @property
    def error_label(self) -> str:
        """What :meth:`error` measures, with its unit (an axis label)."""
        if self.relative:
            return "APE (%)"
        return f"absolute error ({self.unit})" if self.unit else "absolute error"

    def present(self, y: pd.Series | np.ndarray) -> np.ndarray:
        """Rows that carry a usable value: finite and inside the scale's domain."""
        values = pd.to_numeric(pd.Series(y), errors="coerce").to_numpy(dtype=float)
        ok = np.isfinite(values)
        values = np.nan_to_num(values)
        if self.scale == "log":
            return ok & (values > 0)
        if self.scale == "log1p":
            return ok & ((values >= 0) if self.zero_ok else (values > 0))
        if self.scale == "logit":
            return ok & (values > 0) & (values < 1)
        if self.scale == "binary":  # labels 0/1, and probabilities between
            return ok & (values >= 0) & (values <= 1)
        return ok

    def to_scale(self, y: np.ndarray) -> np.ndarray:
        y = np.asarray(y, dtype=float)
        if self.scale == "log":
            return np.log(y)
        if self.scale == "log1p":
            return np.log1p(y)
        if self.scale == "logit":
            return np.log(y) - np.log1p(-y)
        return y

    def from_scale(self, z: np.ndarray) -> np.ndarray:
        z = np.asarray(z, dtype=float)
        if self.scale == "log":
            return np.exp(z)
        if self.scale == "log1p":
            return np.expm1(z)
        if self.scale == "logit":
            return 1 / (1 + np.exp(-z))
        return z

    def residual(self, y: np.ndarray, predicted: np.ndarray) -> np.ndarray:
        """Measured against predicted on the target's scale."""
        return self.to_scale(y) - self.to_scale(predicted)

    def shift(self, predicted: np.ndarray, offset: np.ndarray) -> np.ndarray:
        """A prediction moved by an offset on the target's scale (the inverse of ``residual``)."""
        return self.from_scale(self.to_scale(predicted) + offset)

    def interval(self, predicted: np.ndarray, q: float) -> tuple[np.ndarray, np.ndarray]:
        """Bounds a score quantile ``q`` away from the estimates, on the target's scale."""
        z = self.to_scale(predicted)
        with np.errstate(over="ignore"):
            return self.from_scale(z - q), self.from_scale(z + q)

    def clip(self, values: np.ndarray, floor: np.ndarray | None = None) -> np.ndarray:
        """Estimates or bounds kept within what the target can be, and at or above ``floor`` (a
        physical limit per row) where it is finite."""
        values = np.asarray(values, dtype=float)
        if floor is not None:
            values = np.where(np.isfinite(floor), np.fmax(values, floor), values)
        if self.lower is not None:
            values = np.maximum(values, self.lower)
        return values if self.upper is None else np.minimum(values, self.upper)

    def state(self) -> dict:
        return asdict(self)

    @classmethod
    def from_state(cls, state: dict) -> Target:
        return cls(**state)


@dataclass(frozen=True)
class Encoding:
    """How a family learns one target: on its scale, relative to the reference or not."""

    target: Target
    relative: bool

    @classmethod
    def choose(cls, target: Target, reference: pd.Series, relative: bool) -> Encoding:
        """Relative where the family asks for it and every training row has a usable reference."""
        usable = len(reference) > 0 and bool(target.present(reference).all()) and not target.binary
        return cls(target, relative and usable)

    def encode(self, y: pd.Series, reference: pd.Series) -> np.ndarray:
        z = self.target.to_scale(y.to_numpy(dtype=float))
        return z - self.target.to_scale(reference.to_numpy(dtype=float)) if self.relative else z

    def decode(self, z: np.ndarray, reference: pd.Series) -> np.ndarray:
        z = np.asarray(z, dtype=float)
        if self.relative:
            z = z + self.target.to_scale(reference.to_numpy(dtype=float))
        return self.target.from_scale(z)

    def state(self) -> dict:
        return {"target": self.target.state(), "relative": self.relative}

    @classmethod
    def from_state(cls, state: dict) -> Encoding:
        return cls(Target.from_state(state["target"]), state["relative"])


#: How families saved before targets were declared by tasks named their transforms.
_LEGACY: dict[str, tuple[Scale, bool]] = {
    "log_ratio": ("log", True),
    "log": ("log", False),
    "identity": ("identity", False),
    "difference": ("identity", True),
}


def encodings_from_state(state: dict) -> dict[str, Encoding]:
    """A family's encodings from its saved state, including a state saved before issue 11 (transform
    names; the only target on an absolute scale then was ``accuracy``, bounded by 1)."""
    if "encodings" in state:
        return {t: Encoding.from_state(e) for t, e in state["encodings"].items()}
    out = {}
    for name, transform in state["transforms"].items():
        scale, relative = _LEGACY[transform]
        out[name] = Encoding(Target("", scale, upper=1.0 if name == "accuracy" else None), relative)
    return out


def encoded(
    targets: dict[str, Target], Y: pd.DataFrame, reference: pd.DataFrame, relative: bool, min_rows: int = 2
) -> Iterator[tuple[str, np.ndarray, Encoding, np.ndarray]]:
    """For each target of ``Y`` measured on at least ``min_rows`` rows: its name, those rows, the
    encoding a family learns it in, and the encoded values of those rows."""
    for name in Y.columns:
        rows = targets[name].present(Y[name])
        if rows.sum() < min_rows:
            continue
        encoding = Encoding.choose(targets[name], reference[name][rows], relative)
        yield name, rows, encoding, encoding.encode(Y[name][rows], reference[name][rows])
