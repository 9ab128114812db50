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
import threading
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from preflight.data.errors import DataError, DeviceConflict, UnknownDevice
from preflight.data.gemm import Dtype
from preflight.data.store import atomic_write_bytes
from pydantic import BaseModel, ConfigDict, Field, field_validator

CATALOGUE_FILE = Path(__file__).with_name("devices.toml")

_NOISE_WORDS = {
    "nvidia",
    "nv",
    "geforce",
    "tesla",
    "amd",
    "radeon",
    "intel",
    "ia",
    "r",
    "tm",
    "cpu",
    "processor",
    "graphics",
    "gpu",
    "apple",
    "qualcomm",
    "the",
}
_RELAXED_WORDS = re.compile(r"^(\d+gb|sxm\d*|pcie|hbm\d*e?|nvl|oam|smx)$")
#: Where a device lacks a native peak for a dtype, the dtype whose units do the work instead.
_PEAK_FALLBACK = {
    Dtype.tf32: Dtype.fp32,
    Dtype.bf16: Dtype.fp16,
    Dtype.fp16: Dtype.fp32,
    Dtype.fp8: Dtype.fp16,
    Dtype.int8: Dtype.fp32,
    Dtype.fp64: Dtype.fp32,
}


#: Kinds of device: processors that run kernels, boards synthesised into, and hosts that share a machine.
KINDS = ("gpu", "cpu", "soc", "accelerator", "fpga", "vm-host", "unknown")


