"""Whole-model latency items: a transformer named by its config (or given as an operator list), and the
kernel table every model reduces to.

An operator is what a ``torch.fx`` trace records (``addmm``, ``softmax``, ``view``...) with its tensor
shapes; :data:`OPS` is the vocabulary and says which kind of kernel each one runs. :func:`kernels` turns
operators into kernels (GEMM dims, elements, bytes, FLOPs), adding the backward pass for training;
:func:`config_ops` synthesises a model's forward operators from its HF-style config, the way NeuSight's
traces record them (``data/sources/neusight_traces.py``); shape-only operators (views, permutes, Python
arithmetic on sizes) are left out there since they run no kernel.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path
from typing import Any, Literal

import pandas as pd
from preflight.data.errors import DataError
from preflight.data.gemm import BYTES_PER_ELEMENT, MAX_DIM, Dtype
from preflight.data.names import DeviceName
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    ValidationError,
    field_validator,
    model_validator,
)

CONFIGS_DIR = Path(__file__).with_name("public") / "model_configs"
MAX_RANK = 8
MAX_NUMEL = 2**48
MAX_COUNT = 1_000_000
#: Most layers a config may name (the largest published transformers have a few hundred).
MAX_LAYERS = 10_000

Mode = Literal["inf", "train"]
Kind = Literal["gemm", "elementwise", "softmax", "layernorm", "embedding", "launch"]

#: (kernel kind, whether training runs a backward kernel) -> the operators that run it: the vocabulary.
#: Kind ``None``: not a kernel (graph inputs, parameters, outputs). Launch operators only reshape or read
#: metadata; adds, subs, comparisons, casts and tensor factories pass the gradient through or have none.
_VOCABULARY: dict[tuple[Kind | None, bool], list[str]] = {
    (None, False): ["placeholder", "get_attr", "output"],
    ("gemm", True): ["linear", "addmm", "matmul", "bmm", "mm", "baddbmm"],
    ("softmax", True): ["softmax", "log_softmax"],
    ("layernorm", True): ["layer_norm", "rms_norm"],
    ("embedding", True): ["embedding"],
    ("elementwise", True): [
        "mul", "truediv", "div", "pow", "neg", "exp", "sqrt", "rsqrt", "gelu", "tanh", "relu", "silu",
        "sigmoid", "dropout", "where", "masked_fill", "max", "min", "contiguous", "clone",
    ],
    ("elementwise", False): [
        "add", "sub", "eq", "ne", "gt", "lt", "ge", "le", "cumsum", "arange", "full", "ones", "zeros",
        "tensor", "long", "bool", "float", "masked_fill_",
    ],
    ("launch", False): [
        "view", "reshape", "size", "getitem", "getattr", "permute", "transpose", "unsqueeze", "squeeze",
        "expand", "split", "chunk", "flatten", "dim", "finfo", "to", "type", "type_as",
    ],
}  # fmt: skip
#: Operator -> (kernel kind, has a backward kernel).
OPS: dict[str, tuple[Kind | None, bool]] = {op: entry for entry, ops in _VOCABULARY.items() for op in ops}
#: Operators that return their input unchanged outside training (dropout in eval mode).
IDENTITY_IN_INFERENCE = frozenset({"dropout"})
#: Index of the A operand of C = A @ B among a GEMM operator's inputs (addmm/baddbmm take the bias first).
_GEMM_A = {"addmm": 1, "baddbmm": 1}
#: GEMMs whose B is a weight shared by all rows: leading dims of A fold into M.
_GEMM_FOLDS = frozenset({"linear", "addmm", "mm"})
#: Arithmetic per output element, a rough count for memory-bound kernels.
FLOPS_PER_ELEMENT = {"elementwise": 1, "softmax": 5, "layernorm": 8, "embedding": 0, "launch": 0}
#: A memory-bound kernel's backward moves about this many times its forward traffic.
BACKWARD_TRAFFIC = 2.0
KERNEL_COLUMNS = [
    "op_index", "op", "kind", "pass", "count", "b", "m", "n", "k", "elements", "bytes_moved", "flops",
]  # fmt: skip

Shape = list[int]


def _numel(shape: Sequence[int]) -> int:
    return math.prod(shape)


def _checked(shape: list[int]) -> list[int]:
    if len(shape) > MAX_RANK or any(not 0 <= d <= MAX_DIM for d in shape):
        raise ValueError(f"shape {shape} needs at most {MAX_RANK} dims, each in [0, {MAX_DIM}]")
    if _numel(shape) > MAX_NUMEL:
        raise ValueError(f"shape {shape} has more than {MAX_NUMEL} elements")
    return shape


class OperatorSpec(BaseModel):
    """One traced operator: its name, tensor shapes, and how many times the model runs it."""

    model_config = ConfigDict(extra="forbid")

    op: str = Field(min_length=1, description="the operator as traced: addmm, matmul, softmax, view...")
    input_shapes: list[list[int]] = Field(default_factory=list, max_length=16)
    output_shape: list[int] = Field(default_factory=list, max_length=MAX_RANK)
    count: int = Field(1, ge=1, le=MAX_COUNT, description="runs per model pass, e.g. the number of layers")

    @field_validator("op")
    @classmethod
    def _known(cls, op: str) -> str:
        if op not in OPS:
            raise ValueError(f"unknown operator {op!r}; known: {', '.join(sorted(OPS))}")
        return op

    @field_validator("input_shapes")
    @classmethod
    def _input_dims(cls, shapes: list[list[int]]) -> list[list[int]]:
        return [_checked(shape) for shape in shapes]

    @field_validator("output_shape")
    @classmethod
    def _output_dims(cls, shape: list[int]) -> list[int]:
        return _checked(shape)

    @model_validator(mode="after")
    def _gemm_operands(self) -> OperatorSpec:
        if OPS[self.op][0] == "gemm":
            a = _GEMM_A.get(self.op, 0)
            if len(self.input_shapes) <= a or not self.input_shapes[a] or not self.output_shape:
                raise ValueError(f"{self.op} needs its A operand (input {a}) and an output shape")
        return self


#: How deep an inline config may nest (HF configs nest two or three levels): the service writes items
#: out again, and its serializer stops at a depth far below what a request may carry.
MAX_CONFIG_DEPTH = 16


def _depth(value: Any) -> int:
    """How many containers deep a JSON value nests (iteratively: a body may nest past the stack)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            deepest = max(deepest, depth)
            stack.extend((child, depth + 1) for child in (node.values() if isinstance(node, dict) else node))
    return deepest


