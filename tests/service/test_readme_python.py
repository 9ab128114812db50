"""The README's Python API example (the ```python block that does ``import preflight``) runs, statement
by statement, against a home with trained champions, so an example that drifts from the API fails here.

The home is the ``home`` fixture: a private copy of ``trained_home`` (every task's champion, trained on
``tests/samples.py``), found through ``PREFLIGHT_HOME`` as the README's calls find theirs. The copy
keeps the device the example registers out of the shared trained home; ``model.evaluate`` re-runs the
champion's CV on the sample files it was trained on, which stay beside the trained home."""

import ast
import re
from pathlib import Path

import pandas as pd
import preflight
import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
#: A fenced Python block of the README, its first line's number and its body.
PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


def api_example() -> tuple[int, str]:
    """``(line, source)`` of the README's Python block that imports ``preflight``; ``line`` is the
    README line of its first statement."""
    text = README.read_text(encoding="utf-8")
    for block in PYTHON_BLOCK.finditer(text):
        if re.search(r"^import preflight$", block.group(1), re.MULTILINE):
            return text.count("\n", 0, block.start(1)) + 1, block.group(1)
    pytest.fail(f"no ```python block with `import preflight` in {README}")


def test_the_readme_python_api_example_runs(home, monkeypatch):
    monkeypatch.setenv("PREFLIGHT_HOME", str(home))
    first_line, source = api_example()
    statements = ast.parse(source, filename=str(README)).body
    assert len(statements) > 5, "the README's Python example lost its statements"
    namespace: dict = {}
    results = {}
    for statement in statements:
        line = first_line + statement.lineno - 1
        code = ast.get_source_segment(source, statement)
        try:
            if isinstance(statement, ast.Expr):
                results[code] = eval(compile(ast.Expression(statement.value), str(README), "eval"), namespace)
            else:
                exec(compile(ast.Module([statement], type_ignores=[]), str(README), "exec"), namespace)
        except Exception as error:
            pytest.fail(f"README.md line {line}: {code}\nraised {type(error).__name__}: {error}")
    # It ran on this home's registry and champion, and gave the example's answers, not empty ones.
    assert preflight.devices("lab-gpu", home=home), "the example's registered device is not in the home"
    model, evaluation = namespace["model"], namespace["evaluation"]
    assert model.settings.home == home
    assert model.info.adaptation is not None  # the example's measurement of lab-gpu adapted the champion
    answers = [value for value in results.values() if isinstance(value, pd.DataFrame)]
    assert answers and all(not frame.empty for frame in answers), results
    assert evaluation.by_group(grouping="device")["rows"].sum() > 0
