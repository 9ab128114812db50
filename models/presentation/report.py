"""``preflight report``: where a model version errs, as one self-contained HTML page (figures embedded as
PNG) beside the PNGs themselves, for a reviewer deciding whether to trust or promote it."""

from __future__ import annotations

import base64
import html
import io
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure
from preflight.models.presentation import progress
from preflight.models.presentation.analysis import Evaluation
from preflight.models.registry.tracking import ModelInfo

#: Rows of the worst-cases table.
WORST = 10

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
h1 { font-size: 1.6em; } h2 { margin-top: 2em; border-bottom: 1px solid #ccc; } h3 { margin-top: 1.5em; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: right; }
th { background: #f3f3f3; } td:first-child, th:first-child { text-align: left; }
.figures { display: flex; flex-wrap: wrap; gap: 12px; align-items: flex-start; }
.figures img { max-width: 540px; border: 1px solid #eee; }
.note { color: #555; font-size: 0.9em; }
"""


@dataclass
class Candidate:
    """A model version and its re-run evaluation."""

    info: ModelInfo
    evaluation: Evaluation
    champion: bool

    @property
    def title(self) -> str:
        role = "champion" if self.champion else "challenger"
        return f"v{self.info.version} ({self.info.family}, {role})"


@dataclass
class Report:
    html: str
    figures: dict[str, bytes]  # file name -> PNG

    def write(self, out: Path) -> list[Path]:
        """``out/index.html`` and each figure as ``out/NAME.png``; returns the files, the page first."""
        out.mkdir(parents=True, exist_ok=True)
        page = out / "index.html"
        page.write_text(self.html, encoding="utf-8")
        for name, png in self.figures.items():
            (out / name).write_bytes(png)
        return [page, *(out / name for name in self.figures)]


def build(subject: Candidate, other: Candidate | None = None) -> Report:
    """The page for ``subject``, with ``other`` (the champion, or a challenger) side by side."""
    evaluation = subject.evaluation
    task = evaluation.task
    figures: dict[str, bytes] = {}
    sections = [_summary(subject, other), _metrics(subject, other)]
    for target in progress.track(evaluation.targets, f"{task.name} v{subject.info.version}: figures"):
        pngs = {f"{target}_{name}.png": _png(fig) for name, fig in evaluation.figures(target).items()}
        figures |= pngs
        sections.append(_target_section(evaluation, target, pngs))
    if other is not None:
        with progress.step(f"{task.name}: v{subject.info.version} beside v{other.info.version}"):
            pngs = _comparison_figures(subject, other)
        figures |= pngs
        sections.append(_comparison_section(subject, other, pngs))
    title = f"preflight report: {task.name} v{subject.info.version}"
    page = (
        f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{STYLE}</style></head><body><h1>{html.escape(title)}</h1>{''.join(sections)}</body></html>"
    )
    return Report(page, figures)


def _summary(subject: Candidate, other: Candidate | None) -> str:
    evaluation = subject.evaluation
    outcome = evaluation.outcome
    facts = {
        "model": f"{subject.info.name} {subject.title}",
        "run": subject.info.run_id,
        "evaluation": f"grouped cross-validation by {evaluation.split}: every fold holds out whole groups",
        "data": f"{evaluation.source}: {len(outcome.y):,} rows in {outcome.groups.nunique():,} groups",
        "baseline": evaluation.task.baseline,
        "interval": f"{evaluation.coverage:.0%} nominal coverage",
        "out of distribution": f"{evaluation.ood_rate:.1%} of the rows",
        "compared with": other.title if other else "no other version registered",
        "made": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }
    rows = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in facts.items())
    return f"<table>{rows}</table>"


def _metrics(subject: Candidate, other: Candidate | None) -> str:
    evaluation = subject.evaluation
    table = evaluation.metrics().rename(
        columns={"model": subject.title, "baseline": evaluation.task.baseline}
    )
    if other is not None:
        table[other.title] = other.evaluation.metrics()["model"]
    note = (
        "<p class='note'>Percentages are in percent; coverage is the share of measurements inside "
        "their interval; the baseline is fitted on the same folds.</p>"
    )
    return f"<h2>Metrics</h2>{_table(table)}{note}"


def _target_section(evaluation: Evaluation, target: str, pngs: dict[str, bytes]) -> str:
    worst = evaluation.worst(target, WORST).drop(columns=["warnings"])
    by = evaluation.focus(target)
    return (
        f"<h2>{html.escape(target)}</h2><div class='figures'>{''.join(_img(n, p) for n, p in pngs.items())}"
        f"</div><h3>Worst {len(worst)} rows ({html.escape(evaluation.error_name(target))})</h3>"
        f"{_table(worst, index=False)}<h3>By {html.escape(by or evaluation.split)}, worst first</h3>"
        f"{_table(evaluation.by_group(target, by).head(15))}"
    )


def _comparison_figures(subject: Candidate, other: Candidate) -> dict[str, bytes]:
    evaluation, names = subject.evaluation, (subject.title, other.title)
    return {
        f"{target}_side_by_side.png": _png(evaluation.beside_figure(other.evaluation, names, target))
        for target in evaluation.targets
        if not evaluation.task.targets[target].kind.event
        and target in other.evaluation.targets
        and len(evaluation.beside(other.evaluation, names, target)) >= 2
    }


def _comparison_section(subject: Candidate, other: Candidate, pngs: dict[str, bytes]) -> str:
    figures = "".join(_img(name, png) for name, png in pngs.items())
    heading = f"{html.escape(subject.title)} beside {html.escape(other.title)}"
    return f"<h2>{heading}</h2><div class='figures'>{figures}</div>"


def _png(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    return buffer.getvalue()


def _img(name: str, png: bytes) -> str:
    data = base64.b64encode(png).decode()
    return f"<img alt='{html.escape(name)}' src='data:image/png;base64,{data}'>"


def _table(frame: pd.DataFrame, index: bool = True) -> str:
    return frame.to_html(index=index, float_format=lambda v: f"{v:.4g}", na_rep="–", border=0)
