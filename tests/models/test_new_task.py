"""A new task is one module: a toy task defined in a temporary module of the tasks package (its item,
one loader, one featurizer, an action of its own, the Task) trains, evaluates, registers in MLflow and
serves over HTTP, through the Python API and the CLI, with no other file changed. Its target is a count
that is often 0 (as an FPGA design's DSP blocks); its action picks the box that holds the most."""

import json
import sys
import textwrap

import numpy as np
import pandas as pd
import preflight
import pytest
from fastapi.testclient import TestClient
from preflight.data import sources
from preflight.data.settings import Settings
from preflight.models.core import task as registry
from preflight.models.registry import tracking
from preflight.service.app import create_app
from preflight.service.cli import app
from typer.testing import CliRunner

TOY_MODULE = textwrap.dedent('''
    """A toy task: how many items a box of size x holds, per colour of box."""

    from pathlib import Path

    import numpy as np
    import pandas as pd
    from pydantic import BaseModel, ConfigDict, Field

    from preflight.data import sources
    from preflight.data.tables import Loaded, RowChecks, file_sha256, numeric, read_csv
    from preflight.features import Features
    from preflight.models.core.actions import Action, ModelInfoPublic, Served
    from preflight.models.core.inference import predict_items
    from preflight.models.core.targets import Target
    from preflight.models.core.task import Task, register


    class BoxItem(BaseModel):
        model_config = ConfigDict(extra="forbid")
        size: float = Field(gt=0)
        colour: str = Field(min_length=1)


    def load(path: Path) -> Loaded:
        raw = read_csv(path, ["size", "colour", "count"], "toy-boxes")
        rows = pd.DataFrame({"size": numeric(raw, "size"), "colour": raw["colour"].astype(str),
                             "count": numeric(raw, "count")})
        checks = RowChecks(len(rows))
        checks.reject(~(rows["size"] > 0), "size not positive")
        return checks.finish("toy-boxes", rows, file_sha256(path), path)


    def featurize(rows: pd.DataFrame, catalogue) -> Features:
        X = pd.DataFrame({"size": rows["size"].to_numpy(dtype=float)})
        return Features(X, pd.DataFrame({"count": np.nan}, index=X.index),
                        pd.DataFrame({"colour": rows["colour"].astype(str).to_numpy()}))


    class Boxes(BaseModel):
        model_config = ConfigDict(extra="forbid")
        boxes: list[BoxItem] = Field(min_length=1)


    class Roomiest(BaseModel):
        model: ModelInfoPublic
        best: int
        counts: list[float]


    def roomiest(served: Served, body: Boxes) -> Roomiest:
        """The box that holds the most.

        Each box's predicted count, and the index of the largest."""
        records = predict_items(served.task, served.predictor, served.catalogue, body.boxes, 0.9).records()
        counts = [r["count"]["value"] for r in records]
        return Roomiest(model=served.model(), best=counts.index(max(counts)), counts=counts)


    sources.register("toy-boxes", load, "toy/boxes.csv")
    register(Task(name="toy", item=BoxItem, sources=("toy-boxes",), featurize=featurize,
                  targets={"count": Target("items", "log1p", lower=0, zero_ok=True)},
                  groups={"colour": ("colour",)}, group_key="colour", families=("tree", "linear"),
                  default_family="tree", baseline="linear", metric="mae",
                  examples=({"size": 2.0, "colour": "red"},),
                  device_column=None, stratum_column=None,
                  actions=(Action("roomiest", "/v1/toy/roomiest", Boxes, Roomiest, roomiest),)))
''')


@pytest.fixture
def toy_task(tmp_path, monkeypatch):
    """The toy module in a folder added to the tasks package's path; removed again afterwards."""
    import preflight.models.tasks as package

    folder = tmp_path / "more_tasks"
    folder.mkdir()
    (folder / "toy.py").write_text(TOY_MODULE)
    monkeypatch.setattr(package, "__path__", [*package.__path__, str(folder)])
    yield
    registry.TASKS.pop("toy", None)
    sources.LOADERS.pop("toy-boxes", None)
    sys.modules.pop("preflight.models.tasks.toy", None)


