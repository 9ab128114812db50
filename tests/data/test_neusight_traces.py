import json

import numpy as np
import pandas as pd
import pytest
from preflight.data.catalogue import Catalogue
from preflight.data.errors import DataError, UnknownDevice
from preflight.data.model_latency import OperatorSpec, config_ops, kernels, known_configs
from preflight.data.sources.neusight_traces import COLUMNS, device_specs, load

from tests.conftest import SHARED_DATASETS

GPU = "Fake_GPU_9000"
SPEC = {
    "Device": "Fake GPU 9000",
    "Dev_Mem": 24,
    "Mem_Bw": 900,
    "Num_Sm": 60,
    "Core_Per_SM": 64,
    "Freq": 1500,
    "SingleFLOPs": 11520,
    "L2Cache": 6,
}
#: NeuSight's bert traces: sequence classification for inference, pre-training heads for training.
BERT_HEADS = {"inf": "BertForSequenceClassification", "train": "BertForPreTraining"}


def module(name, cls):
    return f"{{'nn_module_stack': OrderedDict([('{name}', <class 'torch.nn.modules.{cls}'>)])}}"


def node(op, target, shapes, out, fw=0.0, bw=0.0, acc=0.0, meta="{}", dtype="torch.float32"):
    name = target.replace(".", "_") if op in ("call_module", "get_attr") else target
    return {
        "op": op,
        "target": target,
        "meta": meta,
        "Name": name,
        "input_shapes": json.dumps(shapes),
        "output_shape": str(tuple(out)),
        "latency": fw + bw + acc,
        "fw_latency": fw,
        "bw_latency": bw,
        "acc_latency": acc,
        "dtype": dtype,
    }


def tiny_trace(batch=2, seq=8, hidden=16, train=False):
    """A 2-layer model's trace: embedding, layer 0 (norm, projection, residual add), final norm, head."""
    x, tokens = [batch, seq, hidden], batch * seq
    bw = 0.5 if train else 0.0
    return pd.DataFrame(
        [
            node("placeholder", "input_ids", [], [batch, seq], dtype="torch.int64"),
            node("call_module", "wte", [[batch, seq]], x, 0.1, bw, meta=module("wte", "sparse.Embedding")),
            node(
                "call_module", "h.0.ln_1", [x], x, 0.2, bw, meta=module("h.0.ln_1", "normalization.LayerNorm")
            ),
            node("get_attr", "h.0.c_attn.weight", [], [hidden, hidden]),
            node("call_method", "view", [x, [1]], [tokens, hidden], 0.01),
            node(
                "call_function",
                "<built-in method addmm of type object at 0x7f>",
                [[hidden], [tokens, hidden], [hidden, hidden]],
                [tokens, hidden],
                1.0,
                2 * bw,
                0.05 if train else 0.0,
            ),
            node("call_function", "<built-in function add>", [x, x], x, 0.3, bw),
            node("call_module", "ln_f", [x], x, 0.2, bw, meta=module("ln_f", "normalization.LayerNorm")),
            node(
                "call_module",
                "lm_head",
                [x],
                [batch, seq, 50],
                0.7,
                bw,
                meta=module("lm_head", "linear.Linear"),
            ),
            node("output", "output", [[batch, seq, 50]], [batch, seq, 50]),
        ]
    )


def write_run(root, stem, trace=None, summary=None, gpu=GPU):
    folder = root / "traces" / gpu
    folder.mkdir(parents=True, exist_ok=True)
    if trace is not None:
        trace.to_csv(folder / f"{stem}.csv", index=False)
    if summary is not None:
        (folder / f"{stem}.json").write_text(json.dumps(summary))


def fake_folder(root, spec=SPEC):
    """Two inference runs and a training run of the tiny model on a GPU no catalogue knows."""
    (root / "device_configs").mkdir(parents=True)
    (root / "device_configs" / f"{GPU}.json").write_text(json.dumps(spec))
    inf = {"num_layer": 2, "e2e_latency": 4.0, "fw_latency": 4.0, "bwall_latency": 0}
    write_run(root, "tiny-inf-8-2", tiny_trace(), inf)
    write_run(root, "tiny-inf-8-4", tiny_trace(batch=4), inf | {"e2e_latency": 7.5, "fw_latency": 7.5})
    train = {"num_layer": 2, "e2e_latency": 9.0, "fw_latency": 3.0, "bwall_latency": 6.0}
    write_run(root, "tiny-train-8-2", tiny_trace(train=True), train)
    write_run(root, "tiny-inf-8-2-fusion", summary=inf)  # torch.compile run: not a trace
    write_run(root, "tiny-train-8-2-tp4", summary=train)  # multi-GPU run without a trace
    return root


