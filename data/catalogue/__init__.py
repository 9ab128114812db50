"""Device catalogue: public spec sheets, resolved from any name a tool prints.

Resolution is general rather than a table of seen names: a name is normalised (case, punctuation,
vendor and marketing words, clock suffixes dropped) and compared with every entry's id, name and
aliases; failing that, memory-size and form-factor words are relaxed. A name that matches nothing
raises :class:`UnknownDevice` with the closest names, one that matches several :class:`AmbiguousDevice`.
:meth:`Catalogue.resolve` reads a data set's shorthand (``NV_P100``, ``H100``) as the variant the
catalogue gives it; :meth:`Catalogue.lookup`, for a name a person types, lists every variant such a
name fits instead of choosing one.

Names are compared as they look, not as they are spelled: NFKC (fullwidth ``Ｈ１００``, superscript
``H¹⁰⁰``), case folding, accents dropped (``NVİDİA``), and Unicode's confusables (Cyrillic ``Н100``,
Greek ``Η``, and the digit/letter swaps ``H1OO``) folded by :func:`look_alike_key`, so no registered
name can pass for another device's.
"""

from __future__ import annotations

import difflib
import json
import re
import string
import threading
import tomllib
import unicodedata
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Annotated, Literal

from preflight.data.errors import AmbiguousDevice, DataError, DeviceConflict, UnknownDevice
from preflight.data.gemm import Dtype
from preflight.data.names import DeviceName
from preflight.data.store import atomic_write_bytes, read_json_state, set_aside_damaged
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator

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
#: Where a device lacks a native peak for a dtype, the dtype whose units do the work instead: bf16
#: without bf16 units is widened to fp32 and multiplied there (a V100's fp16 tensor cores cannot take it).
_PEAK_FALLBACK = {
    Dtype.tf32: Dtype.fp32,
    Dtype.bf16: Dtype.fp32,
    Dtype.fp16: Dtype.fp32,
    Dtype.fp8: Dtype.fp16,
    Dtype.int8: Dtype.fp32,
    Dtype.fp64: Dtype.fp32,
}


@dataclass(frozen=True)
class Kind:
    """What the layers above read of a kind of device."""

    #: its code among the featurizers' inputs (``features/device.py``; fixed: trained models read them);
    #: ``None`` for a kind with no spec sheet to speak of (a device known only by measurements)
    code: int | None
    #: the physics prior its power follows (``models/tools/power.py``); ``None``: its power is not estimated
    power_prior: Literal["gpu", "cpu"] | None = None
    #: a host's CPU model name may resolve to a catalogue entry of this kind (``host.py``)
    host_cpu: bool = False
    #: a what-if compares the catalogue's devices of this kind when none are named
    whatif_candidate: bool = False


#: Kinds of device: processors that run kernels, boards synthesised into, and hosts that share a machine.
#: The one place a kind is named: spec sheets, featurizers, the power law and the host read it here.
KINDS: dict[str, Kind] = {
    "gpu": Kind(code=0, power_prior="gpu", whatif_candidate=True),
    "cpu": Kind(code=2, power_prior="cpu", host_cpu=True),
    "soc": Kind(code=3, host_cpu=True),
    "accelerator": Kind(code=1, power_prior="gpu", whatif_candidate=True),  # power-capped boards, as GPUs
    "fpga": Kind(code=4),
    "vm-host": Kind(code=5),
    "unknown": Kind(code=None),
}


#: Bounds of a spec sheet, wide enough for any real device from a microcontroller to a rack-scale
#: system; values outside them are typos, unit slips or hostile input. Every float must be finite.
Tflops = Annotated[float, Field(ge=1e-4, le=1e5, description="TFLOP/s (int8: TOP/s), in [1e-4, 1e5]")]
ResourceCount = Annotated[float, Field(ge=0, le=1e12, description="a count, in [0, 1e12]")]
ShortText = Annotated[str, Field(min_length=1, max_length=64)]
MAX_ENTRIES = 16  # aliases, peaks or resources of one device


