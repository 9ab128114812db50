"""Per-group figures: percentages formatted once, the title's share what the bars show, n on every group."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.text import Text
from preflight.models.core.task import get_task
from preflight.models.presentation import plots

COUNTED = re.compile(r"^(?P<label>.+) \(n=(?P<n>[\d,]+)\)$")
ROWS = pd.Series({"apple-a8": 5, "nvidia-tesla-m40": 245})


def texts(fig: Figure) -> list[str]:
    """Every text the figure shows (title, labels, tick labels, legend), laid out as when drawn."""
    fig.draw_without_rendering()
    return [t.get_text() for t in fig.findobj(Text) if t.get_text()]


def percentages(fig: Figure) -> list[float]:
    return [float(p) for text in texts(fig) for p in re.findall(r"(\d+(?:\.\d+)?)%", text)]


def counts(fig: Figure) -> dict[str, int]:
    """Each group's rows, as its tick label gives them (``apple-a8 (n=5)``), top to bottom."""
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    counted = [COUNTED.match(label) for label in labels]
    assert all(counted), labels
    return {m["label"]: int(m["n"].replace(",", "")) for m in counted if m}


def bars(fig: Figure) -> pd.DataFrame:
    """Each bar's length and its group's rows, top to bottom (one bar a group)."""
    rows = counts(fig)
    widths = [p.get_width() for p in fig.axes[0].patches if isinstance(p, Rectangle)]
    return pd.DataFrame({"width": widths, "rows": list(rows.values())}, index=list(rows))


def share_in_title(fig: Figure) -> float:
    match = re.search(r"(\d+(?:\.\d+)?)% of all rows", fig.axes[0].get_title())
    assert match, fig.axes[0].get_title()
    return float(match[1])


@pytest.mark.parametrize("nominal, shown", [(0.9, "90%"), (0.95, "95%"), (0.5, "50%")])
def test_coverage_legend_gives_the_nominal_level_once_as_a_percentage(nominal, shown):
    fig = plots.coverage_by_group(
        pd.Series({"apple-a8": 0.6, "nvidia-tesla-m40": 0.93}), ROWS, nominal, "device"
    )
    assert f"nominal {shown}" in texts(fig)
    assert max(percentages(fig)) <= 100


def test_ood_title_gives_the_share_of_all_rows_the_bars_show():
    share = pd.Series({"apple-a8": 0.2, "nvidia-tesla-m40": 0.0})  # 1 row of 250: 0.4%, not 0%
    fig = plots.ood_by_group(share, ROWS, "device")
    shown = bars(fig)
    assert shown.loc["apple-a8"].tolist() == [20, 5]
    plotted = (shown["width"] * shown["rows"]).sum() / shown["rows"].sum()
    assert share_in_title(fig) == pytest.approx(plotted, abs=0.05) == 0.4
    assert max(percentages(fig)) <= 100


@pytest.mark.parametrize(
    "share, text",
    [(0.0, "0%"), (0.0004, "<0.1%"), (0.004, "0.4%"), (0.2, "20%"), (0.9, "90%"), (1.0, "100%")],
)
def test_a_nonzero_share_never_reads_as_zero(share, text):
    assert plots.percent(share) == text


def test_every_group_bar_says_how_many_rows_it_holds():
    errors = pd.Series({"apple-a8": 40.0, "nvidia-tesla-m40": 12.0})
    paired = pd.DataFrame({"champion": errors, "challenger": errors * 2})
    figures = {
        "bars": plots.group_bars(errors, ROWS, "median APE (%)", "error by device"),
        "coverage": plots.coverage_by_group(errors / 100, ROWS, 0.9, "device"),
        "ood": plots.ood_by_group(errors / 100, ROWS, "device"),
        "side by side": plots.side_by_side(paired, ROWS, "median APE (%)", "error by device"),
    }
    for name, fig in figures.items():
        assert counts(fig) == ROWS.to_dict(), name


def test_error_by_group_counts_each_groups_rows():
    """The training run's figure (logged to MLflow) counts the rows of each group it draws."""
    devices = pd.Series(["apple-a8"] * 3 + ["nvidia-tesla-m40"] * 1200)
    y = pd.Series(np.ones(len(devices)))
    pred = pd.Series(np.where(devices == "apple-a8", 2.0, 1.1))
    fig = plots.error_by_group(
        y, pred, devices, "runtime_ms", get_task("gemm").targets["runtime_ms"], "device"
    )
    assert bars(fig)["rows"].to_dict() == {"apple-a8": 3, "nvidia-tesla-m40": 1200}
    assert "nvidia-tesla-m40 (n=1,200)" in texts(fig)
