"""What a task predicts: a ``Target`` per quantity, declared in the task's spec, and the ``Encoding``
a family learns it in.

A target's ``scale`` names the space its errors live in (a :class:`Scale`, one per name in
``SCALES``): residuals, conformal scores, few-shot offsets and intervals are all taken there, and an
interval is ``g⁻¹(g(ŷ) ± q)``. Each scale says which values it takes, its ``g``, whether its errors
are relative, and whether it is an event (a probability, learned and judged as a classifier's):
adding a scale is one class here and one entry of ``SCALES``.

``lower`` and ``upper`` bound what the target can be (estimates and bounds are clipped to them).
A family learns a target on its scale, optionally relative to the featurizer's ``reference`` for it
(the roofline time for ``runtime_ms``, the last accuracy of a curve): ``g(y) - g(reference)``, i.e. a
log ratio on the log scale and a difference on the identity scale.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import ClassVar

import numpy as np
import pandas as pd
from scipy.special import expit, logit


class Scale:
    """The space a target's errors live in: the values it takes and ``g`` (here the identity)."""

    name: ClassVar[str]
    #: Errors are ratios: percentage errors and relative interval widths mean something.
    relative: ClassVar[bool] = False
    #: A measurement of 0 can be learned (where ``Target.zero_ok`` says 0 is one).
    zeros: ClassVar[bool] = True
    #: An event's probability rather than a quantity: families learn its logit with a logistic loss
    #: (never relative to a reference), calibration recalibrates it and bounds it by a Wilson interval
    #: (``conformal.py``), and it is judged by classification metrics and a reliability diagram.
    event: ClassVar[bool] = False

    def inside(self, values: np.ndarray, zero_ok: bool) -> np.ndarray:
        """Which (finite) values lie in the scale's domain."""
        return np.ones(values.shape, dtype=bool)

    def to_scale(self, y: np.ndarray) -> np.ndarray:
        """``g``: values onto the scale."""
        return y

    def from_scale(self, z: np.ndarray) -> np.ndarray:
        """``g⁻¹``: values on the scale back to the target's units."""
        return z

    def from_raw(self, z: np.ndarray) -> np.ndarray:
        """A model's unbounded output (a linear predictor, a network's output unit) as a value on the
        scale."""
        return z

    def check(self, target: Target) -> None:
        """Refuses a target whose declaration the scale cannot honour."""
        if target.zero_ok and not self.zeros:
            raise ValueError(f"a {self.name} scale cannot learn zeros: use log1p or identity")


class Log(Scale):
    """Positive quantities (times, power, energy): relative intervals ``ŷ·e^{±q}``."""

    name, relative, zeros = "log", True, False

    def inside(self, values: np.ndarray, zero_ok: bool) -> np.ndarray:
        return values > 0

    def to_scale(self, y: np.ndarray) -> np.ndarray:
        return np.log(y)

    def from_scale(self, z: np.ndarray) -> np.ndarray:
        return np.exp(z)


class Log1p(Scale):
    """Counts that may be 0 (a design's DSP blocks): ``zero_ok`` says 0 is a measurement."""

    name = "log1p"

    def inside(self, values: np.ndarray, zero_ok: bool) -> np.ndarray:
        return (values >= 0) if zero_ok else (values > 0)

    def to_scale(self, y: np.ndarray) -> np.ndarray:
        return np.log1p(y)

    def from_scale(self, z: np.ndarray) -> np.ndarray:
        return np.expm1(z)


class Identity(Scale):
    """Scores that reach zero or below (an accuracy, darcy's negative score): absolute intervals."""

    name = "identity"


class Logit(Scale):
    """Fractions strictly inside (0, 1)."""

    name, zeros = "logit", False

    def inside(self, values: np.ndarray, zero_ok: bool) -> np.ndarray:
        return (values > 0) & (values < 1)

    def to_scale(self, y: np.ndarray) -> np.ndarray:
        return logit(y)

    def from_scale(self, z: np.ndarray) -> np.ndarray:
        return expit(z)