def write_boxes(datasets):
    rng = np.random.default_rng(0)
    size = rng.uniform(0.1, 10, 400)
    colour = rng.choice(["red", "green", "blue", "grey", "white"], 400)
    count = np.floor(size**1.5 * rng.lognormal(0, 0.05, 400) / 3)  # a third of the boxes hold nothing
    (datasets / "toy").mkdir(parents=True)
    pd.DataFrame({"size": size, "colour": colour, "count": count}).to_csv(
        datasets / "toy" / "boxes.csv", index=False
    )
    return (count == 0).mean()


def test_a_task_in_one_module_trains_evaluates_registers_and_serves(toy_task, tmp_path, monkeypatch):
    zeros = write_boxes(tmp_path / "datasets")
    assert zeros >= 0.2
    monkeypatch.setenv("PREFLIGHT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PREFLIGHT_DATASETS", str(tmp_path / "datasets"))
    assert "toy" in [t.name for t in registry.all_tasks()]
    runner = CliRunner()

    trained = runner.invoke(app, ["train", "toy", "--json"])
    assert trained.exit_code == 0, trained.output
    assert json.loads(trained.stdout)["champion"] is True
    settings = Settings()
    assert tracking.champion_version(settings, "toy") is not None  # registered as preflight.toy@champion

    evaluated = runner.invoke(
        app, ["evaluate", "toy", "--source", "toy-boxes", "--split", "colour", "--json"]
    )
    assert evaluated.exit_code == 0, evaluated.output
    report = json.loads(evaluated.stdout)
    assert report["baseline"]["name"] == "linear" and report["metrics"]["count"]["mae"] < 1.5

    with TestClient(create_app(settings)) as client:
        assert "toy" in {t["name"] for t in client.get("/v1/tasks").json()}
        answer = client.post(
            "/v1/toy/predict",
            json={"items": [{"size": 0.2, "colour": "red"}, {"size": 9.0, "colour": "pink"}]},
        )
        assert answer.status_code == 200, answer.text
        small, large = (p["count"] for p in answer.json()["predictions"])
        assert small["low"] == 0 and small["value"] < 0.5  # zeros were learned, and no bound goes below 0
        assert large["low"] <= large["value"] <= large["high"] and large["value"] > 5
        refused = client.post("/v1/toy/predict", json={"items": [{"size": -1, "colour": "red"}]})
        assert refused.status_code == 422 and refused.json()["detail"][0]["loc"][-1] == "size"
        boxes = {"boxes": [{"size": 1.0, "colour": "red"}, {"size": 8.0, "colour": "blue"}]}
        asked = client.post("/v1/toy/roomiest", json=boxes)
        assert asked.status_code == 200, asked.text
        assert asked.json()["best"] == 1 and asked.json()["model"]["name"] == "preflight.toy"
        assert asked.headers["X-Preflight-Model-Version"] == asked.json()["model"]["version"]
        bad = client.post("/v1/toy/roomiest", json={"boxes": [{"size": 1.0}]})
        assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["body", "boxes", 0, "colour"]
        toy = next(t for t in client.get("/v1/tasks").json() if t["name"] == "toy")
        assert toy["actions"] == {"roomiest": "/v1/toy/roomiest"}
        assert "/v1/toy/roomiest" in client.get("/openapi.json").json()["paths"]

    assert preflight.ask("roomiest", boxes).model_dump() == asked.json()
    (tmp_path / "boxes.json").write_text(json.dumps(boxes))
    by_cli = runner.invoke(app, ["ask", "roomiest", "--input", str(tmp_path / "boxes.json")])
    assert by_cli.exit_code == 0, by_cli.output
    assert json.loads(by_cli.stdout) == asked.json()