class ModelLatencyItem(BaseModel):
    """A whole transformer run once (inference) or for one step (training) on one device."""

    model_config = ConfigDict(extra="forbid")

    model: str | dict[str, Any] | None = Field(
        None, description="a known config's name (see known_configs) or an inline HF-style config"
    )
    ops: list[OperatorSpec] | None = Field(None, min_length=1, description="explicit operators instead")
    batch: StrictInt | None = Field(
        None, gt=0, le=MAX_DIM, description="batch size (a model needs it; ops carry shapes)"
    )
    seq: StrictInt | None = Field(None, gt=0, le=MAX_DIM, description="sequence length (a model needs it)")
    mode: Mode = "inf"
    dtype: Dtype = Dtype.fp32
    device: DeviceName = Field(description="any name the device catalogue resolves")

    @field_validator("model")
    @classmethod
    def _shallow(cls, value: str | dict[str, Any] | None) -> str | dict[str, Any] | None:
        if isinstance(value, dict) and (depth := _depth(value)) > MAX_CONFIG_DEPTH:
            raise ValueError(f"an inline config nests {depth} levels deep; at most {MAX_CONFIG_DEPTH}")
        return value

    @model_validator(mode="after")
    def _one_model(self) -> ModelLatencyItem:
        if (self.model is None) == (self.ops is None):
            raise ValueError("give exactly one of model (a config name or dict) and ops (an operator list)")
        if self.model is not None and (self.batch is None or self.seq is None):
            raise ValueError("a model needs batch and seq")
        if isinstance(self.model, str) and self.model not in known_configs():
            raise ValueError(f"unknown model {self.model!r}; known: {', '.join(sorted(known_configs()))}")
        try:
            if (kernels(self.operators(), self.mode, self.dtype)["kind"] == "launch").all():
                raise ValueError("the operators run no kernel (only shape and launch operations)")
        except (DataError, ValidationError) as exc:
            raise ValueError(str(exc)) from exc
        return self

    def config(self) -> dict[str, Any] | None:
        """The HF-style config the item names, or None for an operator list."""
        return known_configs()[self.model] if isinstance(self.model, str) else self.model

    def operators(self) -> list[OperatorSpec]:
        """The forward operators: as given, or synthesised from the config."""
        if self.model is None:
            return list(self.ops or [])
        assert self.batch is not None and self.seq is not None  # checked by validation
        return model_operators(self.model, self.batch, self.seq)


