import os

import pytest
from preflight.data.errors import NotTrained, UsageError
from preflight.data.sources import local_gemm
from preflight.models.core.task import get_task
from preflight.models.core.training import train
from preflight.models.registry import tracking

TASK = get_task("gemm")


def test_train_registers_a_champion_with_metrics_and_plots(settings, catalogue):
    result = train(TASK, settings, catalogue, paths={"local-gemm": local_gemm.SHIPPED})
    assert result.promotion.promoted and result.promotion.info.version == "1"
    predictor, info = tracking.load_champion(settings, "gemm")
    assert info.family == "physics" and predictor.targets == ["runtime_ms"]
    run = tracking.client(settings).get_run(info.run_id)
    assert "runtime_ms_mape" in run.data.metrics and "baseline_runtime_ms_mape" in run.data.metrics
    artifacts = {a.path for a in tracking.client(settings).list_artifacts(info.run_id, "plots")}
    assert {
        "plots/runtime_ms_predicted_vs_actual.png",
        "plots/runtime_ms_error_by_shape-kernel.png",
        "plots/runtime_ms_error_by_device.png",
    } <= artifacts


def test_champion_gate(settings):
    def version(metric, data="a", promote=False):
        run = tracking.log_run(settings, TASK, params={}, metrics={}, figures={}, tags={})
        return tracking.register(settings, TASK, run, "tree", metric, data, "grouped-cv:shape", promote)

    assert version(10.0).promoted
    assert not version(12.0).promoted  # worse on the same data
    assert version(10.0).promoted  # no worse
    assert not version(1.0, data="b").promoted  # other data: not comparable
    assert version(50.0, promote=True).promoted  # forced
    assert tracking.champion_version(settings, "gemm") == "5"


def test_loading_a_missing_champion_says_how_to_train(settings):
    with pytest.raises(NotTrained, match="preflight train gemm"):
        tracking.load_champion(settings, "gemm")


def test_a_family_the_task_does_not_list_is_refused(settings, catalogue):
    with pytest.raises(UsageError, match="its families: physics, tree, roofline"):
        train(TASK, settings, catalogue, family="crystal-ball", paths={"local-gemm": local_gemm.SHIPPED})


def test_nas_families_both_registered_and_the_higher_kendall_is_champion(settings, catalogue, tmp_path):
    """Both NAS families train on the same data and split; the gate compares Kendall tau (higher wins)."""
    from tests.nas import write_hw_nas_bench

    task = get_task("nas-accuracy")
    paths = {"hw-nas-bench-360": write_hw_nas_bench(tmp_path / "nas", n=80)}
    results = {
        family: train(task, settings, catalogue, family=family, paths=paths) for family in ("tree", "gnn")
    }
    kendall = {f: r.report["metrics"]["accuracy"]["kendall"] for f, r in results.items()}
    versions = tracking.client(settings).search_model_versions("name='preflight.nas-accuracy'")
    assert sorted(v.tags["family"] for v in versions) == ["gnn", "tree"]
    assert all(v.tags["metric"] == "kendall" for v in versions)
    assert results["gnn"].promotion.promoted == (kendall["gnn"] >= kendall["tree"])
    assert tracking.load_champion(settings, "nas-accuracy")[1].family == max(kendall, key=kendall.get)


def test_many_clients_set_up_the_home_and_mlflow_once(settings, monkeypatch):
    checked = []
    monkeypatch.setattr(tracking, "_refuse_lost_registry", checked.append)
    tracking.client(settings)
    monkeypatch.delenv("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", raising=False)
    clients = [tracking.client(settings) for _ in range(5)]
    assert checked == [settings.home.resolve()]  # the lost-registry check ran for the first client only
    assert "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR" not in os.environ  # not written again per client
    assert {c.tracking_uri for c in clients} == {settings.tracking_uri}
