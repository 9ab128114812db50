import pytest
from preflight.data.errors import DataError
from preflight.data.gemm import Dtype
from preflight.data.model_latency import (
    CONFIGS_DIR,
    KERNEL_COLUMNS,
    ModelLatencyItem,
    OperatorSpec,
    config_ops,
    kernels,
    known_configs,
)
from pydantic import ValidationError

TINY_GPT2 = {"model_type": "gpt2", "n_embd": 64, "n_head": 4, "n_layer": 2, "vocab_size": 100}
TINY_BERT = {
    "model_type": "bert",
    "hidden_size": 32,
    "num_attention_heads": 4,
    "num_hidden_layers": 3,
    "intermediate_size": 128,
    "vocab_size": 50,
}


def op(name, inputs, output, count=1):
    return OperatorSpec(op=name, input_shapes=inputs, output_shape=output, count=count)


def gemm_flops(table, pass_=None):
    rows = table[(table["kind"] == "gemm") & ((table["pass"] == pass_) if pass_ else True)]
    return (rows["flops"] * rows["count"]).sum()


@pytest.mark.parametrize(
    "spec, message",
    [
        ({"op": "add", "input_shapes": [[2, -1]], "output_shape": [2, 1]}, "each in"),
        ({"op": "add", "input_shapes": [[1] * 9], "output_shape": [1]}, "at most 8 dims"),
        ({"op": "conv9d", "input_shapes": [], "output_shape": [1]}, "unknown operator 'conv9d'"),
        ({"op": "addmm", "input_shapes": [[8]], "output_shape": [4, 8]}, "A operand"),
        ({"op": "add", "input_shapes": [], "output_shape": [1], "count": 0}, "greater than or equal to 1"),
        ({"op": "add", "output_shape": [1], "latency_ms": 3.0}, "Extra inputs"),
    ],
)
def test_operator_spec_validation(spec, message):
    with pytest.raises(ValidationError, match=message):
        OperatorSpec(**spec)


def test_kernels_classify_operators_and_drop_placeholders():
    ops = [
        op("placeholder", [], [4, 8]),
        op("embedding", [[4, 8]], [4, 8, 16]),
        op("linear", [[4, 8, 16]], [4, 8, 32], count=3),
        op("matmul", [[2, 3, 8, 16], [2, 3, 16, 8]], [2, 3, 8, 8]),
        op("softmax", [[2, 3, 8, 8]], [2, 3, 8, 8]),
        op("layer_norm", [[4, 8, 32]], [4, 8, 32]),
        op("add", [[4, 8, 32], [4, 8, 32]], [4, 8, 32]),
        op("view", [[4, 8, 32], [1]], [32, 32]),
        op("add", [[1]], [1]),  # Python arithmetic on sizes
        op("dropout", [[4, 8, 32]], [4, 8, 32]),  # identity in eval mode
        op("add", [[0, 4]], [0, 4]),
    ]
    table = kernels(ops)
    assert list(table.columns) == KERNEL_COLUMNS and (table["pass"] == "fw").all()
    assert table["kind"].tolist() == [
        "embedding", "gemm", "gemm", "softmax", "layernorm", "elementwise", "launch", "launch", "launch"
    ]  # fmt: skip
    assert table["op_index"].tolist() == [1, 2, 3, 4, 5, 6, 7, 8, 9]
    gemms = table[table["kind"] == "gemm"]
    assert gemms[["b", "m", "n", "k", "count"]].values.tolist() == [[1, 32, 32, 16, 3], [6, 8, 8, 16, 1]]
    assert gemms["flops"].tolist() == [2 * 32 * 32 * 16, 2 * 6 * 8 * 8 * 16]
    add = table[table["op"] == "add"].iloc[0]
    assert add["elements"] == 4 * 8 * 32 and add["bytes_moved"] == 3 * 4 * 8 * 32 * 4
    assert (table[table["kind"] == "launch"]["bytes_moved"] == 0).all()


