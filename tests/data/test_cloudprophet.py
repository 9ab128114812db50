import pytest
from preflight.data import sources
from preflight.data.sources import cloudprophet

from tests.conftest import shared_file, write

HEADER = (
    "exp,vm,app_id,app,config,ts,te,duration_s,perf_metric,perf_value,extra,corun_overlap_s_web_serving,"
    "corun_overlap_s_media_streaming,corun_overlap_s_inmem_analytics,corun_overlap_s_data_serving,"
    "corun_overlap_s_redis,corun_load_avg"
)


def run(app: str, metric: str, value: str, duration: str = "100", overlaps: str = "0,0,0,0,0") -> str:
    return f"exp_v01,vm01,app01,{app},cfg,0,100,{duration},{metric},{value},,{overlaps},1.0"


GOOD = [
    run("data_serving", "ycsb_runtime_ms", "100", overlaps="150,33.3,0,0,0"),
    run("data_serving", "ycsb_runtime_ms", "200", overlaps="0,0,0,0,200"),
    run("redis", "mean_requests_per_s", "500"),
    run("redis", "mean_requests_per_s", "1000"),
    run("web_serving", "faban_ops_per_sec", "10"),
]
BAD = [
    run("data_serving", "ycsb_runtime_ms", "-5"),  # would move the 5th percentile if it counted
    run("inmem_analytics", "exec_time_ms", ""),
    run("redis", "mean_requests_per_s", "800", duration="0"),
    run("redis", "p99_us", "3"),
]


def load(tmp_path):
    return sources.load("cloudprophet", write(tmp_path, "runs.csv", [HEADER, *GOOD, *BAD]))


def test_norm_perf_follows_each_metric_direction(tmp_path):
    norm_perf = load(tmp_path).rows.groupby("workload")["norm_perf"].apply(list)
    fast = 100 + 0.05 * 100  # 5th percentile of the runtimes 100 and 200
    best = 500 + 0.95 * 500  # 95th percentile of the rates 500 and 1000
    assert norm_perf["data_serving"] == pytest.approx([fast / 100, fast / 200])  # faster scores higher
    assert norm_perf["redis"] == pytest.approx([500 / best, 1000 / best])  # higher rate scores higher
    assert norm_perf["web_serving"] == [1.0]


def test_neighbours_are_average_co_runner_counts(tmp_path):
    rows = load(tmp_path).rows
    assert rows["mix"].tolist()[:3] == ["media_streaming=0.33,web_serving=1.5", "redis=2", "alone"]
    assert rows[["host", "session"]].drop_duplicates().values.tolist() == [["vm01", "exp_v01"]]
    assert rows.filter(like="solo_").isna().all().all() and rows["load_rps"].isna().all()


def test_bad_rows_are_rejected_with_reasons(tmp_path):
    loaded = load(tmp_path)
    assert len(loaded.rows) == len(GOOD)
    assert loaded.reject_counts() == {
        "perf_value missing or not positive": 2,
        "duration_s not positive": 1,
        "perf_metric of unknown direction": 1,
    }
    assert loaded.rejects["row"].tolist() == list(range(len(GOOD), len(GOOD) + len(BAD)))


def test_shared_file_loads_with_plausible_norm_perf():
    loaded = sources.load("cloudprophet", shared_file(cloudprophet.FILE))
    rows = loaded.rows
    assert len(rows) + len(loaded.rejects) == 3117 and len(loaded.rejects) < 100
    assert set(rows["workload"]) == set(cloudprophet.KINDS)
    assert rows["norm_perf"].gt(0).all() and rows["norm_perf"].le(1.5).all()
    assert rows.groupby("workload")["norm_perf"].median().between(0.1, 1.0).all()