def model_operators(model: str | dict[str, Any], batch: int, seq: int) -> list[OperatorSpec]:
    """The forward operators of a known config (by name) or an inline one, at this batch and length."""
    return config_ops(known_configs()[model] if isinstance(model, str) else model, batch, seq)


@cache
def _shipped_configs() -> dict[str, str]:
    return {path.stem: path.read_text() for path in sorted(CONFIGS_DIR.glob("*.json"))}


def known_configs() -> dict[str, dict[str, Any]]:
    """Config name -> HF-style config, as shipped (NeuSight's model configs, MIT)."""
    return {name: json.loads(text) for name, text in _shipped_configs().items()}


# --- kernels -------------------------------------------------------------------------------------------


def _kind(spec: OperatorSpec, mode: Mode) -> tuple[Kind | None, bool]:
    """The kernel an operator runs in this mode and whether it has a backward; None: no kernel."""
    kind, backward = OPS[spec.op]
    if kind is None or _numel(spec.output_shape) == 0:
        return None, False
    if mode == "inf" and spec.op in IDENTITY_IN_INFERENCE:
        return "launch", False
    if kind != "gemm" and _numel(spec.output_shape) <= 1:  # Python arithmetic on sizes
        return "launch", False
    return kind, backward


def _gemm_dims(spec: OperatorSpec) -> tuple[int, int, int, int]:
    """(b, m, n, k) of a GEMM operator: C[b, m, n] = A[b, m, k] @ B[b, k, n], leading dims flattened."""
    a_shape = spec.input_shapes[_GEMM_A.get(spec.op, 0)]
    out = spec.output_shape
    b_shape = spec.input_shapes[1] if spec.op in ("matmul", "bmm") and len(spec.input_shapes) > 1 else []
    n, k = out[-1], a_shape[-1]
    folds = spec.op in _GEMM_FOLDS or len(out) < 3 or (spec.op == "matmul" and len(b_shape) <= 2)
    m = _numel(out) // n if folds else out[-2]
    return _numel(out) // (m * n), m, n, k


def _gemm(b: int, m: int, n: int, k: int, width: int) -> dict[str, Any]:
    return {
        "kind": "gemm",
        "b": b,
        "m": m,
        "n": n,
        "k": k,
        "elements": b * m * n,
        "bytes_moved": float(b * (m * k + k * n + m * n) * width),
        "flops": 2.0 * b * m * n * k,
    }


def _memory_bound(spec: OperatorSpec, kind: Kind, width: int) -> dict[str, Any]:
    elements = _numel(spec.output_shape)
    reads = sum(_numel(s) for s in spec.input_shapes) + (elements if kind == "embedding" else 0)  # gathers
    return {
        "kind": kind,
        "b": 0,
        "m": 0,
        "n": 0,
        "k": 0,
        "elements": elements,
        "bytes_moved": 0.0 if kind == "launch" else float((reads + elements) * width),
        "flops": float(FLOPS_PER_ELEMENT[kind] * elements),
    }


