import pytest
from preflight.data.gemm import Dtype, GemmItem, parse_precision
from pydantic import ValidationError


@pytest.mark.parametrize(
    "text, dtype, math",
    [
        ("Float", "fp32", "fp32"),
        ("16 bit inputs, 32 bit multiplication, 32 bit addition", "fp16", "fp32"),
        ("GEMM, Conv: Int8 multiplication, 32 bit accumulation", "int8", "int8"),
        ("Int8 inputs 32 bit math", "int8", "fp32"),
        # strings not in the shared copy, read by the same rules
        ("FP16 inputs, FP32 accumulation", "fp16", "fp16"),
        ("16 bit inputs, 16 bit multiplication, 32 bit accumulation", "fp16", "fp16"),
        ("Double", "fp64", "fp64"),
        ("bfloat16 inputs, 32 bit math", "bf16", "fp32"),
        ("TF32", "fp32", "tf32"),
        ("half", "fp16", "fp16"),
    ],
)
def test_precision_by_meaning(text, dtype, math):
    parsed = parse_precision(text)
    assert (parsed.dtype.value, parsed.math_dtype.value) == (dtype, math)


def test_precision_accumulator_defaults_wide_for_integers():
    assert parse_precision("int8").acc_bits == 32


@pytest.mark.parametrize("text", ["", "Mixed precision"])
def test_precision_without_a_bit_width_is_refused(text):
    with pytest.raises(ValueError, match="no bit width"):
        parse_precision(text)


@pytest.mark.parametrize("text", ["12 bit inputs", "int16"])
def test_precision_of_a_width_no_dtype_has_is_refused(text):
    """Read, but refused when its dtypes are asked for (as a loader does)."""
    precision = parse_precision(text)
    for dtype in ("dtype", "math_dtype"):
        with pytest.raises(ValueError, match="no dtype for"):
            getattr(precision, dtype)


@pytest.mark.parametrize(
    "field, value", [("m", 0), ("n", -3), ("k", 2**31), ("dtype", "fp12"), ("device", "")]
)
def test_item_rejects_bad_fields(field, value):
    item = {"m": 8, "n": 8, "k": 8, "device": "p100"} | {field: value}
    with pytest.raises(ValidationError) as info:
        GemmItem.model_validate(item)
    assert info.value.errors()[0]["loc"] == (field,)


def test_item_rejects_unknown_fields_and_defaults_fp32():
    assert GemmItem(m=1, n=2, k=3, device="p100").dtype is Dtype.fp32
    with pytest.raises(ValidationError):
        GemmItem.model_validate({"m": 1, "n": 2, "k": 3, "device": "p100", "colour": "red"})
