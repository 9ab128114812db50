"""``preflight report``'s slow steps (the evaluation, the figures) on the progress bars, only when asked."""

from __future__ import annotations

import io
from pathlib import Path

from preflight.data.catalogue import Catalogue
from preflight.data.settings import Settings
from preflight.models.core.task import get_task
from preflight.models.presentation import analysis, progress, report
from preflight.models.registry.tracking import ModelInfo
from rich.console import Console

from tests.conftest import synthetic_gemm
from tests.service.test_cli import deepbench_layout


def candidates(settings: Settings, folder: Path) -> tuple[report.Candidate, report.Candidate]:
    """Versions 1 (the champion) and 2 of GEMM, each the roofline cross-validated by device on a small
    DeepBench-layout file, as the report loads and evaluates them."""
    catalogue = Catalogue.load()
    task = get_task("gemm")
    rows = synthetic_gemm(60, seed=5, devices=("NV_P100", "NV_M40", "AMD_MI25"), catalogue=catalogue)
    files = {"deepbench": deepbench_layout(rows, folder / "deepbench.csv")}
    loaded, _ = analysis.rows_for(task, settings, catalogue, files, max_rows=None, seed=0)
    evaluation = analysis.cross_validated(task, loaded, catalogue, "roofline", "device", "deepbench")
    champion = report.Candidate(ModelInfo("preflight.gemm", "1", "run1", "roofline"), evaluation, True)
    challenger = report.Candidate(ModelInfo("preflight.gemm", "2", "run2", "roofline"), evaluation, False)
    return champion, challenger


def test_report_shows_its_loading_evaluation_and_figures_on_a_terminal(settings, tmp_path):
    screen = io.StringIO()
    with progress.shown(Console(file=screen, force_terminal=True, width=120)):
        champion, challenger = candidates(settings, tmp_path)
        page = report.build(challenger, champion)
    drawn = screen.getvalue()
    steps = (
        "gemm: loading deepbench",
        "gemm roofline: grouped cross-validation by device",
        "gemm v2: figures",
        "gemm: v2 beside v1",
    )
    for step in steps:
        assert step in drawn
    assert "preflight report: gemm v2" in page.html


def test_report_draws_nothing_unless_asked(settings, tmp_path, capsys):
    champion, challenger = candidates(settings, tmp_path)
    report.build(challenger, champion)
    assert capsys.readouterr() == ("", "")