def test_one_row_per_trace_with_layer_block_repeated(tmp_path):
    loaded = load(fake_folder(tmp_path))
    rows = loaded.rows
    assert list(rows.columns) == ["source", *COLUMNS] and loaded.reject_counts() == {}
    assert rows[["model", "mode", "seq", "batch"]].values.tolist() == [
        ["tiny", "inf", 8, 2],
        ["tiny", "inf", 8, 4],
        ["tiny", "train", 8, 2],
    ]
    first = rows.iloc[0]
    assert first["device"] == "Fake GPU 9000" and first["dtype"] == "fp32" and first["num_layer"] == 2
    assert (first["latency_ms"], first["fw_latency_ms"], first["bw_latency_ms"]) == (4.0, 4.0, 0.0)
    ops = json.loads(first["ops"])
    assert [(o["op"], o["count"]) for o in ops] == [
        ("embedding", 1),
        ("layer_norm", 2),
        ("view", 2),
        ("addmm", 2),
        ("add", 2),  # the residual add carries no layer name but belongs to the block
        ("layer_norm", 1),
        ("linear", 1),
    ]
    assert ops[3]["input_shapes"] == [[16], [16, 16], [16, 16]] and ops[3]["output_shape"] == [16, 16]
    observed = sum(o["latency_ms"] * o["count"] for o in ops)
    assert observed == pytest.approx(first["latency_ms"], rel=0.01)
    assert all(
        OperatorSpec.model_validate({k: o[k] for k in ("op", "input_shapes", "output_shape", "count")})
        for o in ops
    )


def test_training_ops_keep_forward_and_backward_apart(tmp_path):
    train = load(fake_folder(tmp_path)).rows.iloc[2]
    addmm = next(o for o in json.loads(train["ops"]) if o["op"] == "addmm")
    assert addmm["latency_ms"] == 1.0 and addmm["bw_latency_ms"] == pytest.approx(
        1.05
    )  # backward + accumulation
    assert (train["fw_latency_ms"], train["bw_latency_ms"]) == (3.0, 6.0)


def test_broken_runs_are_rejected_with_reasons(tmp_path):
    root = fake_folder(tmp_path)
    write_run(root, "tiny-inf-16-2", tiny_trace(seq=16))  # no json beside it
    write_run(root, "tiny-inf-32-2", tiny_trace(seq=32), {"num_layer": 2, "fw_latency": 1.0})
    loaded = load(root)
    assert len(loaded.rows) == 3
    assert loaded.reject_counts() == {"no .json beside the trace": 1, "json lacks e2e_latency": 1}
    assert sorted(loaded.rejects["file"]) == [
        f"traces/{GPU}/tiny-inf-16-2.csv",
        f"traces/{GPU}/tiny-inf-32-2.csv",
    ]


@pytest.mark.parametrize(
    "change, reason",
    [
        (lambda t: t.drop(columns="output_shape"), "csv lacks columns ['output_shape']"),
        (
            lambda t: t.assign(target=t["target"].str.replace("h.0.", "blk.")),
            "no layer-0 module in the trace",
        ),
        (
            lambda t: t.assign(target=t["target"].str.replace("h.0.ln_1", "h.1.ln_1")),
            "trace holds more than layer 0",
        ),
        (
            lambda t: t.assign(target=t["target"].replace({"view": "fft"})),
            "operator 'fft' not in the vocabulary",
        ),
        (lambda t: t.assign(fw_latency=-1.0), "operator latency not a non-negative number"),
        (lambda t: t.assign(dtype=["torch.float16"] + ["torch.float32"] * (len(t) - 1)), "float dtype mixed"),
    ],
)
def test_malformed_traces_are_rejected(tmp_path, change, reason):
    root = fake_folder(tmp_path)
    write_run(root, "tiny-inf-64-2", change(tiny_trace(seq=64)), {"num_layer": 2, "e2e_latency": 5.0})
    loaded = load(root)
    assert len(loaded.rows) == 3 and len(loaded.rejects) == 1 and reason in loaded.rejects["reason"][0]


def test_a_folder_without_traces_is_a_data_error(tmp_path):
    with pytest.raises(DataError, match="no traces/ folder"):
        load(tmp_path)
    (tmp_path / "traces" / GPU).mkdir(parents=True)
    write_run(tmp_path, "tiny-inf-8-2", summary={"num_layer": 2, "e2e_latency": 1.0})
    with pytest.raises(DataError, match="no traces"):
        load(tmp_path)


def test_mostly_broken_folder_is_refused(tmp_path):
    write_run(tmp_path, "tiny-inf-8-2", tiny_trace())
    with pytest.raises(DataError, match="1 of 1 rows are bad"):
        load(tmp_path)


def test_checksum_covers_every_file_read(tmp_path):
    root = fake_folder(tmp_path)
    before = load(root).sha256
    assert load(root).sha256 == before
    (root / "traces" / GPU / "tiny-inf-8-4.json").write_text(json.dumps({"num_layer": 2, "e2e_latency": 7.6}))
    changed = load(root).sha256
    (root / "device_configs" / f"{GPU}.json").write_text(json.dumps(SPEC | {"Freq": 1600}))
    assert len({before, changed, load(root).sha256}) == 3