class DeviceSpec(BaseModel):
    """One device's spec sheet. Every field past the kind is optional: a GPU has peaks and a memory
    bandwidth, an FPGA ``resources`` (``lut``, ``ff``, ``dsp``, ``bram``), a VM host cores and LLC,
    and a device ``known_by_measurements`` (kind ``unknown``) nothing but its name."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, pattern=r"^[a-z0-9][a-z0-9._-]*$")
    name: str = Field(min_length=1)
    vendor: str = "unknown"
    kind: str = Field(pattern="^(" + "|".join(KINDS) + ")$")
    architecture: str | None = None
    year: int | None = None
    aliases: list[str] = Field(default_factory=list)
    compute_units: int | None = Field(None, gt=0)
    boost_clock_mhz: float | None = Field(None, gt=0)
    memory_gb: float | None = Field(None, gt=0)
    memory_bandwidth_gbs: float | None = Field(None, gt=0)
    llc_mb: float | None = Field(None, ge=0)
    tdp_w: float | None = Field(None, gt=0)
    launch_price_usd: float | None = Field(None, gt=0)
    peak_tflops: dict[Dtype, float] = Field(
        default_factory=dict, description="dense peak per dtype; with any peak, fp32 is required"
    )
    gemm_peak_tflops: dict[Dtype, float] = Field(
        default_factory=dict,
        description="dense GEMM peak where GEMMs run on other units (CDNA fp32: matrix cores)",
    )
    resources: dict[str, float] = Field(
        default_factory=dict, description="countable resources, e.g. lut, ff, dsp, bram (FPGA), cores, llc_mb"
    )

    @field_validator("peak_tflops")
    @classmethod
    def _fp32_present(cls, peaks: dict[Dtype, float]) -> dict[Dtype, float]:
        if peaks and (Dtype.fp32 not in peaks or any(v <= 0 for v in peaks.values())):
            raise ValueError("peak_tflops needs a positive fp32 entry, and every peak must be positive")
        return peaks

    @field_validator("resources")
    @classmethod
    def _counts(cls, resources: dict[str, float]) -> dict[str, float]:
        if any(v < 0 for v in resources.values()):
            raise ValueError("resource counts cannot be negative")
        return resources

    @classmethod
    def known_by_measurements(cls, name: str) -> DeviceSpec:
        """A device with no spec sheet: a name, to be learned from its measurements alone."""
        slug = re.sub(r"[^a-z0-9._-]+", "-", name.lower()).strip("-._") or "device"
        return cls(id=slug, name=name, kind="unknown")

    def peak(self, dtype: Dtype) -> tuple[float, bool]:
        """Peak TFLOP/s for a dtype and whether it came from a fallback dtype."""
        if not self.peak_tflops:
            raise DataError(f"device {self.id!r} has no peak_tflops on its spec sheet: register them first")
        want, fallback = Dtype(dtype), False
        while want not in self.peak_tflops:
            want, fallback = _PEAK_FALLBACK[want], True
        scale = 1 / 32 if dtype == Dtype.fp64 and fallback else 1.0  # fp64 emulated: ~1/32 rate
        return self.peak_tflops[want] * scale, fallback

    def gemm_peak(self, dtype: Dtype) -> tuple[float, bool]:
        """Peak TFLOP/s of a dense GEMM in a dtype (``gemm_peak_tflops`` where given), and whether it
        came from a fallback dtype."""
        if Dtype(dtype) in self.gemm_peak_tflops:
            return self.gemm_peak_tflops[Dtype(dtype)], False
        return self.peak(dtype)


def normalise(name: str) -> list[str]:
    """Words of a device name with vendor/marketing noise, clock suffixes and core counts removed."""
    text = re.sub(r"@.*$", "", name.lower())
    text = re.sub(r"\(r\)|\(tm\)|\d+-core", " ", text)
    return [w for w in re.findall(r"[a-z0-9]+", text) if w not in _NOISE_WORDS]


def _key(name: str, relaxed: bool = False) -> str:
    words = normalise(name)
    return "".join(w for w in words if not (relaxed and _RELAXED_WORDS.match(w)))


class Catalogue:
    """The shipped spec sheets plus devices users registered under ``PREFLIGHT_HOME``.

    Readers take one immutable snapshot (devices and name indexes together); ``register`` builds a
    new snapshot and swaps it in, so concurrent requests never see half an update.
    """

    def __init__(self, devices: list[DeviceSpec], user_file: Path | None = None) -> None:
        self.user_file = user_file
        self._lock = threading.Lock()
        self._snapshot = _Snapshot.of({spec.id: spec for spec in devices})

    @classmethod
    def load(cls, user_file: Path | None = None) -> Catalogue:
        devices = list(_shipped())
        if user_file is not None and user_file.exists():
            devices += [DeviceSpec.model_validate(raw) for raw in json.loads(user_file.read_text())]
        return cls(devices, user_file)

    def __iter__(self):
        return iter(self._snapshot.devices.values())

    def __len__(self) -> int:
        return len(self._snapshot.devices)

    def resolve(self, name: str) -> DeviceSpec:
        """The one device a name means, or UnknownDevice with close matches."""
        snapshot = self._snapshot
        if name.lower() in snapshot.exact:
            return snapshot.devices[snapshot.exact[name.lower()]]
        for index, key in ((snapshot.norm, _key(name)), (snapshot.relaxed, _key(name, relaxed=True))):
            ids = index.get(key, set())
            if len(ids) == 1:
                return snapshot.devices[next(iter(ids))]
            if len(ids) > 1:
                raise UnknownDevice(name, sorted(snapshot.devices[i].name for i in ids))
        raise UnknownDevice(name, self.close_matches(name))

    def close_matches(self, name: str, n: int = 5) -> list[str]:
        snapshot = self._snapshot
        keys = {_key(alias): spec_id for alias, spec_id in snapshot.exact.items()}
        hits = difflib.get_close_matches(_key(name), list(keys), n=3 * n, cutoff=0.5)
        names = dict.fromkeys(snapshot.devices[keys[h]].name for h in hits)
        return list(names)[:n]

    @staticmethod
    def shipped() -> tuple[DeviceSpec, ...]:
        """The spec sheets that ship with preflight."""
        return _shipped()

    def register(self, spec: DeviceSpec, persist: bool = True) -> DeviceSpec:
        """Add (or update) a user's device and persist it (unless told not to: a device an evaluation
        met in its files); names owned by another device are refused."""
        with self._lock:
            snapshot = self._snapshot
            shipped = {s.id for s in _shipped()}
            if spec.id in shipped:
                raise DeviceConflict(f"device id {spec.id!r} is a catalogue entry; choose another id")
            for name in (spec.name, *spec.aliases):
                owner = snapshot.exact.get(name.lower())
                if owner is not None and owner != spec.id:
                    raise DeviceConflict(f"{name!r} already names device {owner!r}")
            self._snapshot = _Snapshot.of(snapshot.devices | {spec.id: spec})
            if persist and self.user_file is not None:
                users = [s.model_dump(mode="json", exclude_none=True) for s in self if s.id not in shipped]
                atomic_write_bytes(self.user_file, json.dumps(users, indent=2).encode())
        return spec


@dataclass(frozen=True)
class _Snapshot:
    devices: dict[str, DeviceSpec]
    exact: dict[str, str]  # lower-cased id/name/alias -> id
    norm: dict[str, set[str]]  # normalised key -> ids
    relaxed: dict[str, set[str]]  # normalised key without memory size / form factor -> ids

    @classmethod
    def of(cls, devices: dict[str, DeviceSpec]) -> _Snapshot:
        exact: dict[str, str] = {}
        norm: dict[str, set[str]] = {}
        relaxed: dict[str, set[str]] = {}
        for spec in devices.values():
            for name in (spec.id, spec.name, *spec.aliases):
                exact[name.lower()] = spec.id
                norm.setdefault(_key(name), set()).add(spec.id)
                relaxed.setdefault(_key(name, relaxed=True), set()).add(spec.id)
        return cls(devices, exact, norm, relaxed)


@cache
def _shipped() -> tuple[DeviceSpec, ...]:
    raw = tomllib.loads(CATALOGUE_FILE.read_text())
    return tuple(DeviceSpec.model_validate(entry) for entry in raw["device"])