def _operator_kernels(spec: OperatorSpec, mode: Mode, width: int) -> list[dict[str, Any]]:
    """Forward kernel(s) of one operator and, in training, its backward ones."""
    kind, backward = _kind(spec, mode)
    if kind is None:
        return []
    if kind == "gemm":
        b, m, n, k = _gemm_dims(spec)
        rows = [_gemm(b, m, n, k, width) | {"pass": "fw"}]
        if mode == "train":  # dA = dC @ B^T, dB = A^T @ dC
            rows += [_gemm(b, m, k, n, width) | {"pass": "bw"}, _gemm(b, k, n, m, width) | {"pass": "bw"}]
        return rows
    row = _memory_bound(spec, kind, width)
    rows = [row | {"pass": "fw"}]
    if mode == "train" and backward:
        scaled = {
            "bytes_moved": BACKWARD_TRAFFIC * row["bytes_moved"],
            "flops": BACKWARD_TRAFFIC * row["flops"],
        }
        rows.append(row | scaled | {"pass": "bw"})
    return rows


def kernels(ops: Sequence[OperatorSpec], mode: Mode = "inf", dtype: Dtype = Dtype.fp32) -> pd.DataFrame:
    """The kernels a model runs, one row per kernel with ``count`` runs (``KERNEL_COLUMNS``).

    ``op_index`` points back into ``ops``; GEMM rows carry b, m, n, k (zero elsewhere); ``elements`` is
    the output size, ``bytes_moved`` inputs + output at the dtype's width (twice that for a memory-bound
    backward), ``flops`` per run. Training adds each GEMM's two backward GEMMs and the backward of
    memory-bound kernels that have one.
    """
    width = BYTES_PER_ELEMENT[Dtype(dtype)]
    rows = [
        row | {"op_index": index, "op": spec.op, "count": spec.count}
        for index, spec in enumerate(ops)
        for row in _operator_kernels(spec, mode, width)
    ]
    frame = pd.DataFrame(rows, columns=KERNEL_COLUMNS)
    ints = ["op_index", "count", "b", "m", "n", "k", "elements"]
    return frame.astype(dict.fromkeys(ints, "int64") | {"bytes_moved": "float64", "flops": "float64"})


# --- operators from a config ---------------------------------------------------------------------------


def _op(op: str, inputs: list[Shape], output: Shape) -> OperatorSpec:
    return OperatorSpec(op=op, input_shapes=inputs, output_shape=output)


def _repeat(ops: list[OperatorSpec], times: int) -> list[OperatorSpec]:
    """The operators of a block run ``times`` times (none for zero)."""
    if not isinstance(times, int) or isinstance(times, bool) or times < 0:
        raise ValueError(f"layer count {times!r} is not a non-negative integer")
    repeated = (
        OperatorSpec.model_validate(spec.model_dump() | {"count": spec.count * times}) for spec in ops
    )
    return list(repeated) if times else []


def _head_dim(hidden: int, heads: int) -> int:
    if heads <= 0 or hidden % heads:
        raise ValueError(f"hidden size {hidden} does not split into {heads} heads")
    return hidden // heads


def _activation(name: str, shape: Shape) -> list[OperatorSpec]:
    """An activation as HF code runs it (``gelu_new`` is a chain of elementwise ops in eager mode)."""
    if name == "gelu_new":
        chain = ["mul", "pow", "mul", "add", "mul", "tanh", "add", "mul"]
        return [_op(o, [shape, shape] if i in (3, 7) else [shape], shape) for i, o in enumerate(chain)]
    single = {
        "gelu": "gelu",
        "gelu_fast": "gelu",
        "gelu_pytorch_tanh": "gelu",
        "relu": "relu",
        "silu": "silu",
    }
    if name not in single:
        raise DataError(f"activation {name!r} is not supported; supported: gelu_new, {', '.join(single)}")
    return [_op(single[name], [shape], shape)]


def _attention(
    b: int, heads: int, s: int, s_kv: int, d: int, scale: bool, mask: OperatorSpec | None
) -> list[OperatorSpec]:
    """Eager attention on [b, heads, s, d]: scores, optional scaling and mask, softmax, context."""
    scores = [b, heads, s, s_kv]
    ops = [_op("matmul", [[b, heads, s, d], [b, heads, d, s_kv]], scores)]
    ops += [_op("truediv", [scores, [1]], scores)] if scale else []
    ops += [mask] if mask is not None else []
    ops += [
        _op("softmax", [scores], scores),
        _op("dropout", [scores], scores),
        _op("matmul", [scores, [b, heads, s_kv, d]], [b, heads, s, d]),
        _op("contiguous", [[b, s, heads, d]], [b, s, heads, d]),
    ]
    return ops


