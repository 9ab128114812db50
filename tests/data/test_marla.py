"""The MARLA loader: interference names as neighbour multisets, solo profiles, traces beside the file."""

import numpy as np
import pandas as pd
import pytest
from preflight.data.interference import TRACE_CHANNELS, mix_label, parse_mix
from preflight.data.sources import marla
from preflight.features.interference import before_placement, trace

from tests.conftest import shared_file
from tests.interference import STEPS, clock, write_marla


@pytest.mark.parametrize(
    ("name", "neighbours"),
    [
        ("Baseline2", {}),
        ("1_iBench_CPU_pod", {"cpu": 1}),
        ("3_stress-ng_l3_pods", {"l3": 3}),
        ("4_iBench_memBW_pods", {"membw": 4}),
        ("1_L3_3_MemBW", {"l3": 1, "membw": 3}),
        ("2_CPU_1_L3", {"cpu": 2, "l3": 1}),
        ("2_GPU_pods", None),
        ("CPU_2", None),
        ("1_CPU_junk", None),
    ],
)
def test_interference_names_become_neighbour_counts(name, neighbours):
    assert marla.parse_interference_name(name) == neighbours


def test_mix_labels_are_canonical_and_round_trip():
    label = mix_label({"membw": 3, "cpu": 1.0, "l3": 0})
    assert label == "cpu=1,membw=3" and parse_mix(label) == {"cpu": 1.0, "membw": 3.0}
    assert mix_label({}) == "alone" and parse_mix("alone") == {}


def test_rows_carry_the_session_baseline_as_solo_profile_and_their_trace(tmp_path):
    loaded = marla.load(write_marla(tmp_path))
    rows = loaded.rows
    assert len(loaded.rejects) == 0 and len(rows) == 96 and set(rows["host"]) == {"NodeA", "NodeB"}
    alone = rows[rows["mix"] == "alone"].set_index(["session", "replicas", "load_rps"])["solo_p99_ms"]
    crowded = rows[rows["mix"] == "cpu=2"].set_index(["session", "replicas", "load_rps"])["solo_p99_ms"]
    pd.testing.assert_series_equal(crowded.sort_index(), alone.sort_index())  # the baseline's own p99
    window = rows["window"].iloc[0]
    assert len(window) == STEPS and len(window[0]) == len(TRACE_CHANNELS)


def test_missing_traces_leave_no_window_and_unknown_pods_are_rejected(tmp_path):
    path = write_marla(tmp_path)
    table = pd.read_csv(path)
    table.loc[3, "Interference_Name"] = "2_GPU_pods"
    table.to_csv(path, index=False)
    first = table.iloc[0]
    (tmp_path / "marla_pcm_traces" / first["FolderID"] / f"pcm_core_{first['Test_ID']}.csv").unlink()
    loaded = marla.load(path)
    assert loaded.reject_counts() == {"Interference_Name names no known pods": 1}
    assert loaded.rows["window"].isna().sum() == 1


def test_traces_sampled_every_2_s_are_put_on_the_5_second_grid(tmp_path):
    path = write_marla(tmp_path)
    first = pd.read_csv(path).iloc[0]
    for kind in ("core", "system"):
        trace = tmp_path / "marla_pcm_traces" / first["FolderID"] / f"pcm_{kind}_{first['Test_ID']}.csv"
        table = pd.read_csv(trace)
        fast = pd.concat([table.iloc[[0]]] * 20, ignore_index=True).assign(**{"System - Time": clock(20, 2)})
        fast.to_csv(trace, index=False)
    window = np.array(marla.load(path).rows["window"].iloc[0])
    assert len(window) == 8  # 40 s of 2-second samples
    core0 = pd.read_csv(trace).iloc[0]
    misses, ipc = TRACE_CHANNELS.index("system_L3MISS"), TRACE_CHANNELS.index("system_IPC")
    np.testing.assert_allclose(window[:, misses], core0["System - L3MISS"] * 2.5)  # counts per 5 s
    np.testing.assert_allclose(window[:, ipc], core0["System - IPC"])  # rates as they are


def test_a_session_without_baselines_takes_its_nodes_profile(tmp_path):
    path = write_marla(tmp_path, sessions=("NodeA_V01", "NodeA_MIX_V02"))
    table = pd.read_csv(path)
    table = table[~((table["FolderID"] == "NodeA_MIX_V02") & (table["Interference_Name"] == "Baseline0"))]
    table.to_csv(path, index=False)
    rows = marla.load(path).rows
    assert rows["solo_p99_ms"].notna().all() and set(rows["host"]) == {"NodeA"}


def test_features_count_neighbours_and_summarise_windows(tmp_path, catalogue):
    rows = marla.load(write_marla(tmp_path)).rows
    ahead = before_placement(rows, catalogue)
    crowded = rows["mix"] == "cpu=1,l3=1"
    assert (ahead.X.loc[crowded, ["n_cpu", "n_l3", "n_total", "n_kinds"]] == [1, 1, 2, 2]).all().all()
    assert ahead.monotone["norm_perf"]["n_cpu"] == -1
    black_box = trace(rows, catalogue)
    assert black_box.sequences.values.shape == (96, STEPS, len(TRACE_CHANNELS))
    assert "mean_core0_IPC" in black_box.X and "ctx_load_rps" in black_box.X


def test_the_published_marla_rows_load_with_their_traces():
    path = shared_file(marla.FILE)
    loaded = marla.load(path)
    rows = loaded.rows
    assert len(rows) == 1752 and len(loaded.rejects) == 0
    assert rows["mix"].nunique() == 22 and rows["solo_p99_ms"].notna().all()
    assert rows["window"].notna().sum() >= 1700
