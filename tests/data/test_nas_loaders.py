import json

import pandas as pd
import pytest
from preflight.data import sources
from preflight.data.errors import DataError

from tests.conftest import shared_file

NB201 = "|nor_conv_3x3~0|+|nor_conv_3x3~0|avg_pool_3x3~1|+|skip_connect~0|none~1|nor_conv_1x1~2|"
NB201_B = "|skip_connect~0|+|nor_conv_3x3~0|avg_pool_3x3~1|+|skip_connect~0|none~1|nor_conv_1x1~2|"


def test_help_columns_become_device_settings(tmp_path):
    path = tmp_path / "help.csv"
    pd.DataFrame(
        {
            "arch_idx": [0, 1, 2],
            "arch_str": [NB201, NB201_B, "|bogus~0|"],
            "lat_1080ti_32": [3.0, 4.0, 5.0],
            "lat_essential_ph_1": [40.0, 41.0, 42.0],
            "lat_gold_6240": [9.0, 8.0, 7.0],
        }
    ).to_csv(path, index=False)
    loaded = sources.load("help-nb201", path)
    rows = loaded.rows
    settings = set(zip(rows["device"], rows["batch_size"]))
    assert settings == {
        ("1080ti", 32),
        ("essential_ph_1", 1),
        ("gold_6240", 1),
    }  # the phone's name ends in _1
    assert len(rows) == 6 and loaded.reject_counts() == {"nb201 architecture does not parse": 3}


def test_hw_nas_bench_reads_arch_strings_from_its_side_file_and_scales_by_task(tmp_path):
    pd.DataFrame({"arch_idx": [0, 1], "arch_str": [NB201, NB201_B]}).to_csv(
        tmp_path / "nb201_index_to_arch_str.csv", index=False
    )
    pd.DataFrame(
        {
            "arch_idx": [0, 1, 0, 1, 5],
            "rep_arch_idx": [0, 0, 0, 0, 5],
            "device": "pi5",
            "framework": "onnx",
            "task": ["cifar100", "cifar100", "darcy", "darcy", "darcy"],
            "lat_ms_median": [1.5, 1.6, 2.0, 2.1, 2.2],
            "lat_ms_var": 0.1,
            "energy_mj": [2.5, 2.6, 3.0, 3.1, 3.2],
            "accuracy": [52.0, 61.0, 0.9, -0.5, 0.8],
            "status": "ok",
        }
    ).to_parquet(tmp_path / "hw.parquet")
    loaded = sources.load("hw-nas-bench-360", tmp_path / "hw.parquet")
    assert loaded.rows["accuracy"].tolist() == pytest.approx(
        [0.52, 0.61, 0.9, -0.5]
    )  # percent for cifar100 only
    assert loaded.rows["arch_group"].tolist() == ["0"] * 4
    assert loaded.reject_counts() == {"arch_idx not in nb201_index_to_arch_str.csv": 1}


def test_hw_nas_bench_without_its_side_file_is_refused(tmp_path):
    pd.DataFrame(
        {c: [0] for c in ["arch_idx", "rep_arch_idx", "lat_ms_median", "energy_mj", "accuracy"]}
    ).assign(device="pi5", framework="onnx", task="cifar100", status="ok").to_parquet(tmp_path / "hw.parquet")
    with pytest.raises(DataError, match="no file"):
        sources.load("hw-nas-bench-360", tmp_path / "hw.parquet")


def test_nas_bench_graph_and_ec_nas(tmp_path):
    graph = tmp_path / "g.csv"
    pd.DataFrame(
        {
            "dataset": "cora",
            "arch_hash": [0, 1, 2],
            "link": ["0-0-1-3", "0-0-0-0", "0-3-1-1"],
            "op1": "gat",
            "op2": "gcn",
            "op3": "gin",
            "op4": "sage",
            "valid_perf": 0.8,
            "test_perf": 0.79,
            "latency_s": 0.005,
            "params_M": 1.2,
        }
    ).to_csv(graph, index=False)
    loaded = sources.load("nas-bench-graph", graph)
    assert loaded.rows["latency_ms"].tolist() == pytest.approx([5.0, 5.0])
    assert json.loads(loaded.rows["arch"][0]) == {"link": "0-0-1-3", "ops": ["gat", "gcn", "gin", "sage"]}
    assert loaded.reject_counts() == {"nasbench-graph architecture does not parse": 1}

    ec = tmp_path / "ec.csv"
    cell = {
        "adjacency": json.dumps([[0, 1, 1], [0, 0, 1], [0, 0, 0]]),
        "ops": json.dumps(["input", "maxpool3x3", "output"]),
    }
    pd.DataFrame(
        [
            cell
            | {
                "space": "4V9E",
                "arch_hash": "a",
                "repeat": "repeat_1",
                "epoch": e,
                "train_acc": 0.1 * e,
                "val_acc": 0.1 * e,
                "test_acc": 0.1 * e + 0.01,
                "energy_kwh_at_epoch": 0.001 * (e + 1),
                "gpu_device": "Quadro RTX 6000",
            }
            for e in (0, 1, 2, 4)
        ]
    ).to_csv(ec, index=False)
    curve = sources.load("ec-nas", ec).rows
    assert curve["epoch"].tolist() == [0, 1, 2, 4] and curve["space"].unique().tolist() == ["nb101"]
    assert curve["run"].unique().tolist() == ["4V9E/a/repeat_1"] and (curve["budget"] == 4).all()


@pytest.mark.integration
@pytest.mark.parametrize(
    "source, relative, rows",
    [
        ("help-nb201", "nas/help_nb201_latency.csv", 15_625 * 21),
        ("help-fbnet", "nas/help_fbnet_latency.csv", 5_000 * 21),
        ("hw-nas-bench-360", "nas/hw_nas_bench_360.parquet", 187_500),
        ("nas-bench-graph", "nas/nas_bench_graph_light.csv", 211_669),
        ("ec-nas", "nas/ec_nas_bench_energy.csv", 8_415),
    ],
)
def test_published_nas_files_load_whole(source, relative, rows):
    loaded = sources.load(source, shared_file(relative))
    assert len(loaded.rows) == rows and loaded.reject_counts() == {}