def _architecture(config: dict, default: str) -> str:
    return (config.get("architectures") or [default])[0]


def _causal_lm_head(config: dict, bare: str, x: Shape, vocab: int) -> list[OperatorSpec]:
    """The LM head of a decoder, none for the bare model."""
    architecture = _architecture(config, "CausalLM")
    if architecture == bare:
        return []
    if "CausalLM" not in architecture and "LMHead" not in architecture:
        raise DataError(f"architecture {architecture!r} is not supported (a causal LM or {bare})")
    return [_op("linear", [x], [*x[:-1], vocab])]


def _gpt2(config: dict, batch: int, seq: int) -> list[OperatorSpec]:
    """GPT-2 (and NeuSight's GPT-3 configs): fused QKV and MLP through Conv1D, i.e. addmm."""
    hidden, heads, vocab = config["n_embd"], config["n_head"], config["vocab_size"]
    inner, tokens, x = config.get("n_inner") or 4 * hidden, batch * seq, [batch, seq, hidden]
    scores = [batch, heads, seq, seq]
    scaled, causal = (
        config.get("scale_attn_weights", True),
        _op("where", [[1, 1, seq, seq], scores, [1]], scores),
    )
    layer = [
        _op("layer_norm", [x], x),
        _op("addmm", [[3 * hidden], [tokens, hidden], [hidden, 3 * hidden]], [tokens, 3 * hidden]),
        *_attention(batch, heads, seq, seq, _head_dim(hidden, heads), scaled, causal),
        _op("addmm", [[hidden], [tokens, hidden], [hidden, hidden]], [tokens, hidden]),
        *_residual(x),
        _op("layer_norm", [x], x),
        _op("addmm", [[inner], [tokens, hidden], [hidden, inner]], [tokens, inner]),
        *_activation(config.get("activation_function", "gelu_new"), [batch, seq, inner]),
        _op("addmm", [[hidden], [tokens, inner], [inner, hidden]], [tokens, hidden]),
        *_residual(x),
    ]
    return [
        *_positional_embeddings(batch, seq, hidden),
        *_repeat(layer, config["n_layer"]),
        _op("layer_norm", [x], x),
        *_causal_lm_head(config, "GPT2Model", x, vocab),
    ]


def _gpt_neo(config: dict, batch: int, seq: int) -> list[OperatorSpec]:
    """GPT-Neo: separate Q/K/V projections, unscaled attention scores."""
    hidden, heads, vocab = config["hidden_size"], config["num_heads"], config["vocab_size"]
    inner, x = config.get("intermediate_size") or 4 * hidden, [batch, seq, hidden]
    scores = [batch, heads, seq, seq]
    causal = _op("where", [[1, 1, seq, seq], scores, [1]], scores)
    layer = [
        _op("layer_norm", [x], x),
        *[_op("linear", [x], x) for _ in range(3)],
        *_attention(batch, heads, seq, seq, _head_dim(hidden, heads), False, causal),
        _op("linear", [x], x),
        *_residual(x),
        _op("layer_norm", [x], x),
        _op("linear", [x], [batch, seq, inner]),
        *_activation(config.get("activation_function", "gelu_new"), [batch, seq, inner]),
        _op("linear", [[batch, seq, inner]], x),
        *_residual(x),
    ]
    return [
        *_positional_embeddings(batch, seq, hidden),
        *_repeat(layer, config["num_layers"]),
        _op("layer_norm", [x], x),
        *_causal_lm_head(config, "GPTNeoModel", x, vocab),
    ]


def _positional_embeddings(batch: int, seq: int, hidden: int) -> list[OperatorSpec]:
    x = [batch, seq, hidden]
    return [
        _op("embedding", [[batch, seq]], x),
        _op("embedding", [[1, seq]], [1, seq, hidden]),
        _op("add", [x, [1, seq, hidden]], x),
        _op("dropout", [x], x),
    ]


def _residual(x: Shape) -> list[OperatorSpec]:
    return [_op("dropout", [x], x), _op("add", [x, x], x)]


