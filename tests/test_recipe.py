"""The training-recipe search: trials are drawn from the space, scored on the validation split only, each
a nested MLflow run under the caller's run, and the best trial is the one with the highest score."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tcl import tracking
from tcl.recipe import best_trial, default_space, search_recipe, split_recipe

ROWS, COLS = 4, 6


def _split(rng, tasks: int, per_task: int, network: str) -> dict[str, np.ndarray]:
    """Programs whose latency falls with x[:, 0, 0] (a model can learn the ranking), `per_task` per task."""
    n = tasks * per_task
    x = rng.normal(size=(n, ROWS, COLS)).astype(np.float32)
    group = np.repeat(np.arange(tasks), per_task)
    mean_sec = np.exp(-x[:, 0, 0]) * 1e-3
    best = np.array([mean_sec[group == g].min() for g in range(tasks)])[group]
    return {"x": x, "label": best / mean_sec, "group": group, "mean_sec": mean_sec,
            "network": np.array([network] * n), "task_key": np.array([f"{network}-t{g}" for g in group]),
            "task_weight": np.ones(n)}


@pytest.fixture
def tracked(params, tmp_path, monkeypatch):
    import mlflow

    monkeypatch.delenv("TCL_TRACKING", raising=False)
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.chdir(tmp_path)
    test_params = {**params, "tracking": {"mlflow_uri": uri, "experiment": "recipe-test"},
                   "train": {**params["train"], "threads": 1, "hparams": {"mlp": {"hidden": 32, "encoder_layers": 1, "res_blocks": 1}}}}
    yield test_params, uri
    mlflow.set_tracking_uri(None)


def test_trials_are_scored_on_validation_and_logged_as_nested_runs(tracked, one_thread):
    import mlflow

    params, uri = tracked
    rng = np.random.default_rng(0)
    train, validation = _split(rng, 12, 16, "a"), _split(rng, 4, 16, "b")
    space = {"lr": ("log", 1e-3, 1e-2), "batch_size": ("choice", [32, 64])}
    with tracking.run(params, "recipe-parent", {"stage": "recipe_search"}) as parent:
        trials = search_recipe("mlp", params, train, validation, trials=3, epochs=2, seed=0, space=space,
                               feat_dim=COLS, seq_len=ROWS, threads=1, log=lambda _: None)
    assert [t.number for t in trials] == [0, 1, 2]
    for t in trials:
        assert set(t.recipe) == {"lr", "batch_size"} and 1e-3 <= t.recipe["lr"] <= 1e-2
        assert t.recipe["batch_size"] in (32, 64) and 0 < t.validation_top1 <= 1
    best = best_trial(trials)
    assert best.validation_top1 == max(t.validation_top1 for t in trials)

    client = mlflow.MlflowClient(tracking_uri=uri)
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.run_id]
    assert len(children) == 3 and {r.data.tags["stage"] for r in children} == {"recipe"}
    logged = sorted(r.data.metrics["validation_top1_mean_task"] for r in children)
    assert logged == pytest.approx(sorted(t.validation_top1 for t in trials))


def test_the_validation_score_follows_the_ranking_a_model_learns(tracked, one_thread):
    """On a learnable ranking the trained model's validation top-1 is high and the sign-flipped scores' is
    lower: the objective the search maximizes is the validation ranking."""
    from tcl.models.base import predict
    from tcl.recipe import train_recipe
    from tcl.train.evaluate import gate_top1

    params, _ = tracked
    rng = np.random.default_rng(1)
    train, validation = _split(rng, 12, 16, "a"), _split(rng, 6, 16, "b")
    model = train_recipe("mlp", {"lr": 1e-2, "batch_size": 64}, params, train, epochs=30, seed=0,
                         feat_dim=COLS, seq_len=ROWS, threads=1)
    scores = predict(model, validation["x"])
    learned, flipped = gate_top1(validation, scores), gate_top1(validation, -scores)
    assert learned > 0.6 and flipped < 0.2 and math.isfinite(flipped)  # here: 0.79 and 0.04


def test_the_default_space_and_the_recipe_split():
    space = default_space("tcl")
    assert {"lr", "batch_size", "weight_decay", "loss", "hparams.n_layer", "hparams.d_state"} <= set(space)
    assert default_space("tcl_stores") == space  # the same Mamba model on other rows
    assert set(default_space("mlp")) == {"lr", "batch_size", "weight_decay", "loss"}
    assert split_recipe({"lr": 0.01, "hparams.d_state": 16}) == ({"lr": 0.01}, {"d_state": 16})