def test_gemm_dims_fold_weights_into_rows():
    table = kernels(
        [
            op("addmm", [[8], [10, 16], [16, 8]], [10, 8]),
            op("matmul", [[2, 5, 16], [16, 8]], [2, 5, 8]),
            op("bmm", [[6, 8, 16], [6, 16, 4]], [6, 8, 4]),
        ]
    )
    assert table[["b", "m", "n", "k"]].values.tolist() == [[1, 10, 8, 16], [1, 10, 8, 16], [6, 8, 4, 16]]


def test_training_adds_two_backward_gemms_with_swapped_dims():
    table = kernels(
        [op("linear", [[4, 8, 16]], [4, 8, 32]), op("bmm", [[6, 8, 16], [6, 16, 4]], [6, 8, 4])], "train"
    )
    dims = table[["pass", "b", "m", "n", "k"]].values.tolist()
    assert dims == [
        ["fw", 1, 32, 32, 16],
        ["bw", 1, 32, 16, 32],  # dA = dC @ B^T
        ["bw", 1, 16, 32, 32],  # dB = A^T @ dC
        ["fw", 6, 8, 4, 16],
        ["bw", 6, 8, 16, 4],
        ["bw", 6, 16, 4, 8],
    ]
    assert gemm_flops(table, "bw") == 2 * gemm_flops(table, "fw")


def test_training_backward_of_memory_bound_kernels():
    x = [4, 8, 32]
    ops = [op("mul", [x, x], x), op("add", [x, x], x), op("view", [x], [32, 32]), op("dropout", [x], x)]
    table = kernels(ops, "train")
    assert table[["op", "kind", "pass"]].values.tolist() == [
        ["mul", "elementwise", "fw"],
        ["mul", "elementwise", "bw"],
        ["add", "elementwise", "fw"],
        ["view", "launch", "fw"],
        ["dropout", "elementwise", "fw"],
        ["dropout", "elementwise", "bw"],
    ]
    mul = table[table["op"] == "mul"]["bytes_moved"].tolist()
    assert mul[1] == 2 * mul[0]


def test_bytes_follow_the_dtype_width():
    ops = [op("linear", [[4, 8, 16]], [4, 8, 32]), op("gelu", [[4, 8, 32]], [4, 8, 32])]
    full, half = kernels(ops, dtype=Dtype.fp32), kernels(ops, dtype=Dtype.fp16)
    assert (full["bytes_moved"] == 2 * half["bytes_moved"]).all() and (full["flops"] == half["flops"]).all()


def test_config_ops_for_a_tiny_gpt2_match_its_flops():
    batch, seq, hidden, layers, vocab = 2, 8, 64, 2, 100
    ops = config_ops(TINY_GPT2, batch, seq)
    tokens, head = batch * seq, hidden // 4
    per_layer = (
        2 * tokens * (3 * hidden**2 + hidden**2 + 2 * hidden * 4 * hidden)
        + 2 * 2 * batch * seq * seq * hidden
    )
    assert gemm_flops(kernels(ops)) == layers * per_layer + 2 * tokens * hidden * vocab
    assert {spec.count for spec in ops} == {1, layers}
    assert ops[0].op == "embedding" and ops[0].count == 1 and ops[-1].output_shape == [batch, seq, vocab]
    scores = [s for s in ops if s.op == "softmax"]
    assert scores[0].output_shape == [batch, 4, seq, seq] and head == 16


@pytest.mark.parametrize(
    "architecture, last_shape, linears_after_layers",
    [
        (None, [2, 32], 1),  # BertModel: pooler
        ("BertForSequenceClassification", [2, 2], 2),
        ("BertForPreTraining", [2, 2], 4),
        ("BertLMHeadModel", [2, 8, 50], 2),
    ],
)
def test_config_ops_for_a_tiny_bert_follow_the_architecture(architecture, last_shape, linears_after_layers):
    config = TINY_BERT | ({"architectures": [architecture]} if architecture else {})
    ops = config_ops(config, 2, 8)
    assert ops[-1].output_shape == last_shape
    after = ops[max(i for i, s in enumerate(ops) if s.count == 3) + 1 :]
    assert sum(s.op == "linear" for s in after) == linears_after_layers
    assert sum(s.op == "linear" and s.count == 3 for s in ops) == 6  # q, k, v, out, up, down