def test_device_name_falls_back_to_the_directory(tmp_path):
    write_run(tmp_path, "tiny-inf-8-2", tiny_trace(), {"num_layer": 2, "e2e_latency": 3.9}, gpu="Tesla_X1")
    assert load(tmp_path).rows["device"].tolist() == ["Tesla X1"]
    (tmp_path / "device_configs").mkdir()
    (tmp_path / "device_configs" / "Tesla_X1.json").write_text("{not json")
    with pytest.raises(DataError, match="device_configs json not readable"):
        load(tmp_path)


def test_device_specs_describe_gpus_the_catalogue_lacks(tmp_path, catalogue):
    root = fake_folder(tmp_path)
    (root / "device_configs" / "Other_TP.json").write_text(json.dumps(SPEC | {"Device": "Other"}))
    (spec,) = device_specs(root)  # a sheet without traces is left out
    assert spec.id == "fake-gpu-9000" and spec.kind == "gpu" and spec.vendor == "unknown"
    assert spec.aliases == ["Fake GPU 9000", GPU] and spec.compute_units == 60
    assert (spec.boost_clock_mhz, spec.memory_gb, spec.memory_bandwidth_gbs, spec.llc_mb) == (
        1500,
        24,
        900,
        6,
    )
    assert spec.peak_tflops == {"fp32": pytest.approx(11.52)}
    with pytest.raises(UnknownDevice):
        catalogue.resolve("Fake GPU 9000")
    Catalogue(list(catalogue)).register(spec, persist=False)


def test_device_specs_read_vendor_and_matrix_peak(tmp_path):
    amd = {"Device": "AMD Instinct MI100", "Num_Sm": 120, "SingleFLOPsMM": 46100, "SingleFLOPsVEC": 23100}
    (tmp_path / "device_configs").mkdir()
    (tmp_path / "device_configs" / "AMD_Instinct_MI100.json").write_text(json.dumps(amd))
    (tmp_path / "traces" / "AMD_Instinct_MI100").mkdir(parents=True)
    (spec,) = device_specs(tmp_path)
    assert spec.vendor == "amd" and spec.peak_tflops == {"fp32": pytest.approx(46.1)}
    (tmp_path / "device_configs" / "AMD_Instinct_MI100.json").write_text(json.dumps(amd | {"Num_Sm": -1}))
    with pytest.raises(DataError, match="not a usable spec sheet"):
        device_specs(tmp_path)


# --- the published traces --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def published():
    root = SHARED_DATASETS / "gemm" / "neusight"
    if not (root / "traces").is_dir():
        pytest.skip(f"gemm/neusight/traces not found under {SHARED_DATASETS} (set PREFLIGHT_DATASETS)")
    return root, load(root)


def trace_ops(row) -> list[OperatorSpec]:
    fields = ("op", "input_shapes", "output_shape", "count")
    return [OperatorSpec(**{k: o[k] for k in fields}) for o in json.loads(row["ops"])]


@pytest.mark.integration
def test_published_traces_load_whole(published):
    root, loaded = published
    assert len(loaded.rows) == 69 and loaded.reject_counts() == {}
    assert loaded.rows["device"].nunique() == 8 and set(loaded.rows["dtype"]) == {"fp32"}
    assert set(loaded.rows["model"]) == {"bert_large", "gpt2_large", "gpt3_xl", "gpt3_27", "opt_13"}
    specs = device_specs(root)
    assert len(specs) == 9 and not any("H100" in s.name for s in specs)


@pytest.mark.integration
def test_config_ops_match_the_traced_gemm_flops(published):
    _, loaded = published
    for _, row in loaded.rows.iterrows():
        config = known_configs()[row["model"]]
        if config["model_type"] == "bert":
            config["architectures"] = [BERT_HEADS[row["mode"]]]
        for mode in ("inf", "train"):
            traced, synthesised = (
                kernels(trace_ops(row), mode),
                kernels(config_ops(config, row["batch"], row["seq"]), mode),
            )
            flops = [(t["flops"] * t["count"])[t["kind"] == "gemm"].sum() for t in (traced, synthesised)]
            assert flops[1] == pytest.approx(flops[0], rel=0.02), (
                row["device"],
                row["model"],
                row["mode"],
                mode,
            )


@pytest.mark.integration
def test_per_operator_latencies_add_up_to_inference_end_to_end(published):
    _, loaded = published
    inference = loaded.rows[loaded.rows["mode"] == "inf"]
    ratios = [
        sum(o["latency_ms"] * o["count"] for o in json.loads(ops)) / e2e
        for ops, e2e in zip(inference["ops"], inference["latency_ms"])
    ]
    assert 0.97 < np.median(ratios) < 1.05 and min(ratios) > 0.9 and max(ratios) < 1.6
