"""benchmarks/bench_joint.py: what each setting trains on (no left-out rows, no test task), resuming.

Tiny synthetic splits of three platforms that share their programs (as the real ones do), each
platform's rows marked in x, so a row that reaches the wrong training set is caught.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from benchmarks.bench_joint import (aggregate, cell_path, cells_of, check_held_out, platform_visibility, render,
                                    report_of, run_cells, training_platforms, union, with_hardware_row)
from tcl.train.evaluate import EvalSettings

PLATFORMS = ["pa", "pb", "pc"]


def _split(platform: int, tasks: list[str], programs: int = 6) -> dict[str, np.ndarray]:
    rng = np.random.default_rng([platform, len(tasks[0])])
    n = len(tasks) * programs
    x = rng.random((n, 2, 164)).astype(np.float32)
    x[:, 0, 0] = 100 + platform          # the platform's mark
    mean_sec = rng.uniform(1e-4, 1e-3, n)
    return {"x": x, "label": (1e-4 / mean_sec).astype(np.float32), "group": np.repeat(np.arange(len(tasks)), programs),
            "task_key": np.repeat(tasks, programs), "program_id": np.array([f"{t}-{i}" for t in tasks
                                                                             for i in range(programs)]),
            "network": np.repeat([f"net{t[-1]}" for t in tasks], programs), "op_type": np.full(n, "dense"),
            "task_weight": np.ones(n), "mean_sec": mean_sec}


@pytest.fixture
def inputs():
    return {p: {"train": _split(i, ["t1", "t2", "t3"]), "test": _split(i, ["u1", "u2"])}
            for i, p in enumerate(PLATFORMS)}


def _marks(train):
    return set(train["x"][:, 0, 0].astype(int) - 100)


def test_joint_is_the_union_and_leave_one_out_never_sees_the_platform(inputs):
    trains = {p: inputs[p]["train"] for p in PLATFORMS}
    joint = union(trains, training_platforms("joint", "all", PLATFORMS))
    assert len(joint["label"]) == sum(len(t["label"]) for t in trains.values())
    assert np.array_equal(joint["x"], np.concatenate([trains[p]["x"] for p in PLATFORMS]))
    # a task measured on three platforms is three groups: its programs rank only against one platform's timings
    assert len(np.unique(joint["group"])) == 9
    for i, p in enumerate(PLATFORMS):
        lopo = union(trains, training_platforms("lopo", p, PLATFORMS))
        assert i not in _marks(lopo) and _marks(lopo) == set(range(3)) - {i}
        assert len(lopo["label"]) == sum(len(trains[q]["label"]) for q in PLATFORMS if q != p)
        check_held_out(lopo, {p: inputs[p]["test"]}, "lopo", p)
        assert _marks(union(trains, training_platforms("per_platform", p, PLATFORMS))) == {i}
    with pytest.raises(ValueError, match="leave-one-out of pb"):
        check_held_out(joint, {"pb": inputs["pb"]["test"]}, "lopo", "pb")
    leaky = union({**trains, "pa": inputs["pa"]["test"]}, ["pa"])
    with pytest.raises(ValueError, match="test task"):
        check_held_out(leaky, {"pa": inputs["pa"]["test"]}, "per_platform", "pa")


def test_visibility_says_whether_inputs_tell_platforms_apart(inputs):
    assert platform_visibility(inputs)["share"] == 1.0      # the marks differ
    same = {p: {"train": {**inputs[p]["train"], "x": inputs["pa"]["train"]["x"]}} for p in PLATFORMS}
    v = platform_visibility(same)
    assert v == {"shared_programs": 3 * 18, "different_inputs": 0, "share": 0.0}


def test_the_hardware_row_tells_platforms_apart_that_per_store_inputs_do_not(params):
    """tcl_stores_hw: two platforms' identical PerStoreFeature inputs differ once each carries its
    hardware row first, and the stores behind it are untouched."""
    from tcl.features.hardware import HardwareNormalizer
    from tcl.platforms import get_platform

    names = ["zen4-avx512-1c", "emr-avx512-1c"]
    same = _split(0, ["t1", "t2"])
    inputs = {p: {"train": dict(same), "test": _split(0, ["u1"])} for p in names}
    assert platform_visibility(inputs)["share"] == 0.0
    hardware = HardwareNormalizer().fit([get_platform(params, p).spec_vector for p in names])
    marked = with_hardware_row(inputs, params, hardware)
    assert platform_visibility(marked)["share"] == 1.0
    for p in names:
        x = marked[p]["train"]["x"]
        assert x.shape == (len(same["x"]), same["x"].shape[1] + 1, 164)
        np.testing.assert_array_equal(x[:, 1:], same["x"])
        np.testing.assert_array_equal(x[0, 0], hardware.transform(get_platform(params, p).spec_vector, cols=164)[0])


def test_cells_train_each_setting_resume_and_report(inputs, params, tmp_path, one_thread):
    logged = []
    run_cells("tenset_mlp", inputs, params, [0], 1, tmp_path, log=logged.append)
    assert len(logged) == len(cells_of(PLATFORMS)) == 7
    lopo = json.loads(cell_path(tmp_path, "tenset_mlp", "lopo", "pb", 0).read_text())
    assert lopo["train_platforms"] == ["pa", "pc"] and lopo["train_programs"] == 36 and list(lopo["scores"]) == ["pb"]
    joint = json.loads(cell_path(tmp_path, "tenset_mlp", "joint", "all", 0).read_text())
    assert joint["train_programs"] == 54 and {p: len(s) for p, s in joint["scores"].items()} == dict.fromkeys(PLATFORMS, 12)

    stamps = {f: f.stat().st_mtime_ns for f in tmp_path.iterdir()}
    logged.clear()
    run_cells("tenset_mlp", inputs, params, [0], 1, tmp_path, log=logged.append)
    assert logged == [] and stamps == {f: f.stat().st_mtime_ns for f in tmp_path.iterdir()}
    cell_path(tmp_path, "tenset_mlp", "per_platform", "pc", 0).unlink()
    run_cells("tenset_mlp", inputs, params, [0], 1, tmp_path, log=logged.append)
    assert len(logged) == 1 and logged[0].startswith("tenset_mlp per_platform pc seed 0")
    logged.clear()
    run_cells("tenset_mlp", inputs, params, [0], 2, tmp_path, log=logged.append)
    assert len(logged) == 7, "cells trained with another recipe (here: epochs) are trained again"

    tests = {p: inputs[p]["test"] for p in PLATFORMS}
    points = aggregate(tests, tmp_path, EvalSettings(bootstrap=0))
    assert sorted((q["platform"], q["setting"]) for q in points) == sorted(
        (p, s) for p in PLATFORMS for s in ("per_platform", "joint", "lopo"))
    report = report_of(tests, {**params, "train": {**params["train"], "eval": {"bootstrap": 0}}}, tmp_path,
                       {"tenset_mlp": platform_visibility(inputs)},
                       {"data_version": "v.dir", "data_outputs": {}, "command": "python benchmarks/bench_joint.py"}, [])
    md = render(report)
    for row in ("| pb | Tenset-MLP | per-platform | this | 18 | 3 |", "| pb | Tenset-MLP | joint | all | 54 | 3 |",
                "| pb | Tenset-MLP | leave-one-out | all but this | 36 | 3 |", "| pb | random scorer |"):
        assert row in md
    assert [d["platform"] for d in report["deltas"]] == PLATFORMS


def test_leave_one_out_cells_can_be_limited_and_a_report_never_mixes_two_recipes(inputs, params, tmp_path, one_thread):
    """--lopo trains the left-out cell of the named platforms only; cells of a model trained with another recipe
    than the run's are left out of the report instead of being averaged with the current ones."""
    from benchmarks.bench_learning_curve import cell_recipe

    logged = []
    run_cells("tenset_mlp", inputs, params, [0], 1, tmp_path, log=logged.append)
    assert len(logged) == 7
    logged.clear()
    run_cells("tenset_mlp", inputs, params, [0], 2, tmp_path, log=logged.append, lopo=["pb"])
    assert sorted(line.split(" seed")[0] for line in logged) == sorted(
        [f"tenset_mlp per_platform {p}" for p in PLATFORMS] + ["tenset_mlp joint all", "tenset_mlp lopo pb"])
    tests = {p: inputs[p]["test"] for p in PLATFORMS}
    mixed = aggregate(tests, tmp_path, EvalSettings(bootstrap=0))
    assert {q["epochs"] for q in mixed if q["setting"] == "lopo"} == {1, 2}, "without recipes every cell counts"
    dropped = []
    points = aggregate(tests, tmp_path, EvalSettings(bootstrap=0),
                       {"tenset_mlp": cell_recipe(params, "tenset_mlp", 2)}, log=dropped.append)
    assert sorted((q["setting"], q["platform"]) for q in points if q["setting"] == "lopo") == [("lopo", "pb")]
    assert {q["epochs"] for q in points} == {2} and len(dropped) == 2