class Event(Scale):
    """An event that happens (1) or not (0), such as a design fitting its FPGA: labels 0/1 and
    estimates of its probability in between, a model's output being the logit (see ``Scale.event``)."""

    name, event = "binary", True

    def inside(self, values: np.ndarray, zero_ok: bool) -> np.ndarray:
        return (values >= 0) & (values <= 1)

    def from_raw(self, z: np.ndarray) -> np.ndarray:
        return expit(z)

    def check(self, target: Target) -> None:
        super().check(target)
        if (target.lower, target.upper) != (0.0, 1.0):
            raise ValueError(f"a {self.name} target is a probability: lower=0, upper=1")


#: Every scale by the name a ``Target`` declares (and saves) it under.
SCALES: dict[str, Scale] = {s.name: s for s in (Log(), Log1p(), Identity(), Logit(), Event())}


@dataclass(frozen=True)
class Target:
    """One quantity a task predicts, with its unit and the scale its errors are measured on."""

    unit: str
    scale: str = "log"  # a name in SCALES
    lower: float | None = None
    upper: float | None = None
    zero_ok: bool = False
    description: str = ""
    #: The reference is a physical limit the quantity never beats (a GEMM's roofline time): estimates
    #: and both interval ends are kept at or above it.
    at_least_reference: bool = False

    def __post_init__(self) -> None:
        if self.scale not in SCALES:
            raise ValueError(f"scale must be one of {tuple(SCALES)}, got {self.scale!r}")
        self.kind.check(self)

    @property
    def kind(self) -> Scale:
        """The :class:`Scale` that ``scale`` names."""
        return SCALES[self.scale]

    def error(self, measured: pd.Series, predicted: pd.Series) -> pd.Series:
        """Each estimate's error: the absolute percentage error for a relative quantity, the absolute
        error otherwise."""
        error = (predicted - measured).abs()
        return error / measured * 100 if self.kind.relative else error

    @property
    def error_label(self) -> str:
        """What :meth:`error` measures, with its unit (an axis label)."""
        if self.kind.relative:
            return "APE (%)"
        return f"absolute error ({self.unit})" if self.unit else "absolute error"

    def present(self, y: pd.Series | np.ndarray) -> np.ndarray:
        """Rows that carry a usable value: finite and inside the scale's domain."""
        values = pd.to_numeric(pd.Series(y), errors="coerce").to_numpy(dtype=float)
        return np.isfinite(values) & self.kind.inside(np.nan_to_num(values), self.zero_ok)

    def residual(self, y: np.ndarray, predicted: np.ndarray) -> np.ndarray:
        """Measured against predicted on the target's scale."""
        to_scale = self.kind.to_scale
        return to_scale(np.asarray(y, dtype=float)) - to_scale(np.asarray(predicted, dtype=float))

    def shift(self, predicted: np.ndarray, offset: np.ndarray) -> np.ndarray:
        """A prediction moved by an offset on the target's scale (the inverse of ``residual``)."""
        return self.kind.from_scale(self.kind.to_scale(np.asarray(predicted, dtype=float)) + offset)

    def interval(self, predicted: np.ndarray, q: float | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Bounds a score quantile ``q`` (one, or one per estimate) away from the estimates, on the
        target's scale."""
        z = self.kind.to_scale(np.asarray(predicted, dtype=float))
        with np.errstate(over="ignore"):
            return self.kind.from_scale(z - q), self.kind.from_scale(z + q)

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
        """Relative where the family asks for it and every training row has a usable reference (never
        for an event)."""
        usable = len(reference) > 0 and bool(target.present(reference).all()) and not target.kind.event
        return cls(target, relative and usable)

    def encode(self, y: pd.Series, reference: pd.Series) -> np.ndarray:
        to_scale = self.target.kind.to_scale
        z = to_scale(y.to_numpy(dtype=float))
        return z - to_scale(reference.to_numpy(dtype=float)) if self.relative else z

    def decode(self, z: np.ndarray, reference: pd.Series) -> np.ndarray:
        z = np.asarray(z, dtype=float)
        if self.relative:
            z = z + self.target.kind.to_scale(reference.to_numpy(dtype=float))
        return self.target.kind.from_scale(z)

    def state(self) -> dict:
        return {"target": self.target.state(), "relative": self.relative}

    @classmethod
    def from_state(cls, state: dict) -> Encoding:
        return cls(Target.from_state(state["target"]), state["relative"])


#: How families saved before targets were declared by tasks named their transforms.
_LEGACY: dict[str, tuple[str, bool]] = {
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
