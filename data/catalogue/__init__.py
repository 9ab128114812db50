"""Device catalogue: public spec sheets, resolved from any name a tool prints.

Resolution is general rather than a table of seen names: a name is normalised (case, punctuation,
vendor and marketing words, clock suffixes dropped) and compared with every entry's id, name and
aliases; failing that, memory-size and form-factor words are relaxed. A name that matches nothing,
or more than one device, raises :class:`UnknownDevice` with the closest names.
"""

from __future__ import annotations

import difflib
import json
import re
import tomllib
from functools import cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

from preflight.data.errors import UnknownDevice
from preflight.data.gemm import Dtype
from preflight.data.store import atomic_write_bytes

CATALOGUE_FILE = Path(__file__).with_name("devices.toml")

_NOISE_WORDS = {"nvidia", "nv", "geforce", "tesla", "amd", "radeon", "intel", "ia", "r", "tm", "cpu",
                "processor", "graphics", "gpu", "apple", "qualcomm", "the"}
_RELAXED_WORDS = re.compile(r"^(\d+gb|sxm\d*|pcie|hbm\d*e?|nvl|oam|smx)$")
#: Where a device lacks a native peak for a dtype, the dtype whose units do the work instead.
_PEAK_FALLBACK = {Dtype.tf32: Dtype.fp32, Dtype.bf16: Dtype.fp16, Dtype.fp16: Dtype.fp32,
                  Dtype.fp8: Dtype.fp16, Dtype.int8: Dtype.fp32, Dtype.fp64: Dtype.fp32}


class DeviceSpec(BaseModel):
    """One device's spec sheet."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, pattern=r"^[a-z0-9][a-z0-9._-]*$")
    name: str = Field(min_length=1)
    vendor: str = "unknown"
    kind: str = Field(pattern="^(gpu|cpu|soc|accelerator)$")
    architecture: str | None = None
    year: int | None = None
    aliases: list[str] = Field(default_factory=list)
    compute_units: int | None = Field(None, gt=0)
    boost_clock_mhz: float | None = Field(None, gt=0)
    memory_gb: float | None = Field(None, gt=0)
    memory_bandwidth_gbs: float = Field(gt=0)
    llc_mb: float | None = Field(None, ge=0)
    tdp_w: float | None = Field(None, gt=0)
    launch_price_usd: float | None = Field(None, gt=0)
    peak_tflops: dict[Dtype, float] = Field(description="dense peak per dtype; fp32 required")

    @field_validator("peak_tflops")
    @classmethod
    def _fp32_present(cls, peaks: dict[Dtype, float]) -> dict[Dtype, float]:
        if Dtype.fp32 not in peaks or any(v <= 0 for v in peaks.values()):
            raise ValueError("peak_tflops needs a positive fp32 entry, and every peak must be positive")
        return peaks

    def peak(self, dtype: Dtype) -> tuple[float, bool]:
        """Peak TFLOP/s for a dtype and whether it came from a fallback dtype."""
        want, fallback = Dtype(dtype), False
        while want not in self.peak_tflops:
            want, fallback = _PEAK_FALLBACK[want], True
        scale = 1 / 32 if dtype == Dtype.fp64 and fallback else 1.0  # fp64 emulated: ~1/32 rate
        return self.peak_tflops[want] * scale, fallback


def normalise(name: str) -> list[str]:
    """Words of a device name with vendor/marketing noise, clock suffixes and core counts removed."""
    text = re.sub(r"@.*$", "", name.lower())
    text = re.sub(r"\(r\)|\(tm\)|\d+-core", " ", text)
    return [w for w in re.findall(r"[a-z0-9]+", text) if w not in _NOISE_WORDS]


def _key(name: str, relaxed: bool = False) -> str:
    words = normalise(name)
    return "".join(w for w in words if not (relaxed and _RELAXED_WORDS.match(w)))


class Catalogue:
    """The shipped spec sheets plus devices users registered under ``PREFLIGHT_HOME``."""

    def __init__(self, devices: list[DeviceSpec], user_file: Path | None = None) -> None:
        self.user_file = user_file
        self._devices: dict[str, DeviceSpec] = {}
        for spec in devices:
            self._add(spec)

    @classmethod
    def load(cls, user_file: Path | None = None) -> "Catalogue":
        catalogue = cls(list(_shipped()), user_file)
        if user_file is not None and user_file.exists():
            for raw in json.loads(user_file.read_text()):
                catalogue._add(DeviceSpec.model_validate(raw))
        return catalogue

    def _add(self, spec: DeviceSpec) -> None:
        self._devices[spec.id] = spec
        self._index = None  # rebuilt lazily

    def __iter__(self):
        return iter(self._devices.values())

    def __len__(self) -> int:
        return len(self._devices)

    def _indexes(self) -> tuple[dict[str, str], dict[str, set[str]], dict[str, set[str]]]:
        if self._index is None:
            exact: dict[str, str] = {}
            norm: dict[str, set[str]] = {}
            relaxed: dict[str, set[str]] = {}
            for spec in self._devices.values():
                for name in (spec.id, spec.name, *spec.aliases):
                    exact[name.lower()] = spec.id
                    norm.setdefault(_key(name), set()).add(spec.id)
                    relaxed.setdefault(_key(name, relaxed=True), set()).add(spec.id)
            self._index = (exact, norm, relaxed)
        return self._index

    def resolve(self, name: str) -> DeviceSpec:
        """The one device a name means, or UnknownDevice with close matches."""
        exact, norm, relaxed = self._indexes()
        if name.lower() in exact:
            return self._devices[exact[name.lower()]]
        for index, key in ((norm, _key(name)), (relaxed, _key(name, relaxed=True))):
            ids = index.get(key, set())
            if len(ids) == 1:
                return self._devices[next(iter(ids))]
            if len(ids) > 1:
                raise UnknownDevice(name, sorted(self._devices[i].name for i in ids))
        raise UnknownDevice(name, self.close_matches(name))

    def close_matches(self, name: str, n: int = 5) -> list[str]:
        exact, _, _ = self._indexes()
        keys = {_key(alias): spec_id for alias, spec_id in exact.items()}
        hits = difflib.get_close_matches(_key(name), list(keys), n=3 * n, cutoff=0.5)
        names = dict.fromkeys(self._devices[keys[h]].name for h in hits)
        return list(names)[:n]

    @staticmethod
    def shipped() -> tuple[DeviceSpec, ...]:
        """The spec sheets that ship with preflight."""
        return _shipped()

    def register(self, spec: DeviceSpec) -> DeviceSpec:
        """Add a user's device and persist it beside the other registered ones."""
        self._add(spec)
        if self.user_file is not None:
            shipped = {s.id for s in _shipped()}
            users = [s.model_dump(mode="json", exclude_none=True) for s in self if s.id not in shipped]
            atomic_write_bytes(self.user_file, json.dumps(users, indent=2).encode())
        return spec


@cache
def _shipped() -> tuple[DeviceSpec, ...]:
    raw = tomllib.loads(CATALOGUE_FILE.read_text())
    return tuple(DeviceSpec.model_validate(entry) for entry in raw["device"])