def test_epochs_per_model_come_from_one_parser_shared_by_the_benchmarks():
    """By default each model trains for its recipe's epochs (as the train stage trains it); --epochs sets every
    model, --epochs-for overrides one; a model not run this time is ignored, a misspelled one stops the run
    with the valid names."""
    import argparse

    from benchmarks._out import add_epochs_args, epochs_by_model

    ap = argparse.ArgumentParser()
    ap.add_argument("--models", nargs="+")
    add_epochs_args(ap, "tcl=2")
    known = ["tcl", "tenset_mlp", "xgb"]
    params = {"train": {"epochs": 8, "optimizer_by_model": {"tenset_mlp": {"epochs": 12}}}}
    args = ap.parse_args(["--models", "tcl", "tenset_mlp"])
    assert epochs_by_model(args, params, known) == {"tcl": 8, "tenset_mlp": 12}, "each model's recipe"
    args = ap.parse_args(["--models", "tcl", "tenset_mlp", "--epochs-for", "tcl=2", "xgb=5"])
    assert epochs_by_model(args, params, known) == {"tcl": 2, "tenset_mlp": 12}
    args = ap.parse_args(["--models", "tcl", "tenset_mlp", "--epochs", "3"])
    assert epochs_by_model(args, params, known) == {"tcl": 3, "tenset_mlp": 3}
    with pytest.raises(SystemExit, match="tenset_mlp"):
        epochs_by_model(ap.parse_args(["--models", "tcl", "--epochs-for", "tlc=2"]), params, known)