class DeviceSpec(BaseModel):
    """One device's spec sheet. Every field past the kind is optional: a GPU has peaks and a memory
    bandwidth, an FPGA ``resources`` (``lut``, ``ff``, ``dsp``, ``bram``), a VM host cores and LLC,
    and a device ``known_by_measurements`` (kind ``unknown``) nothing but its name. Values are finite
    and bounded (see the fields' bounds)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    id: str = Field(min_length=1, max_length=64, pattern=r"^[a-z0-9][a-z0-9._-]*$")
    name: DeviceName
    vendor: ShortText = "unknown"
    kind: str = Field(pattern="^(" + "|".join(KINDS) + ")$")
    architecture: ShortText | None = None
    year: int | None = Field(None, ge=1950, le=2100)
    aliases: list[DeviceName] = Field(default_factory=list, max_length=MAX_ENTRIES)
    compute_units: int | None = Field(None, ge=1, le=10**7)
    boost_clock_mhz: float | None = Field(None, ge=1, le=1e5)
    memory_gb: float | None = Field(None, ge=1e-6, le=1e5, description="GB, in [1e-6 (1 kB), 1e5]")
    memory_bandwidth_gbs: float | None = Field(None, ge=0.01, le=1e6)
    llc_mb: float | None = Field(None, ge=1e-3, le=1e5, description="MB, in [1e-3 (1 kB), 1e5]")
    tdp_w: float | None = Field(None, ge=0.01, le=1e5)
    launch_price_usd: float | None = Field(None, ge=0.01, le=1e8)
    peak_tflops: dict[Dtype, Tflops] = Field(
        default_factory=dict,
        max_length=MAX_ENTRIES,
        description="dense peak per dtype; with any peak, fp32 is required",
    )
    gemm_peak_tflops: dict[Dtype, Tflops] = Field(
        default_factory=dict,
        max_length=MAX_ENTRIES,
        description="dense GEMM peak where GEMMs run on other units (CDNA fp32: matrix cores)",
    )
    dies: int | None = Field(
        None,
        ge=1,
        le=64,
        description="compute dies on the board whose peaks and bandwidth the sheet sums (MI250: 2); "
        "one GEMM runs on one die",
    )
    resources: dict[ShortText, ResourceCount] = Field(
        default_factory=dict,
        max_length=MAX_ENTRIES,
        description="countable resources, e.g. lut, ff, dsp, bram (FPGA), cores, llc_mb",
    )

    @field_validator("peak_tflops")
    @classmethod
    def _fp32_present(cls, peaks: dict[Dtype, float]) -> dict[Dtype, float]:
        if peaks and Dtype.fp32 not in peaks:
            raise ValueError("peak_tflops needs an fp32 entry")
        return peaks

    @field_validator(
        "year", "compute_units", "boost_clock_mhz", "memory_gb", "memory_bandwidth_gbs", "llc_mb", "tdp_w",
        "launch_price_usd", "dies", mode="before",
    )  # fmt: skip
    @classmethod
    def _not_a_bool(cls, value: object) -> object:
        """``false`` is not a number (JSON booleans would otherwise read as 0 and 1)."""
        if isinstance(value, bool):
            raise ValueError("a number is needed, not a boolean")
        return value

    @field_validator("peak_tflops", "gemm_peak_tflops", "resources", mode="before")
    @classmethod
    def _no_bool_values(cls, values: object) -> object:
        if isinstance(values, dict) and any(isinstance(v, bool) for v in values.values()):
            raise ValueError("each value is a number, not a boolean")
        return values

    @classmethod
    def known_by_measurements(cls, name: str) -> DeviceSpec:
        """A device with no spec sheet: a name, to be learned from its measurements alone."""
        slug = re.sub(r"[^a-z0-9._-]+", "-", name.lower()).strip("-._")[:64].rstrip("-._") or "device"
        return cls(id=slug, name=name, kind="unknown")

    def peak(self, dtype: Dtype) -> tuple[float, bool]:
        """Peak TFLOP/s for a dtype and whether it came from a fallback dtype."""
        if not self.peak_tflops:
            raise DataError(f"device {self.id!r} has no peak_tflops on its spec sheet: register them first")
        want, fallback = Dtype(dtype), False
        while want not in self.peak_tflops:
            want, fallback = _PEAK_FALLBACK[want], True
        return self.peak_tflops[want] * _share_of_peak(dtype, want), fallback

    def working_dtype(self, dtype: Dtype) -> Dtype:
        """The dtype whose units run a GEMM in ``dtype``: its own where the sheet gives its peak, else the
        first of its fallbacks that the sheet gives (fp8 on an A10: its fp16 tensor cores)."""
        want = Dtype(dtype)
        while want not in self.gemm_peak_tflops and want not in self.peak_tflops and want in _PEAK_FALLBACK:
            want = _PEAK_FALLBACK[want]
        return want

    def gemm_peak(self, dtype: Dtype) -> tuple[float, bool]:
        """Peak TFLOP/s of one dense GEMM in a dtype (``gemm_peak_tflops`` where given; one die's share
        on a multi-die board), and whether it came from a fallback dtype, whose GEMM rate it then is (fp8
        on a Pascal GeForce runs as its fp16 GEMMs do, at the fp32 rate, not at fp16's native 1/64)."""
        want = self.working_dtype(dtype)
        if want not in self.gemm_peak_tflops:
            peak, fallback = self.peak(dtype)
        else:
            peak, fallback = self.gemm_peak_tflops[want] * _share_of_peak(dtype, want), want != Dtype(dtype)
        return peak / (self.dies or 1), fallback


def _share_of_peak(dtype: Dtype, working: Dtype) -> float:
    """The share of the ``working`` dtype's peak a GEMM in ``dtype`` reaches: fp64 emulated on other
    units about 1/32, any other dtype all of it."""
    return 1 / 32 if Dtype(dtype) == Dtype.fp64 and Dtype(working) != Dtype.fp64 else 1.0


@cache
def _look_alikes() -> tuple[dict[str, str], dict[str, str]]:
    """Two maps over the characters of Unicode's confusables data (``confusable_homoglyphs``, grouped
    into classes of look-alikes): to an ASCII letter of the character's class, letters first (Cyrillic
    ``О`` to ``O``), for reading; and to the class's least ASCII member, digits first (``O``, ``o`` to
    ``0``; ``I``, ``i``, ``l`` to ``1``), for comparing. The digit/letter swaps are the data's own (it
    pairs ``0`` with ``O``, ``1`` and ``I`` with ``l``): no character is listed here. The one rule added
    joins each ASCII letter with its lower case, so that comparing ignores case (``I`` looks like ``l``,
    so ``i`` must too); other scripts' case pairs are left out (through them the classes would merge
    distinct Latin letters)."""
    from confusable_homoglyphs.confusables import confusables_data

    pairs = [
        (char, glyph["c"])
        for char, glyphs in confusables_data.items()
        for glyph in glyphs
        if len(char) == 1 == len(glyph["c"])  # a glyph of several characters (``rn`` for ``m``) is left out
    ]
    classes = _classes([*pairs, *zip(string.ascii_uppercase, string.ascii_lowercase, strict=True)])
    readable, compared = {}, {}
    for char, members in classes.items():
        ascii_members = sorted(
            (c for c in members if c.isascii()), key=lambda c: (c.isalpha(), c.isupper(), c)
        )
        letters = [c for c in ascii_members if c.isalpha()]
        if not char.isascii() and ascii_members:
            readable[char] = (letters or ascii_members)[0]
        compared[char] = (ascii_members or sorted(members))[0]
    return readable, compared


def _classes(pairs: list[tuple[str, str]]) -> dict[str, set[str]]:
    """Each character of ``pairs`` with the class it is joined to through them (one shared set)."""
    owner: dict[str, set[str]] = {}
    for a, b in pairs:
        first, second = owner.setdefault(a, {a}), owner.setdefault(b, {b})
        if first is second:
            continue
        if len(first) < len(second):
            first, second = second, first
        first |= second
        owner.update(dict.fromkeys(second, first))
    return owner


def _plain(name: str) -> str:
    """A name as read: NFKC, look-alikes of ASCII letters as those letters, case folded, accents and
    other combining marks dropped (``Ｈ１００``, ``Н100`` and ``H¹⁰⁰`` are all ``h100``)."""
    readable, _ = _look_alikes()
    text = "".join(readable.get(c, c) for c in unicodedata.normalize("NFKC", name))
    text = unicodedata.normalize("NFD", text.casefold())
    return "".join(readable.get(c, c) for c in text if not unicodedata.combining(c))


def _fold(text: str) -> str:
    """Each character of a plain text as the least ASCII member of its class of look-alikes."""
    _, compared = _look_alikes()
    return "".join(compared.get(c, c) for c in text)


def look_alike_key(name: str) -> str:
    """What a name looks like: equal for ``H100``, ``h100``, ``Н100`` (Cyrillic), ``Ｈ１００``, ``H¹⁰⁰``
    and ``H1OO``. Names are compared by it, never as spelled."""
    return _fold(_plain(name))


def normalise(name: str) -> list[str]:
    """Words of a device name (as read: see :func:`_plain`) with vendor/marketing noise, clock suffixes
    and core counts removed."""
    text = re.sub(r"@.*$", "", _plain(name))
    text = re.sub(r"\(r\)|\(tm\)|\b\d+-core", " ", text)  # \b: linear in a run of digits
    return [w for w in re.findall(r"[a-z0-9]+", text) if w not in _NOISE_WORDS]


def _key(name: str, relaxed: bool = False) -> str:
    words = normalise(name)
    return _fold("".join(w for w in words if not (relaxed and _RELAXED_WORDS.match(w))))


def _variant_words(name: str) -> frozenset[str]:
    """The memory-size and form-factor words of a name (``sxm4``, ``40gb``), folded."""
    return frozenset(_fold(w) for w in normalise(name) if _RELAXED_WORDS.match(w))


class Catalogue:
    """The shipped spec sheets and this host's CPU (``host.py``), plus devices users registered under
    ``PREFLIGHT_HOME``.

    Readers take one immutable snapshot (devices and name indexes together); ``register`` and
    ``unregister`` build a new snapshot and swap it in, so concurrent requests never see half an update.
    """

    def __init__(self, devices: list[DeviceSpec], user_file: Path | None = None) -> None:
        self.user_file = user_file
        self._lock = threading.Lock()
        self._snapshot = _Snapshot.of({spec.id: spec for spec in devices})

    @classmethod
    def load(cls, user_file: Path | None = None) -> Catalogue:
        """The shipped spec sheets and this host's CPU, plus the devices registered in ``user_file``. A
        damaged file (not JSON, not a list of valid spec sheets, or one claiming a shipped name) is set
        aside with a warning."""
        users = _user_devices(user_file) if user_file is not None else []
        return cls([*_builtin(), *users], user_file)

    def __iter__(self):
        return iter(self._snapshot.devices.values())

    def __len__(self) -> int:
        return len(self._snapshot.devices)

    def resolve(self, name: str) -> DeviceSpec:
        """The one device a name means, or UnknownDevice with close matches."""
        snapshot, key = self._snapshot, look_alike_key(name)
        if key in snapshot.exact:
            return snapshot.devices[snapshot.exact[key]]
        for index, key in ((snapshot.norm, _key(name)), (snapshot.relaxed, _key(name, relaxed=True))):
            ids = index.get(key, set()) if key else set()  # all punctuation: nothing to match on
            if len(ids) == 1:
                return snapshot.devices[next(iter(ids))]
            if len(ids) > 1:
                raise AmbiguousDevice(name, snapshot.names(ids))
        raise UnknownDevice(name, self.close_matches(name))

    def lookup(self, name: str) -> DeviceSpec:
        """The one device a name typed by a person means: as :meth:`resolve`, except that a name several
        devices fit (``h100``: the SXM5 and the PCIe card; ``a100 pcie``: 40 and 80 GB) raises
        AmbiguousDevice listing them, even where the catalogue reads it as one variant for the data sets
        that write it so. An id, a device's name, or an alias no other device fits resolves directly."""
        several = self.fits_several(name)
        if several:
            raise AmbiguousDevice(name, several)
        return self.resolve(name)

    def fits_several(self, name: str) -> list[str]:
        """The names of the devices a name fits when it fits several and is no device's id or name
        (``h100``: the SXM5 and the PCIe card, which :meth:`resolve` reads as the SXM5); else none."""
        snapshot = self._snapshot
        fitting = snapshot.fitting(name)
        if len(fitting) > 1 and look_alike_key(name) not in snapshot.primary:
            return snapshot.names(fitting)
        return []

    def get(self, device_id: str) -> DeviceSpec | None:
        """The device of this id, if there is one."""
        return self._snapshot.devices.get(device_id)

    def named(self, name: str) -> DeviceSpec:
        """The device whose id, name or alias is ``name`` as it looks (any case, look-alike characters
        folded): no looser matching, for changes such as a deletion."""
        found = self._snapshot.exact.get(look_alike_key(name))
        if found is None:
            raise UnknownDevice(name, self.close_matches(name))
        return self._snapshot.devices[found]

    def close_matches(self, name: str, n: int = 5) -> list[str]:
        snapshot = self._snapshot
        keys = {_key(alias): spec.id for spec in snapshot.devices.values() for alias in _names(spec)}
        hits = difflib.get_close_matches(_key(name), list(keys), n=3 * n, cutoff=0.5)
        names = dict.fromkeys(snapshot.devices[keys[h]].name for h in hits)
        return list(names)[:n]

    @staticmethod
    def shipped() -> tuple[DeviceSpec, ...]:
        """The spec sheets that ship with preflight, with this host's CPU among them: what no user
        registered."""
        return _builtin()

    def register(self, spec: DeviceSpec, persist: bool = True) -> DeviceSpec:
        """Add (or update) a user's device and persist it (unless told not to: a device an evaluation
        met in its files, or a change the caller writes with others); a name that looks like one of a
        catalogue entry, this host or another device is refused."""
        with self._lock:
            _refuse_catalogue_names(spec)
            self._refuse_taken_names(spec)
            self._swap(self._snapshot.devices | {spec.id: spec}, persist)
        return spec

    def _refuse_taken_names(self, spec: DeviceSpec) -> None:
        """DeviceConflict when the spec's id, name or an alias looks like a name of another device."""
        for name in _names(spec):
            owner = self._snapshot.exact.get(look_alike_key(name))
            if owner is not None and owner != spec.id:
                taken = self._snapshot.devices[owner]
                raise DeviceConflict(
                    f"{name!r} looks like a name of device {taken.id!r} ({taken.name}); choose another name"
                )

    def unregister(self, device_id: str, persist: bool = True) -> DeviceSpec:
        """Remove a user's device (by id) and persist (unless told not to); a catalogue entry cannot be
        deleted."""
        with self._lock:
            if device_id in _builtin_ids():
                raise DeviceConflict(f"device {device_id!r}: a catalogue entry cannot be deleted")
            devices = dict(self._snapshot.devices)
            if device_id not in devices:
                raise UnknownDevice(device_id, self.close_matches(device_id))
            spec = devices.pop(device_id)
            self._swap(devices, persist)
        return spec

    def user_file_contents(self) -> bytes:
        """What ``user_file`` holds for the devices as they are now: the ones users registered."""
        builtin = _builtin_ids()
        users = [s.model_dump(mode="json", exclude_none=True) for s in self if s.id not in builtin]
        return json.dumps(users, indent=2).encode()

    def _swap(self, devices: dict[str, DeviceSpec], persist: bool) -> None:
        """Swap in a snapshot of ``devices`` and (if asked) write the user's devices to its file."""
        self._snapshot = _Snapshot.of(devices)
        if persist and self.user_file is not None:
            atomic_write_bytes(self.user_file, self.user_file_contents())


@dataclass(frozen=True)
class _Snapshot:
    devices: dict[str, DeviceSpec]
    exact: dict[str, str]  # look-alike key of an id/name/alias -> id
    norm: dict[str, set[str]]  # normalised key -> ids
    relaxed: dict[str, set[str]]  # normalised key without memory size / form factor -> ids
    primary: set[str]  # look-alike keys of ids and names (never ambiguous)
    variants: dict[str, frozenset[str]]  # id -> memory-size and form-factor words of its names

    @classmethod
    def of(cls, devices: dict[str, DeviceSpec]) -> _Snapshot:
        exact: dict[str, str] = {}
        norm: dict[str, set[str]] = {}
        relaxed: dict[str, set[str]] = {}
        for spec in devices.values():
            for name in _names(spec):
                exact[look_alike_key(name)] = spec.id
                norm.setdefault(_key(name), set()).add(spec.id)
                relaxed.setdefault(_key(name, relaxed=True), set()).add(spec.id)
        primary = {look_alike_key(n) for spec in devices.values() for n in (spec.id, spec.name)}
        variants = {
            spec.id: frozenset().union(*(_variant_words(n) for n in _names(spec)))
            for spec in devices.values()
        }
        return cls(devices, exact, norm, relaxed, primary, variants)

    def fitting(self, name: str) -> set[str]:
        """The ids of the devices a name fits: same model once memory size and form factor are left out,
        and each such word of the name among the device's (``a100 sxm4`` fits both SXM4 A100s)."""
        family = _key(name, relaxed=True)
        words = _variant_words(name)
        return {i for i in self.relaxed.get(family, set()) if family and words <= self.variants[i]}

    def names(self, ids: set[str]) -> list[str]:
        return sorted(self.devices[i].name for i in ids)


@cache
def _shipped() -> tuple[DeviceSpec, ...]:
    raw = tomllib.loads(CATALOGUE_FILE.read_text())
    return tuple(DeviceSpec.model_validate(entry) for entry in raw["device"])


@cache
def _builtin() -> tuple[DeviceSpec, ...]:
    """The shipped spec sheets with this host's CPU among them."""
    from preflight.data.catalogue.host import with_host

    return with_host(_shipped())


def _builtin_ids() -> set[str]:
    return {spec.id for spec in _builtin()}


def _names(spec: DeviceSpec) -> tuple[str, ...]:
    """Every name a device goes by: its id, name and aliases."""
    return (spec.id, spec.name, *spec.aliases)


@cache
def _catalogue_index() -> _Snapshot:
    """The shipped entries and this host's CPU, indexed: the names no user device may claim."""
    return _Snapshot.of({spec.id: spec for spec in _builtin()})


def _refuse_catalogue_names(spec: DeviceSpec) -> None:
    """DeviceConflict when the spec's id, name or an alias looks like a name of a catalogue entry or of
    this host (see :func:`look_alike_key`), or normalises (strictly or relaxed) to one: a user's device
    must never shadow them."""
    index = _catalogue_index()
    for name in _names(spec):
        key = look_alike_key(name)
        exact = {index.exact[key]} if key in index.exact else set()
        strict, relaxed = _key(name), _key(name, relaxed=True)  # empty: nothing to compare
        owners = exact or strict and index.norm.get(strict) or relaxed and index.relaxed.get(relaxed)
        if owners:
            names = " / ".join(sorted(index.devices[i].name for i in owners))
            raise DeviceConflict(f"{name!r} is taken by the catalogue: it names {names}; choose another name")


def _user_devices(user_file: Path) -> list[DeviceSpec]:
    """The devices registered in ``user_file``; none when it is missing or damaged (then set aside)."""
    try:
        users = _USER_DEVICES.validate_python(read_json_state(user_file, []))
        for spec in users:
            _refuse_catalogue_names(spec)
    except ValidationError as exc:
        set_aside_damaged(user_file, f"not a list of valid device specs: {_first_error(exc)}")
        return []
    except DeviceConflict as exc:
        set_aside_damaged(user_file, f"claims a catalogue name: {exc}")
        return []
    return users


def _first_error(exc: ValidationError) -> str:
    """A validation error in one line: how many problems, and where and what the first is."""
    first = exc.errors()[0]
    where = ".".join(map(str, first["loc"]))[:80] or "top level"  # keys come from the file: cut, quote
    return f"{exc.error_count()} error(s), first at {where!r}: {first['msg']}"


_USER_DEVICES = TypeAdapter(list[DeviceSpec])