def test_config_ops_for_opt_gpt_neo_and_switch():
    opt = known_configs()["opt"]  # hidden 512 with 2048-wide embeddings: projections in and out
    ops = config_ops(opt, 1, 16)
    assert ops[1].op == "linear" and ops[1].output_shape == [1, 16, 512]
    assert ops[-1].input_shapes == [[1, 16, 2048]]
    neo = {"model_type": "gpt_neo", "hidden_size": 32, "num_heads": 4, "num_layers": 2, "vocab_size": 10}
    assert gemm_flops(kernels(config_ops(neo, 1, 4))) > 0
    switch = known_configs()["switchxl4"]
    experts = [s for s in config_ops(switch, 2, 128) if s.op == "linear" and s.input_shapes == [[128, 1024]]]
    assert [s.count for s in experts] == [12 * 4, 12 * 4]  # sparse layers x experts, encoder and decoder


@pytest.mark.parametrize(
    "config, message",
    [
        ({"model_type": "llama"}, "model_type 'llama' is not supported"),
        ({"n_embd": 64}, "model_type None is not supported"),
        ({k: v for k, v in TINY_GPT2.items() if k != "n_layer"}, "gpt2 config lacks 'n_layer'"),
        (TINY_GPT2 | {"n_head": 5}, "does not split into 5 heads"),
        (TINY_GPT2 | {"activation_function": "swiglu"}, "activation 'swiglu' is not supported"),
        (TINY_GPT2 | {"n_layer": -1}, r"'n_layer' is -1; it lies in \[0, 10000\]"),
        (TINY_GPT2 | {"n_layer": 10**400}, r"'n_layer' is an integer of 1329 bits"),
        (TINY_GPT2 | {"n_layer": 2.5}, "not a non-negative integer"),
        (TINY_GPT2 | {"n_embd": 2**40}, r"'n_embd' is 1099511627776; it lies in \[0, 2147483647\]"),
        (TINY_BERT | {"architectures": ["BertForQuestionAnswering"]}, "BertForQuestionAnswering"),
    ],
)
def test_config_ops_refuse_what_they_cannot_build(config, message):
    with pytest.raises(DataError, match=message):
        config_ops(config, 1, 8)


@pytest.mark.parametrize(
    "fields, message",
    [
        ({}, "exactly one of model"),
        ({"model": "gpt2_large", "ops": [{"op": "add", "output_shape": [2]}]}, "exactly one of model"),
        ({"model": "gpt9"}, "unknown model 'gpt9'; known: bert, bert_large"),
        ({"model": {"model_type": "llama"}}, "model_type 'llama' is not supported"),
        ({"model": "gpt2_large", "batch": 0}, "greater than 0"),
        ({"model": "gpt2_large", "mode": "serve"}, "'inf' or 'train'"),
        ({"ops": []}, "at least 1 item"),
    ],
)
def test_item_validation(fields, message):
    with pytest.raises(ValidationError, match=message):
        ModelLatencyItem(**({"batch": 1, "seq": 8, "device": "T4"} | fields))


def test_item_operators_by_name_inline_config_or_list():
    by_name = ModelLatencyItem(model="gpt2_med", batch=1, seq=8, device="T4", mode="train")
    assert by_name.operators() == config_ops(known_configs()["gpt2_med"], 1, 8)
    inline = ModelLatencyItem(model=TINY_GPT2, batch=2, seq=8, device="T4")
    assert inline.config() == TINY_GPT2 and len(inline.operators()) == len(config_ops(TINY_GPT2, 2, 8))
    listed = ModelLatencyItem(
        ops=[{"op": "gelu", "input_shapes": [[4]], "output_shape": [4]}], batch=1, seq=1, device="T4"
    )
    assert listed.config() is None and listed.operators()[0].op == "gelu" and listed.dtype == Dtype.fp32


def test_known_configs_ship_with_their_licence():
    configs = known_configs()
    assert {"gpt2_large", "bert_large", "opt_13", "gpt3_xl", "gpt3_27", "switchxl4"} <= set(configs)
    assert "MIT License" in (CONFIGS_DIR / "LICENSE").read_text()
    configs["gpt2_large"]["n_layer"] = 1
    assert known_configs()["gpt2_large"]["n_layer"] == 36  # callers get copies
