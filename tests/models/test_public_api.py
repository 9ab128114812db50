"""``import preflight``: the calls a notebook makes, against a home trained on every task's sample data."""

from __future__ import annotations

import base64
import re

import numpy as np
import pandas as pd
import preflight
import pytest
from preflight.data.errors import NotTrained, UnknownDevice, UnknownTask, UnknownVersion, UsageError
from preflight.data.settings import Settings
from preflight.models.core.task import all_tasks
from preflight.models.registry import tracking

from tests.client import api_client

H100_PCIE = {"m": 4096, "n": 4096, "k": 4096, "dtype": "fp16", "device": "NVIDIA H100 PCIe"}


def test_dir_lists_the_public_api_not_the_imports():
    listed = dir(preflight)
    assert set(preflight.__all__) <= set(listed) and "models" in listed
    assert not {"json", "Path", "log", "functools"} & set(listed)


def test_tasks_name_their_families_and_splits():
    found = {t.name: t for t in preflight.tasks()}
    assert set(found) == {t.name for t in all_tasks()}
    gemm = found["gemm"]
    assert gemm.targets["runtime_ms"] == "ms"
    assert gemm.default_family in gemm.families and "roofline" in gemm.families
    assert gemm.default_split in gemm.splits and "device" in gemm.splits


def test_devices_list_the_catalogue_or_the_one_a_name_means(tmp_path):
    everything = preflight.devices(home=tmp_path)
    assert len(everything) > 10
    (h100,) = preflight.devices("H100 SXM5", home=tmp_path)
    assert "h100" in h100.id
    with pytest.raises(UnknownDevice):
        preflight.devices("no such accelerator 9000", home=tmp_path)


def test_an_untrained_home_has_no_versions_and_says_how_to_train(tmp_path):
    assert preflight.versions("gemm", home=tmp_path).empty
    with pytest.raises(NotTrained, match="preflight train gemm"):
        preflight.load("gemm", home=tmp_path)
    with pytest.raises(UnknownTask, match="known tasks"):
        preflight.load("gemmm", home=tmp_path)


def test_a_loaded_champion_predicts_what_the_service_answers(trained_home):
    model = preflight.load("gemm", home=trained_home)
    frame = model.predict([H100_PCIE])
    assert list(frame.columns[:3]) == ["runtime_ms", "runtime_ms_low", "runtime_ms_high"]
    assert frame.loc[0, "runtime_ms_low"] <= frame.loc[0, "runtime_ms"] <= frame.loc[0, "runtime_ms_high"]
    assert frame.loc[0, "ood"]  # the sample data hold no H100 PCIe
    with api_client(trained_home) as client:
        answer = client.post("/v1/gemm/predict", json={"items": [H100_PCIE]}).json()
    assert model.records([H100_PCIE]) == answer["predictions"]
    assert answer["model"]["version"] == model.info.version


def test_items_come_as_dicts_or_a_frame(trained_home):
    model = preflight.load("gemm", home=trained_home)
    items = [H100_PCIE, H100_PCIE | {"m": 1024, "dtype": "fp32"}]
    assert model.predict(pd.DataFrame(items)).equals(model.predict(items))


def test_predict_takes_numpy_numbers_and_says_what_to_pass_instead_of_a_frame(trained_home):
    """Items built in a notebook carry NumPy's integers; a frame or a lone item gets told what to pass."""
    numpy_item = H100_PCIE | {"m": np.int64(H100_PCIE["m"]), "k": np.int32(H100_PCIE["k"])}
    answered = preflight.predict("gemm", [numpy_item], home=trained_home)
    assert answered.records == preflight.predict("gemm", [H100_PCIE], home=trained_home).records
    for wrong, says in ((pd.DataFrame([H100_PCIE]), "load\\(task\\).predict"), (H100_PCIE, "not one item")):
        with pytest.raises(UsageError, match=says):
            preflight.predict("gemm", wrong, home=trained_home)


def test_an_invalid_item_names_its_field(trained_home):
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="dtype"):
        preflight.load("gemm", home=trained_home).predict([H100_PCIE | {"dtype": "fp7"}])


def test_versions_list_the_champion_and_a_version_loads_by_number(home):
    preflight.train("gemm", family="roofline", source="local-gemm", home=home)
    versions = preflight.versions("gemm", home=home)
    assert list(versions.index) == ["2", "1"]
    assert versions.loc["1", "champion"] and not versions.loc["2", "champion"]
    assert versions.loc["2", "family"] == "roofline"
    challenger = preflight.load("gemm", version=2, home=home)
    assert (challenger.info.version, challenger.info.family) == ("2", "roofline")
    with pytest.raises(UnknownVersion, match="its versions: 2, 1"):
        preflight.load("gemm", version="7", home=home)


def test_an_evaluation_slices_the_error(tmp_path):
    evaluation = preflight.evaluate("gemm", source="local-gemm", split="shape", max_rows=150, home=tmp_path)
    table = evaluation.table()
    assert len(table) == len(evaluation.outcome.y) == 150
    assert {"measured", "predicted", "low", "high", "error", "covered", "ood", "m", "n", "k"} <= set(table)
    worst = evaluation.worst(n=5)
    assert worst["error"].is_monotonic_decreasing and len(worst) == 5
    assert evaluation.metrics().loc[("runtime_ms", "median_ape"), "model"] == pytest.approx(
        evaluation.summary()["metrics"]["runtime_ms"]["median_ape"]
    )
    calibration = evaluation.calibration()
    assert calibration["observed"].is_monotonic_increasing  # wider intervals cover more
    by_dtype = evaluation.by_group(grouping="dtype") if "dtype" in evaluation.groupings else None
    assert by_dtype is None or by_dtype["rows"].sum() == 150


def test_figures_have_labelled_axes_and_no_single_bar_chart(tmp_path):
    evaluation = preflight.evaluate("gemm", source="local-gemm", split="shape", max_rows=150, home=tmp_path)
    figures = evaluation.figures()
    assert {"predicted_vs_actual", "calibration"} <= set(figures)
    for name, figure in figures.items():
        ax = figure.axes[0]
        assert ax.get_xlabel() and (ax.get_ylabel() or ax.get_yticklabels()), name
        assert len(ax.patches) != 1, f"{name} is a single-bar chart"
        assert not any("|" in label.get_text() for label in ax.get_yticklabels()), name
    assert "(ms" in figures["predicted_vs_actual"].axes[0].get_xlabel()


def test_a_report_is_one_page_with_its_figures_and_is_logged(home, tmp_path):
    preflight.train("gemm", family="roofline", source="local-gemm", home=home)
    page = preflight.report("gemm", out=tmp_path / "report", max_rows=150, home=home)
    text = page.read_text()
    embedded = re.findall(r"src='data:image/png;base64,([^']+)'", text)
    assert len(embedded) >= 3 and all(base64.b64decode(png)[:4] == b"\x89PNG" for png in embedded)
    assert "http://" not in text and "https://" not in text  # self-contained
    assert "v1 (physics, champion)" in text and "v2 (roofline, challenger)" in text
    settings = Settings(home=home)
    champion = tracking.versions(settings, "gemm")[-1]
    logged = {a.path for a in tracking.client(settings).list_artifacts(champion["run_id"], "report")}
    assert "report/index.html" in logged


def test_a_training_file_without_its_source_is_refused_before_any_training(tmp_path):
    """``--path`` alone would train on every source at hand and never read the file."""
    with pytest.raises(UsageError, match="needs --source"):
        preflight.train("gemm", path=tmp_path / "mine.csv", home=tmp_path / "home")
    assert not (tmp_path / "home" / "mlflow.db").exists()
