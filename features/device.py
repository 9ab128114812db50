"""Spec-sheet facts of a device, shared by every featurizer that predicts for (something, device)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from preflight.data.catalogue import KINDS, Catalogue, DeviceSpec

#: Codes of vendors (fixed: trained models read them): each brings its own kernel library (cuBLAS, rocBLAS).
VENDORS = {"nvidia": 0, "amd": 1, "intel": 2, "apple": 3, "qualcomm": 4, "google": 5, "arm": 6, "xilinx": 7}
SPEC_FIELDS = ("memory_bandwidth_gbs", "compute_units", "boost_clock_mhz", "tdp_w", "llc_mb", "year")


def resolve(devices: np.ndarray, catalogue: Catalogue) -> list[DeviceSpec]:
    """Resolve each distinct device name once; raises UnknownDevice for a name it cannot resolve."""
    resolved = {name: catalogue.resolve(str(name)) for name in dict.fromkeys(devices)}
    return [resolved[name] for name in devices]


def spec_columns(specs: Sequence[DeviceSpec | None]) -> dict[str, np.ndarray]:
    """One array per spec field (NaN where a sheet lacks the field or there is no device)."""

    def value(spec: DeviceSpec | None, field: str) -> float:
        v = None if spec is None else getattr(spec, field)
        return np.nan if v is None else float(v)

    return {field: np.array([value(s, field) for s in specs]) for field in SPEC_FIELDS}


def kind_codes(specs: Sequence[DeviceSpec | None]) -> np.ndarray:
    """Each device's kind code (``KINDS``); NaN where there is no device or its kind has no code (known
    only by measurements). A kind ``KINDS`` does not define is a ``KeyError``, never a silent NaN."""

    def code(spec: DeviceSpec | None) -> float:
        kind_code = None if spec is None else KINDS[spec.kind].code
        return np.nan if kind_code is None else kind_code

    return np.array([code(s) for s in specs])


def vendor_codes(specs: Sequence[DeviceSpec | None]) -> np.ndarray:
    return np.array([np.nan if s is None else VENDORS.get(s.vendor, np.nan) for s in specs])
