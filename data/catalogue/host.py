"""This machine's CPU in the catalogue, also named ``cpu``, ``host`` and by the model name lscpu prints.

Where the catalogue ships the CPU's model, that spec sheet takes the two names. Otherwise a sheet is
derived from what the host reports (``collect/host.py``): its id starts ``host-`` and its name ends
``(this host)``. Cores, clock, last-level cache and memory are as read; the fp32/fp64/bf16 peaks are an
estimate from the ISA flags at the highest clock; the memory bandwidth is measured once per machine as
the GEMM collector measures it (``copy_bandwidth_gbs``: a copy on torch's threads, about a second with
torch's import) and kept in the home's cache.
"""

from __future__ import annotations

import json
import logging

from preflight.data.catalogue import KINDS, MAX_ENTRIES, Catalogue, DeviceSpec
from preflight.data.collect.host import HostFacts, copy_bandwidth_gbs, host_facts, peak_tflops, slug
from preflight.data.errors import UnknownDevice
from preflight.data.settings import Settings
from preflight.data.store import atomic_write_bytes

log = logging.getLogger("preflight.catalogue")

HOST_NAMES = ("cpu", "host")


def with_host(shipped: tuple[DeviceSpec, ...]) -> tuple[DeviceSpec, ...]:
    """The shipped sheets with this host's CPU among them; unchanged where the host's facts cannot make
    a valid sheet (logged)."""
    facts = host_facts()
    own = _shipped_model(shipped, facts.cpu_name)
    if own is not None:
        named = own.model_copy(update={"aliases": _names(own.aliases)})
        return tuple(named if spec.id == own.id else spec for spec in shipped)
    try:
        return (*shipped, _derived_spec(facts))
    except ValueError as exc:  # facts out of a spec sheet's bounds (pydantic's ValidationError)
        log.warning("this host's CPU (%s) is left out of the catalogue: %s", facts.cpu_name, exc)
        return shipped


def _derived_spec(facts: HostFacts) -> DeviceSpec:
    """A spec sheet from the host's facts alone."""
    cores = facts.physical_cores or facts.logical_cores
    peaks = peak_tflops(facts.flags, facts.clock_mhz * 1e6 * cores) if facts.clock_mhz else {}
    return DeviceSpec(
        id=f"host-{slug(facts.cpu_name)}"[:64].rstrip("-."),
        name=f"{facts.cpu_name[:100]} (this host)",
        vendor=facts.vendor[:64] or "unknown",
        kind="cpu",
        aliases=_names([facts.cpu_name[:128]]),
        compute_units=cores,
        boost_clock_mhz=facts.clock_mhz,
        memory_gb=facts.memory_gb,
        llc_mb=facts.llc_mb,
        memory_bandwidth_gbs=memory_bandwidth_gbs(facts),
        peak_tflops=peaks,
    )


def memory_bandwidth_gbs(facts: HostFacts) -> float:
    """This host's copy bandwidth (bytes read plus written per second, GB/s), measured on first use and
    cached by CPU name in ``PREFLIGHT_HOME/cache/host-bandwidth.json``."""
    cache = Settings().cache_dir / "host-bandwidth.json"
    try:
        known = json.loads(cache.read_text())
    except (OSError, ValueError):
        known = {}
    if isinstance(known, dict) and isinstance(known.get(facts.cpu_name), float):
        return known[facts.cpu_name]
    measured = round(copy_bandwidth_gbs(facts.llc_mb), 1)
    known = (known if isinstance(known, dict) else {}) | {facts.cpu_name: measured}
    try:  # atomically: another process may read it meanwhile
        atomic_write_bytes(cache, json.dumps(known).encode())
    except OSError as exc:
        log.warning("the host's memory bandwidth could not be cached: %s", exc)
    return measured


def _shipped_model(shipped: tuple[DeviceSpec, ...], cpu_name: str) -> DeviceSpec | None:
    """The shipped sheet of the CPU model named, if one resolves (a CPU or SoC)."""
    try:
        spec = Catalogue(list(shipped)).resolve(cpu_name)
    except UnknownDevice:
        return None
    return spec if KINDS[spec.kind].host_cpu else None


def _names(aliases: list[str]) -> list[str]:
    """``cpu`` and ``host`` before a sheet's aliases, as many as a sheet holds."""
    return list(dict.fromkeys([*HOST_NAMES, *aliases]))[:MAX_ENTRIES]
