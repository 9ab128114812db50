"""The GEMM item, shared by loaders, CLI and API, and precision strings parsed by meaning."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from preflight.data.names import DeviceName
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt

MAX_DIM = 2**31 - 1


class Dtype(StrEnum):
    fp64 = "fp64"
    fp32 = "fp32"
    tf32 = "tf32"
    fp16 = "fp16"
    bf16 = "bf16"
    fp8 = "fp8"
    int8 = "int8"


BYTES_PER_ELEMENT = {
    Dtype.fp64: 8,
    Dtype.fp32: 4,
    Dtype.tf32: 4,
    Dtype.fp16: 2,
    Dtype.bf16: 2,
    Dtype.fp8: 1,
    Dtype.int8: 1,
}


class KernelConfig(BaseModel):
    """A GEMM kernel's tiling, as tuners (CUTLASS, CLTune) describe it; every field optional."""

    model_config = ConfigDict(extra="forbid")

    block_m: StrictInt | None = Field(None, gt=0, description="rows of C per thread block / work-group")
    block_n: StrictInt | None = Field(None, gt=0, description="columns of C per thread block / work-group")
    block_k: StrictInt | None = Field(None, gt=0, description="depth of the K slice per main-loop step")
    stages: StrictInt | None = Field(None, gt=0, description="software pipeline stages")
    threads_m: StrictInt | None = Field(None, gt=0, description="threads along M in a block (CLTune MDIMC)")
    threads_n: StrictInt | None = Field(None, gt=0, description="threads along N in a block (CLTune NDIMC)")
    local_m: StrictInt | None = Field(
        None, gt=0, description="shared-memory tile shape along M (CLTune MDIMA)"
    )
    local_n: StrictInt | None = Field(
        None, gt=0, description="shared-memory tile shape along N (CLTune NDIMB)"
    )
    unroll_k: StrictInt | None = Field(None, gt=0, description="inner-loop unroll factor (CLTune KWI)")
    vector_m: StrictInt | None = Field(None, gt=0, description="vector width loading A (CLTune VWM)")
    vector_n: StrictInt | None = Field(None, gt=0, description="vector width loading B (CLTune VWN)")
    stride_m: StrictBool | None = Field(None, description="strided off-chip access along M (CLTune STRM)")
    stride_n: StrictBool | None = Field(None, description="strided off-chip access along N (CLTune STRN)")
    cache_a: StrictBool | None = Field(None, description="A staged through shared memory (CLTune SA)")
    cache_b: StrictBool | None = Field(None, description="B staged through shared memory (CLTune SB)")


KERNEL_FIELDS = tuple(KernelConfig.model_fields)


class GemmItem(BaseModel):
    """One GEMM C = op(A) @ op(B) with A m×k, B k×n (``b`` of them, batched), asked about on one device."""

    model_config = ConfigDict(extra="forbid")

    b: StrictInt = Field(
        1, gt=0, le=MAX_DIM, description="batch count: independent GEMMs of this shape (bmm)"
    )
    m: StrictInt = Field(gt=0, le=MAX_DIM)
    n: StrictInt = Field(gt=0, le=MAX_DIM)
    k: StrictInt = Field(gt=0, le=MAX_DIM)
    dtype: Dtype = Field(Dtype.fp32, description="precision of the inputs A and B")
    math_dtype: Dtype | None = Field(None, description="precision of the multiplies; defaults to dtype")
    trans_a: StrictBool = False
    trans_b: StrictBool = False
    device: DeviceName = Field(description="any name the device catalogue resolves")
    kernel: KernelConfig | None = None


@dataclass(frozen=True)
class Precision:
    """A precision by meaning: bits of the inputs, the multiplies and the accumulator."""

    input_bits: int
    mul_bits: int
    acc_bits: int
    is_int: bool
    brain_float: bool = False
    tensor_float: bool = False

    @property
    def dtype(self) -> Dtype:
        """The input dtype."""
        return self._dtype_of(self.input_bits)

    @property
    def math_dtype(self) -> Dtype:
        """The dtype whose peak bounds the multiplies (32-bit integer math runs on fp32-width lanes)."""
        if self.tensor_float:
            return Dtype.tf32
        if self.is_int and self.mul_bits >= 32:
            return Dtype.fp32
        return self._dtype_of(self.mul_bits)

    def _dtype_of(self, bits: int) -> Dtype:
        if self.is_int:
            if bits == 8:
                return Dtype.int8
            raise ValueError(f"no dtype for {bits}-bit integer inputs")
        by_bits = {
            8: Dtype.fp8,
            16: Dtype.bf16 if self.brain_float else Dtype.fp16,
            32: Dtype.fp32,
            64: Dtype.fp64,
        }
        if bits not in by_bits:
            raise ValueError(f"no dtype for {bits}-bit floats")
        return by_bits[bits]


_ROLE_WORDS = {
    "input": ("input",),
    "inputs": ("input",),
    "operand": ("input",),
    "operands": ("input",),
    "multiplication": ("mul",),
    "multiply": ("mul",),
    "multiplies": ("mul",),
    "products": ("mul",),
    "accumulation": ("acc",),
    "accumulate": ("acc",),
    "accumulator": ("acc",),
    "addition": ("acc",),
    "output": ("acc",),
    "math": ("mul", "acc"),
    "compute": ("mul", "acc"),
    "arithmetic": ("mul", "acc"),
}
_FLOAT_WORDS = {"double": 64, "single": 32, "float": 32, "half": 16, "tensorfloat": 32}


def parse_precision(text: str) -> Precision:
    """Read a precision description by meaning (bits per role, integer or float).

    >>> parse_precision("16 bit inputs, 32 bit multiplication, 32 bit addition").math_dtype
    <Dtype.fp32: 'fp32'>
    >>> parse_precision("GEMM, Conv: Int8 multiplication, 32 bit accumulation").math_dtype
    <Dtype.int8: 'int8'>
    """
    tokens = re.findall(r"[a-z]+|\d+", text.lower())
    is_int = any(t in ("int", "integer", "uint") for t in tokens)
    roles: dict[str, int] = {}
    pending: int | None = None
    for i, tok in enumerate(tokens):
        if tok.isdigit() and (
            i + 1 < len(tokens)
            and tokens[i + 1] in ("bit", "bits")
            or i
            and tokens[i - 1] in ("int", "fp", "float", "bf", "bfloat", "tf")
        ):
            pending = int(tok)
        elif tok in _FLOAT_WORDS:
            pending = _FLOAT_WORDS[tok]
        elif tok in _ROLE_WORDS and pending is not None:
            for role in _ROLE_WORDS[tok]:
                roles[role] = pending
    if pending is None:
        raise ValueError(f"no bit width in precision {text!r}")
    first = roles.get("input", roles.get("mul", pending))
    mul = roles.get("mul", first)
    return Precision(
        input_bits=roles.get("input", first),
        mul_bits=mul,
        acc_bits=roles.get("acc", max(mul, 32) if is_int else mul),
        is_int=is_int,
        brain_float="bf" in tokens or "bfloat" in tokens,
        tensor_float="tf" in tokens or "tensorfloat" in tokens,
    )
