"""An evaluation's tables and figures: devices by catalogue id, n per group, shares that add up."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from preflight.data.catalogue import Catalogue
from preflight.models.core.evaluate import Outcome
from preflight.models.core.predictor import Estimates
from preflight.models.core.task import get_task
from preflight.models.presentation import analysis

from tests.conftest import synthetic_gemm
from tests.models.test_plots import bars, counts, percentages, share_in_title, texts

#: Devices as sources spell them; the catalogue knows them by other ids.
RAW = ("NV_1080Ti", "NV_P100", "NV_M40")


@pytest.fixture(scope="module")
def evaluation() -> analysis.Evaluation:
    """The roofline (no fitting to speak of) cross-validated by device on GEMM rows of raw device names."""
    catalogue = Catalogue.load()
    rows = get_task("gemm").rows(synthetic_gemm(90, seed=4, devices=RAW, catalogue=catalogue))
    return analysis.cross_validated(get_task("gemm"), rows, catalogue, "roofline", "device", "synthetic")


def test_worst_names_devices_by_catalogue_id_as_its_groups_and_warnings_do(evaluation):
    worst = evaluation.worst(n=len(evaluation.table()))
    catalogue = Catalogue.load()
    assert set(worst["device"]) == {catalogue.resolve(name).id for name in RAW}
    assert (worst["device"] == worst["group"]).all()  # split by device: the group is the device
    assert all(f"unseen:device_id={d}" in w for d, w in zip(worst["device"], worst["warnings"]))


def test_every_per_group_figure_gives_each_groups_rows(evaluation):
    figures = evaluation.figures()
    per_group = [name for name in figures if "_by_" in name]
    assert {"error_by_device", "coverage_by_device", "ood_by_device"} <= set(per_group)
    figures["beside"] = evaluation.beside_figure(evaluation, ("champion", "challenger"))
    for name in [*per_group, "beside"]:
        grouping = "device" if name == "beside" else name.split("_by_")[1]
        assert counts(figures[name]) == evaluation.by_group(grouping=grouping)["rows"].to_dict(), name


def test_no_figure_shows_a_percentage_twice_over(evaluation):
    figures = evaluation.figures()
    assert "nominal 90%" in texts(figures["coverage_by_device"])
    for name, fig in figures.items():
        assert max(percentages(fig), default=0) <= 100, name


def few_ood_rows() -> analysis.Evaluation:
    """250 measured rows on two devices (5 and 245 rows), one out of distribution (0.4%); 10 more rows
    without a measurement, all out of distribution."""
    device = ["apple-a8"] * 5 + ["nvidia-tesla-m40"] * 255
    measured = np.r_[np.ones(250), np.full(10, np.nan)]
    value = pd.DataFrame({"runtime_ms": np.full(260, 1.1)})
    low, high = value / 2, value * 2
    reasons = [["unseen:device_id=apple-a8"]] + [[]] * 249 + [["range:m"]] * 10
    outcome = Outcome(
        y=pd.DataFrame({"runtime_ms": measured}),
        model=Estimates(value, low, high, reasons),
        baseline=Estimates(value, low, high, [[]] * 260),
        groups=pd.Series(device),
        test_index=np.arange(260),
        n_train=200,
        meta=pd.DataFrame({"device_id": device}),
        levels={level: (low, high) for level in analysis.LEVELS},
    )
    inputs = pd.DataFrame({"m": 64, "n": 64, "k": 64, "device": device})
    return analysis.Evaluation(get_task("gemm"), "physics", "synthetic", "device", 0.9, outcome, inputs)


def test_ood_title_gives_the_share_its_bars_show():
    fig = few_ood_rows().figures()["ood_by_device"]
    assert share_in_title(fig) == 0.4  # 1 of the 250 rows drawn
    shown = bars(fig)
    assert shown["rows"].to_dict() == {"apple-a8": 5, "nvidia-tesla-m40": 245}
    plotted = (shown["width"] * shown["rows"]).sum() / shown["rows"].sum()
    assert plotted == pytest.approx(0.4)
