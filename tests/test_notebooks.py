"""Every notebook runs top to bottom on a fresh clone's home after its first start (the champions
``make serve`` trained on the shipped data) and the shipped data, and every plot cell (tagged ``plot``)
shows an image."""

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).parents[1] / "notebooks").glob("*.ipynb"))


def images(cell) -> int:
    return sum("image/png" in output.get("data", {}) for output in cell.outputs)


def figures_without_image(cell) -> int:
    """Outputs that are a figure's text form only: a figure the notebook failed to draw."""
    return sum(
        str(output.get("data", {}).get("text/plain", "")).startswith("<Figure")
        and "image/png" not in output.get("data", {})
        for output in cell.outputs
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs_and_draws(path, fresh_clone_home, tmp_path, monkeypatch):
    monkeypatch.setenv("PREFLIGHT_HOME", str(fresh_clone_home))
    monkeypatch.delenv("PREFLIGHT_DATASETS", raising=False)  # the shipped data, as on a fresh clone
    notebook = nbformat.read(path, as_version=4)
    assert not any(c.get("outputs") for c in notebook.cells if c.cell_type == "code"), "outputs stripped"
    NotebookClient(
        notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    plots = [cell for cell in code if "plot" in cell.metadata.get("tags", [])]
    assert plots, "a notebook about error shows it: tag its plot cells 'plot'"
    for cell in plots:
        assert images(cell) >= 1, f"plot cell drew no image:\n{cell.source}"
    for cell in code:
        assert not figures_without_image(cell), f"a figure shown as text, not drawn:\n{cell.source}"


def test_a_plot_cell_without_an_image_is_caught():
    """The check itself: a figure shown without the inline backend is text, and fails it."""
    notebook = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell("from matplotlib.figure import Figure\nFigure()")]
    )
    NotebookClient(notebook, timeout=120, kernel_name="python3").execute()
    assert images(notebook.cells[0]) == 0
    assert figures_without_image(notebook.cells[0]) == 1
