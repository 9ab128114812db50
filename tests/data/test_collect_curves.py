"""The learning-curve collector: real (tiny) training runs, whole-run appends, resume, determinism."""

import pandas as pd
import pytest
from preflight.data.collect.curves import collect_curves, plan
from preflight.data.errors import UsageError
from preflight.data.sources import local_curves


def test_runs_are_appended_whole_and_a_rerun_resumes(tmp_path):
    out = tmp_path / "curves.csv"
    first = collect_curves(out, runs=2, epochs=2, progress=False)
    assert (first.trained, first.skipped_existing) == (2, 0)
    second = collect_curves(out, runs=3, epochs=2, progress=False)
    assert (second.trained, second.skipped_existing) == (1, 2)
    loaded = local_curves.load(out)
    assert len(loaded.rejects) == 0 and len(loaded.rows) == 6
    assert set(loaded.rows["run"]) == {"0", "1", "2"}
    assert loaded.rows["valid_accuracy"].between(0, 1).all() and (loaded.rows["epoch_seconds"] > 0).all()
    assert list(loaded.rows["arch"].unique()) == [run.arch for run in plan(3, seed=0)]


def test_a_run_cut_short_by_a_torn_write_is_trained_again(tmp_path):
    out = tmp_path / "curves.csv"
    collect_curves(out, runs=2, epochs=2, progress=False)
    text = out.read_text()
    out.write_text(text[: len(text) - 20])  # the last run's second line torn mid-way
    again = collect_curves(out, runs=2, epochs=2, progress=False)
    assert (again.trained, again.skipped_existing) == (1, 1)
    rows = pd.read_csv(out)
    assert rows.groupby("run").size().to_dict() == {0: 2, 1: 2}


def test_the_same_seed_trains_the_same_curve(tmp_path):
    a = collect_curves(tmp_path / "a.csv", runs=1, epochs=2, progress=False).path
    b = collect_curves(tmp_path / "b.csv", runs=1, epochs=2, progress=False).path
    columns = ["arch", "learning_rate", "valid_accuracy", "train_loss"]
    pd.testing.assert_frame_equal(pd.read_csv(a)[columns], pd.read_csv(b)[columns])


def test_a_file_of_another_plan_is_refused(tmp_path):
    out = tmp_path / "curves.csv"
    collect_curves(out, runs=1, epochs=2, progress=False)
    with pytest.raises(UsageError, match="epochs 2, not 3"):
        collect_curves(out, runs=1, epochs=3, progress=False)
    with pytest.raises(UsageError, match="seed 0, not 1"):
        collect_curves(out, runs=1, epochs=2, seed=1, progress=False)


def test_more_runs_than_the_space_holds_are_refused_before_anything_is_written(tmp_path):
    out = tmp_path / "curves.csv"
    with pytest.raises(UsageError, match="15626 runs asked for, but the space holds 15625"):
        collect_curves(out, runs=15626, progress=False)  # it used to draw cells for ever
    assert not out.exists()


def test_the_shipped_curves_hold_at_least_300_architectures_of_20_epochs():
    loaded = local_curves.load(local_curves.SHIPPED)
    assert len(loaded.rejects) == 0
    per_run = loaded.rows.groupby("run")["epoch"].nunique()
    assert loaded.rows["arch"].nunique() >= 300 and (per_run == 20).all()


def test_runs_lacking_epochs_are_rejected_with_a_reason(tmp_path):
    from tests.nas import write_local_curves

    path = write_local_curves(tmp_path / "curves.csv", runs=6, epochs=4)
    table = pd.read_csv(path)
    table.drop(index=table.index[(table["run"] == 2) & (table["epoch"] == 3)]).to_csv(path, index=False)
    loaded = local_curves.load(path)
    assert loaded.reject_counts() == {"run lacks some of its epochs": 3}
    assert "2" not in set(loaded.rows["run"])


def test_lcdb_curves_over_training_set_size_load_as_runs(tmp_path):
    from preflight.data import sources
    from preflight.models.core.task import get_task

    path = tmp_path / "database-accuracy.csv"
    anchors = [16, 23, 32, 45, 64]
    rows = [
        {
            "openmlid": 44,
            "learner": learner,
            "size_train": size,
            "size_test": 461,
            "outer_seed": 0,
            "inner_seed": 0,
            "traintime": 0.01,
            "score_train": 0.9,
            "score_valid": 0.5 + 0.05 * i,
            "score_test": 0.5,
        }
        for learner in ("SVC_rbf", "sklearn.ensemble.RandomForestClassifier")
        for i, size in enumerate(anchors)
    ]
    rows.append(rows[0] | {"score_valid": 1.5})  # a repeated anchor, and not a fraction
    pd.DataFrame(rows).to_csv(path, index=False)
    loaded = sources.load("lcdb", path)
    assert loaded.reject_counts() == {"score_valid not a fraction": 1, "anchor repeated within a curve": 1}
    prefixes = get_task("nas-curve").rows(loaded.rows)
    forest = prefixes[prefixes["learner"].str.endswith("RandomForestClassifier")]
    assert len(forest) == 4 and forest["budget"].unique().tolist() == [64]
    assert forest["epochs"].iloc[-1] == anchors[:4] and forest["accuracy"].unique().tolist() == [0.7]
    features = get_task("nas-curve").featurize(forest, None)
    assert features.X["ctx_learner"].notna().all() and features.X["arch_n_nodes"].isna().all()
    assert set(features.meta["arch_group"]) == {"openml-44"}  # a new dataset is what is held out
