"""The one held-out evaluation (tcl.train.evaluate) and the learning-curve subsampling, on crafted splits."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tcl.train.evaluate import (FIGURES, EvalSettings, composition, gate_top1, per_network, per_task,
                                random_scorer_metrics, ranking_metrics)


def crafted(n_tasks: int = 24, programs: int = 12, networks: int = 4, weights=None, seed: int = 0):
    """A held-out split: `n_tasks` tasks spread over `networks` networks, random latencies, label = best/latency."""
    rng = np.random.default_rng(seed)
    task = np.repeat(np.arange(n_tasks), programs)
    mean_sec = rng.uniform(1e-3, 1e-2, len(task))
    best = np.array([mean_sec[task == t].min() for t in range(n_tasks)])
    w = np.ones(n_tasks) if weights is None else np.asarray(weights, dtype=float)
    return {"label": (best[task] / mean_sec).astype(np.float32), "mean_sec": mean_sec, "group": task,
            "task_key": np.array([f"t{t}" for t in task]), "network": np.array([f"net{t % networks}" for t in task]),
            "op_type": np.array(["conv2d" if t % 2 else "dense" for t in task]), "task_weight": w[task]}


def noisy(split, noise: float, seed: int = 1) -> np.ndarray:
    """A decent scorer: the label plus noise."""
    return split["label"] + np.random.default_rng(seed).normal(0, noise, len(split["label"]))


def test_ci_contains_the_point_and_is_deterministic():
    split = crafted()
    m = ranking_metrics(split, noisy(split, 0.3), ks=(1, 5))
    for k in (1, 5):
        for f in FIGURES:
            assert m[f"top{k}_{f}_ci_low"] <= m[f"top{k}_{f}"] <= m[f"top{k}_{f}_ci_high"], (k, f)
    for f in FIGURES:    # top-5 of 12 programs may find every best; top-1 does not
        assert m[f"top1_{f}_ci_low"] < m[f"top1_{f}"] < m[f"top1_{f}_ci_high"], f
    assert ranking_metrics(split, noisy(split, 0.3), ks=(1, 5)) == m, "a fixed resampling seed"
    assert "top1_ratio_of_sums_seed_std" not in m, "one run has no seed spread"


def test_one_dominant_task_widens_the_eq12_interval_not_the_per_task_one():
    even, heavy = crafted(), crafted(weights=[200.0] + [1.0] * 23)
    scores = noisy(even, 0.3)        # same programs and scores: only the weights differ
    first = even["group"] == 0
    scores[first] = -even["label"][first]    # the task made heavy is ranked worst-first
    a, b = ranking_metrics(even, scores, ks=(1,)), ranking_metrics(heavy, scores, ks=(1,))
    width = {name: m["top1_ratio_of_sums_ci_high"] - m["top1_ratio_of_sums_ci_low"] for name, m in (("even", a),
                                                                                                    ("heavy", b))}
    assert width["heavy"] > 1.5 * width["even"]
    assert b["top1_mean_per_task"] == pytest.approx(a["top1_mean_per_task"]), "task weights do not enter it"


def test_mean_per_task_differs_from_eq12_by_hand():
    # two tasks of one network, two programs each: the heavy task's top pick is 2x slower than its best
    split = {"label": np.array([0.5, 1.0, 1.0, 0.5], np.float32), "mean_sec": np.array([2.0, 1.0, 1.0, 2.0]),
             "group": np.array([0, 0, 1, 1]), "task_key": np.array(["a", "a", "b", "b"]),
             "network": np.array(["n"] * 4), "op_type": np.array(["dense"] * 4),
             "task_weight": np.array([9.0, 9.0, 1.0, 1.0])}
    scores = np.array([1.0, 0.0, 1.0, 0.0])     # a: picks the 2 s program; b: picks its best
    m = ranking_metrics(split, scores, ks=(1,), settings=EvalSettings(bootstrap=0))
    assert m["top1_ratio_of_sums"] == pytest.approx((9 * 1 + 1 * 1) / (9 * 2 + 1 * 1))   # 10/19
    assert m["top1_mean_per_task"] == pytest.approx((0.5 + 1.0) / 2)
    assert m["top1_mean_per_network"] == pytest.approx(10 / 19)
    assert not any(k.endswith(("_ci_low", "_ci_high")) for k in m), "bootstrap 0 leaves the intervals out"
    assert per_task(split, scores) == {"n/a": 0.5, "n/b": 1.0}
    assert per_network(split, scores) == {"n": pytest.approx(10 / 19)}
    assert gate_top1(split, scores) == pytest.approx(0.75)


def test_a_sign_flipped_scorer_scores_lower_everywhere():
    split = crafted()
    good = noisy(split, 0.2)
    m, flipped = ranking_metrics(split, good), ranking_metrics(split, -good)
    for key in (*(f"top{k}_{f}" for k in (1, 5) for f in FIGURES), "pairwise_accuracy"):
        assert flipped[key] < m[key], key
    assert gate_top1(split, -good) < gate_top1(split, good)
    assert math.isnan(gate_top1(split, np.full(len(good), np.nan))), "non-finite scores never pass the gate"


def test_seeds_are_averaged_and_their_spread_reported():
    split = crafted()
    runs = [noisy(split, 0.3, seed=s) for s in range(3)]
    alone = [ranking_metrics(split, r, ks=(1,)) for r in runs]
    both = ranking_metrics(split, runs, ks=(1,))
    for f in FIGURES:
        values = [a[f"top1_{f}"] for a in alone]
        assert both[f"top1_{f}"] == pytest.approx(np.mean(values))
        assert both[f"top1_{f}_seed_std"] == pytest.approx(np.std(values, ddof=1))
        assert both[f"top1_{f}_ci_low"] <= both[f"top1_{f}"] <= both[f"top1_{f}_ci_high"]
    floor = random_scorer_metrics(split, seeds=5, ks=(1,))
    assert floor["top1_mean_per_task"] < both["top1_mean_per_task"] and "top1_mean_per_task_seed_std" in floor


def test_composition_and_settings():
    split = crafted(weights=[1000.0] + [1.0] * 23)
    c = composition(split)
    assert (c["tasks"], c["programs"]) == (24, 24 * 12)
    assert c["networks"] == {f"net{i}": 72 for i in range(4)} and c["op_types"] == {"conv2d": 144, "dense": 144}
    assert c["eq12_weight_share_top5_tasks"] > 0.9
    assert EvalSettings.from_params({"train": {"eval": {"bootstrap": 50, "ci": 0.9}}}) == EvalSettings(50, 0.9, 0)
    with pytest.raises(ValueError, match="train.eval"):
        EvalSettings.from_params({"train": {"eval": {"boostrap": 50}}})
    with pytest.raises(ValueError, match="train.eval"):
        EvalSettings(ci=1.5)


def test_learning_curve_subsamples_programs_within_tasks_and_whole_tasks():
    from benchmarks.bench_learning_curve import subsample

    train = {"group": np.repeat(np.arange(10), [40] * 5 + [3] * 5)}
    rows = subsample(train, "programs", 0.1, seed=0)
    kept = np.bincount(train["group"][rows], minlength=10)
    assert list(kept) == [4] * 5 + [2] * 5, "10% of each task, at least 2 programs"
    assert not np.array_equal(rows, subsample(train, "programs", 0.1, seed=1)), "the seed draws other programs"
    rows = subsample(train, "tasks", 0.3, seed=0)
    groups = np.unique(train["group"][rows])
    assert len(groups) == 3 and len(rows) == np.isin(train["group"], groups).sum(), "whole tasks"
    assert len(subsample(train, "programs", 1.0, seed=0)) == len(train["group"])


def test_a_learning_curve_cell_trained_with_another_recipe_is_trained_again(tmp_path):
    import copy
    import json

    from benchmarks.bench_learning_curve import cell_recipe, is_current
    from tcl.config import load_params

    params = load_params("params.yaml")
    recipe = cell_recipe(params, "tcl_stores", epochs=8)
    cell = tmp_path / "tcl_stores-programs-100-s0.json"
    assert not is_current(cell, recipe), "a missing cell is trained"
    cell.write_text(json.dumps({"recipe": recipe, "scores": []}))
    assert is_current(cell, json.loads(json.dumps(recipe))), "the same recipe is kept (resume)"
    changed = copy.deepcopy(params)
    changed["train"]["optimizer_by_model"]["tcl_stores"]["lr"] = 1e-2
    assert not is_current(cell, cell_recipe(changed, "tcl_stores", epochs=8)), "another lr: stale"
    changed = copy.deepcopy(params)
    changed["train"]["hparams"]["tcl_stores"]["n_layer"] = 1
    assert not is_current(cell, cell_recipe(changed, "tcl_stores", epochs=8)), "another depth: stale"
    assert not is_current(cell, cell_recipe(params, "tcl_stores", epochs=3)), "other epochs: stale"
    assert cell_recipe(params, "tenset_mlp", epochs=8) != recipe, "each model its own recipe"


def test_a_learning_curve_rising_more_than_its_seed_spread_is_limited_by_data():
    from benchmarks.bench_learning_curve import doubling, verdict

    def curve(model, top1_by_fraction, seed_std):
        return [{"model": model, "axis": "tasks", "fraction": f, "top1": v, "top1_seed_std": seed_std}
                for f, v in top1_by_fraction.items()]

    # 38% and 100% only (no 50% point): the last gain is taken per doubling between the two fractions
    rising = doubling(curve("tcl", {0.376: 0.41, 1.0: 0.53}, 0.02), "top1")[("tcl", "tasks")]
    assert rising["last"] == pytest.approx(0.12 / np.log2(1 / 0.376))
    assert verdict(rising) == "data (still rising)"
    flat = doubling(curve("mlp", {0.25: 0.60, 0.5: 0.62, 1.0: 0.63}, 0.02), "top1")[("mlp", "tasks")]
    assert flat["last"] == pytest.approx(0.01) and verdict(flat) == "model (flat within seed noise)"
    deterministic = doubling(curve("xgb", {0.376: 0.624, 1.0: 0.635}, 0.0), "top1")[("xgb", "tasks")]
    assert verdict(deterministic) == "model (flat within seed noise)", "no seed spread: a gain of 0.008 is flat"
    falling = doubling(curve("tlp", {0.5: 0.60, 1.0: 0.50}, 0.0), "top1")[("tlp", "tasks")]
    assert verdict(falling) == "model (flat within seed noise)", "a sign flip of the gain is not data-limited"