def _bert_head(config: dict, batch: int, seq: int, hidden: int) -> list[OperatorSpec]:
    """Pooler and task heads by architecture, as HF builds them."""
    x, cls = [batch, seq, hidden], [batch, hidden]
    pooler = [_op("linear", [cls], cls), _op("tanh", [cls], cls)]
    mlm = [
        _op("linear", [x], x),
        *_activation(config.get("hidden_act", "gelu"), x),
        _op("layer_norm", [x], x),
        _op("linear", [x], [batch, seq, config["vocab_size"]]),
    ]
    labels = config.get("num_labels") or len(config.get("id2label") or {}) or 2
    heads = {
        "BertModel": pooler,
        "BertForSequenceClassification": [
            *pooler,
            _op("dropout", [cls], cls),
            _op("linear", [cls], [batch, labels]),
        ],
        "BertForPreTraining": [*pooler, *mlm, _op("linear", [cls], [batch, 2])],
        "BertForMaskedLM": mlm,
        "BertLMHeadModel": mlm,
    }
    architecture = _architecture(config, "BertModel")
    if architecture not in heads:
        raise DataError(f"architecture {architecture!r} is not supported; supported: {', '.join(heads)}")
    return heads[architecture]


def _bert(config: dict, batch: int, seq: int) -> list[OperatorSpec]:
    """BERT: embeddings (word, token type, position), post-norm encoder layers, head by architecture."""
    hidden, heads, inner = config["hidden_size"], config["num_attention_heads"], config["intermediate_size"]
    x, mask, scores = [batch, seq, hidden], [batch, 1, 1, seq], [batch, heads, seq, seq]
    act = config.get("hidden_act", "gelu")
    embeddings = [
        _op("sub", [mask], mask),
        _op("mul", [mask], mask),
        _op("embedding", [[batch, seq]], x),
        _op("embedding", [[batch, seq]], x),
        _op("add", [x, x], x),
        _op("embedding", [[1, seq]], [1, seq, hidden]),
        _op("add", [x, [1, seq, hidden]], x),
        _op("layer_norm", [x], x),
        _op("dropout", [x], x),
    ]
    layer = [
        *[_op("linear", [x], x) for _ in range(3)],
        *_attention(
            batch, heads, seq, seq, _head_dim(hidden, heads), True, _op("add", [scores, mask], scores)
        ),
        _op("linear", [x], x),
        *_residual(x),
        _op("layer_norm", [x], x),
        _op("linear", [x], [batch, seq, inner]),
        *_activation(act, [batch, seq, inner]),
        _op("linear", [[batch, seq, inner]], x),
        *_residual(x),
        _op("layer_norm", [x], x),
    ]
    return [
        *embeddings,
        *_repeat(layer, config["num_hidden_layers"]),
        *_bert_head(config, batch, seq, hidden),
    ]


def _opt_masks(batch: int, seq: int) -> list[OperatorSpec]:
    """The causal and padding masks OPT builds once per forward pass."""
    square, mask = [seq, seq], [batch, 1, seq, seq]
    return [
        _op("full", [[1], [1], [1]], square),
        _op("lt", [[seq], [seq, 1]], square),
        _op("masked_fill_", [square, square], square),
        _op("sub", [mask], mask),
        _op("masked_fill", [mask, mask, [1]], mask),
        _op("bool", [mask], mask),
        _op("masked_fill", [mask, mask, [1]], mask),
    ]


def _opt(config: dict, batch: int, seq: int) -> list[OperatorSpec]:
    """OPT: Q/K/V projections with bmm attention over batch x heads, optional embedding projections."""
    hidden, heads, ffn = config["hidden_size"], config["num_attention_heads"], config["ffn_dim"]
    project = config.get("word_embed_proj_dim") or hidden
    tokens, d, x = batch * seq, _head_dim(hidden, heads), [batch, seq, hidden]
    scores, flat_scores, heads_x = [batch, heads, seq, seq], [batch * heads, seq, seq], [batch, heads, seq, d]
    projected = [batch, seq, project]
    pre_norm = config.get("do_layer_norm_before", True)
    layer = [
        _op("layer_norm", [x], x),
        _op("linear", [x], x),
        _op("mul", [x], x),
        *[spec for _ in range(2) for spec in (_op("linear", [x], x), _op("contiguous", [heads_x], heads_x))],
        _op("contiguous", [heads_x], heads_x),
        _op("bmm", [[batch * heads, seq, d], [batch * heads, d, seq]], flat_scores),
        _op("add", [scores, [batch, 1, seq, seq]], scores),
        _op("max", [scores, [1]], scores),
        _op("softmax", [flat_scores], flat_scores),
        _op("dropout", [flat_scores], flat_scores),
        _op("bmm", [flat_scores, [batch * heads, seq, d]], [batch * heads, seq, d]),
        _op("linear", [x], x),
        *_residual(x),
        _op("layer_norm", [[tokens, hidden]], [tokens, hidden]),
        _op("linear", [[tokens, hidden]], [tokens, ffn]),
        *_activation(config.get("activation_function", "relu"), [tokens, ffn]),
        _op("linear", [[tokens, ffn]], [tokens, hidden]),
        *_residual([tokens, hidden]),
    ]
    return [
        _op("embedding", [[batch, seq]], projected),
        *([_op("linear", [projected], x)] if project != hidden else []),
        *_opt_masks(batch, seq),
        _op("embedding", [[batch, seq], [config["max_position_embeddings"] + 2, hidden]], x),
        _op("add", [x, x], x),
        *_repeat(layer, config["num_hidden_layers"]),
        *([_op("layer_norm", [x], x)] if pre_norm else []),
        *([_op("linear", [x], projected)] if project != hidden else []),
        *_causal_lm_head(config, "OPTModel", projected, config["vocab_size"]),
    ]


def _switch_ff(config: dict, batch: int, seq: int, sparse: bool) -> list[OperatorSpec]:
    """A Switch feed-forward: dense, or a router and every expert on ``batch x expert_capacity`` padded
    rows (NeuSight's tracing runs each expert on a fixed-size padded buffer)."""
    model, ff, experts = config["d_model"], config["d_ff"], config["num_experts"]
    rows = batch * config["expert_capacity"] if sparse else batch * seq
    act = config.get("dense_act_fn", "relu")
    expert = [
        _op("linear", [[rows, model]], [rows, ff]),
        *_activation(act, [rows, ff]),
        _op("dropout", [[rows, ff]], [rows, ff]),
        _op("linear", [[rows, ff]], [rows, model]),
    ]
    if not sparse:
        return expert
    x, logits = [batch, seq, model], [batch, seq, experts]
    router = [_op("linear", [x], logits), _op("softmax", [logits], logits), _op("clone", [x], x)]
    return [*router, *_repeat(expert, experts), _op("mul", [[batch, seq, 1], x], x)]


def _switch_layer(config: dict, batch: int, seq: int, sparse: bool, cross: bool) -> list[OperatorSpec]:
    """One Switch block: T5 self-attention, cross-attention in the decoder, then the feed-forward."""
    model, heads, d_kv = config["d_model"], config["num_heads"], config["d_kv"]
    x, inner, scores = [batch, seq, model], [batch, seq, heads * d_kv], [batch, heads, seq, seq]
    attention = [
        _op("rms_norm", [x], x),
        *[_op("linear", [x], inner) for _ in range(3)],
        *_attention(batch, heads, seq, seq, d_kv, False, _op("add", [scores, [1, heads, seq, seq]], scores)),
        _op("linear", [inner], x),
        *_residual(x),
    ]
    ff = [_op("rms_norm", [x], x), *_switch_ff(config, batch, seq, sparse), *_residual(x)]
    return attention * (2 if cross else 1) + ff


def _sparse_layers(layers: int, step: int) -> int:
    """How many of ``layers`` are sparse (``i % step == 1``, or every one when step is 1), in O(1)."""
    if step == 1:
        return layers
    return max(0, (layers - 2) // step + 1) if step > 1 else 0


def _switch_stack(
    config: dict, batch: int, seq: int, layers: int, step: int, decoder: bool
) -> list[OperatorSpec]:
    """Encoder or decoder: layer ``i`` is sparse when ``i % step == 1`` (every layer when step is 1)."""
    sparse = _sparse_layers(layers, step)
    x, heads = [batch, seq, config["d_model"]], config["num_heads"]
    return [
        _op("embedding", [[batch, seq]], x),
        _op("dropout", [x], x),
        _op("embedding", [[seq, seq]], [seq, seq, heads]),  # relative position bias, first layer only
        *_repeat(_switch_layer(config, batch, seq, False, decoder), layers - sparse),
        *_repeat(_switch_layer(config, batch, seq, True, decoder), sparse),
        _op("rms_norm", [x], x),
        _op("dropout", [x], x),
    ]


def _switch(config: dict, batch: int, seq: int) -> list[OperatorSpec]:
    """Switch Transformers (encoder-decoder, top-1 experts), decoder inputs as long as the encoder's."""
    x = [batch, seq, config["d_model"]]
    layers = config["num_layers"]
    return [
        *_switch_stack(config, batch, seq, layers, config.get("encoder_sparse_step", 1), False),
        *_switch_stack(
            config,
            batch,
            seq,
            config.get("num_decoder_layers") or layers,
            config.get("decoder_sparse_step", 1),
            True,
        ),
        _op("mul", [x], x),
        _op("linear", [x], [batch, seq, config["vocab_size"]]),
    ]


#: Work units of one operator of a model item (``models/core/budget.py``): featurizing and timing its
#: kernels, forward and backward, costs about ten GEMM estimates.
OPERATOR_COST = 10


def item_cost(raw: dict) -> float:
    """An item's work from its raw fields: ``OPERATOR_COST`` per operator given, or per operator the
    largest shipped config of its model type builds (a layer count repeats operators, it adds none)."""
    ops = raw.get("ops")
    if isinstance(ops, list):
        return OPERATOR_COST * len(ops)
    model = raw.get("model")
    config = model if isinstance(model, dict) else known_configs().get(str(model), {})
    return OPERATOR_COST * _operators_per_type().get(str(config.get("model_type")), 1)


@cache
def _operators_per_type() -> dict[str, int]:
    """The most operators a shipped config of each model type builds (at batch and sequence 1)."""
    most: dict[str, int] = {}
    for name, config in known_configs().items():
        count = len(model_operators(name, 1, 1))
        most[config["model_type"]] = max(most.get(config["model_type"], 0), count)
    return most


def _check_bounds(config: dict[str, Any]) -> None:
    """Refuse a config whose numbers no model has before any work is spent on it: a layer count past
    :data:`MAX_LAYERS`, any other size past :data:`MAX_DIM` (``num_layers: 10**8`` built its stack in a
    loop for seconds, ``10**400`` for ever)."""
    for key, value in config.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        limit = MAX_LAYERS if "layer" in key else MAX_DIM
        if not 0 <= value <= limit:
            raise DataError(f"config field {key!r} is {_short(value)}; it lies in [0, {limit}]")


def _short(value: float) -> str:
    """A number for a message (an integer of thousands of digits is not printed)."""
    if isinstance(value, int) and value.bit_length() > 64:
        return f"an integer of {value.bit_length()} bits"
    return repr(value)


_BUILDERS: dict[str, Callable[[dict, int, int], list[OperatorSpec]]] = {
    "gpt2": _gpt2,
    "gpt_neo": _gpt_neo,
    "bert": _bert,
    "opt": _opt,
    "switch_transformers": _switch,
}


def config_ops(config: dict[str, Any], batch: int, seq: int) -> list[OperatorSpec]:
    """The forward operators of an HF-style config at this batch and sequence length; per-layer operators
    carry ``count`` = the number of layers."""
    model_type = config.get("model_type")
    if not isinstance(model_type, str) or model_type not in _BUILDERS:
        raise DataError(f"model_type {model_type!r} is not supported; supported: {', '.join(_BUILDERS)}")
    _check_bounds(config)
    try:
        return _BUILDERS[model_type](config, batch, seq)
    except KeyError as exc:
        raise DataError(f"{model_type} config lacks {exc.args[0]!r}") from exc
    except (TypeError, ValueError, ZeroDivisionError) as exc:
        raise DataError(f"{model_type} config does not describe a valid model: {exc}") from exc
