"""The active-learning loop (Algorithm 1's rounds), the retrained scorer, offline samples and training on them.

Real models (the MLP and TLP cost models) on small synthetic pools whose labels follow
a feature, so "the model learned something" is checkable; no mocks.
"""

from __future__ import annotations

import numpy as np
import pytest

from tcl.sampling import make_sampler
from tcl.sampling.offline import sample_offline, save_sample
from tcl.train.inputs import restrict_to_sample
from tcl.sampling.rounds import Predictions, sample_rounds
from tcl.sampling.scorer import ModelScorer, relabel_within
from tcl.sampling.settings import SamplingSettings
from tcl.train.loop import TrainConfig


def synthetic_split(tasks: int = 6, per_task: int = 40, seed: int = 0) -> dict[str, np.ndarray]:
    """Programs whose speed rises with feature 0 of their first row: a learnable ranking."""
    rng = np.random.default_rng(seed)
    n = tasks * per_task
    x = rng.normal(size=(n, 5, 4)).astype(np.float32)
    speed = np.exp(x[:, 0, 0])
    group = np.repeat(np.arange(tasks), per_task)
    label = np.zeros(n)
    for g in range(tasks):
        rows = group == g
        label[rows] = speed[rows] / speed[rows].max()
    return {"x": x, "label": label.astype(np.float32), "group": group,
            "task_key": np.asarray([f"t{g}" for g in group]), "program_id": np.asarray([f"p{i}" for i in range(n)]),
            "op_type": np.asarray(["conv2d" if g < tasks // 2 else "dense" for g in group])}


def test_rounds_spend_the_budget_in_a_random_first_batch_then_t_rounds():
    split = synthetic_split()
    n = len(split["x"])
    seen = []

    def predict(labelled):
        seen.append(len(labelled))
        return Predictions(scores=split["x"][:, 0, 0].astype(np.float64))

    run = sample_rounds(make_sampler("rdu"), split["op_type"], split["task_key"], rate=0.25, rounds=3,
                        first_batch=0.2, seed=0, predict=predict)
    assert len(run.picks) == round(0.25 * n) == len(np.unique(run.picks))
    assert [r.picked for r in run.rounds] == [12, 16, 16, 16]
    assert seen == [12, 28, 44], "the model is retrained before every active round on all labels so far"
    assert [r.labelled for r in run.rounds] == [12, 28, 44, 60]


def test_random_sampling_never_trains_the_model():
    split = synthetic_split()

    def predict(labelled):
        raise AssertionError("random sampling must not retrain f")

    run = sample_rounds(make_sampler("random", seed=1), split["op_type"], split["task_key"], 0.1, 4, 0.2, 0, predict)
    assert len(run.picks) == 24


def test_label_callback_sees_each_round_before_the_next_prediction():
    split = synthetic_split()
    measured: list[np.ndarray] = []

    def label(picks):
        measured.append(picks)

    def predict(labelled):
        assert set(labelled) == set(np.concatenate(measured)), "f is trained on exactly what was measured"
        return Predictions(scores=np.zeros(len(split["x"])))

    run = sample_rounds(make_sampler("rdu"), split["op_type"], split["task_key"], 0.2, 2, 0.5, 0, predict, label)
    assert np.array_equal(np.concatenate(measured), run.picks)


def test_relabel_within_uses_only_the_labelled_best():
    label = np.array([1.0, 0.5, 0.25, 0.0, 1.0, 0.2])
    group = np.array([0, 0, 0, 0, 1, 1])
    rows = np.array([1, 2, 3, 5])  # task 0's and task 1's best programs are not labelled
    assert np.allclose(relabel_within(label, group, rows), [1.0, 0.5, 0.0, 1.0])


def test_scorer_learns_the_ranking_and_reports_an_ensemble():
    split = synthetic_split()
    cfg = TrainConfig(epochs=40, lr=3e-3, batch_size=256, seed=0)
    scorer = ModelScorer(split["x"], split["label"], split["group"], "mlp", cfg, ensemble=2)
    labelled = np.arange(0, len(split["x"]), 2)
    preds = scorer(labelled)
    assert preds.ensemble.shape == (2, len(split["x"]))
    assert np.allclose(preds.scores, preds.ensemble.mean(axis=0))
    assert preds.features.shape == (len(split["x"]), 4)
    held_out = np.arange(1, len(split["x"]), 2)
    corr = np.corrcoef(preds.scores[held_out], split["x"][held_out, 0, 0])[0, 1]
    assert corr > 0.5, f"a scorer trained on half the pool should rank the other half (corr {corr:.2f})"


@pytest.mark.parametrize("strategy", ["rdu", "random", "alt", "balto"])
def test_offline_sample_round_trips_into_training_rows(tmp_path, strategy):
    split = synthetic_split(tasks=4, per_task=30)
    params = {"train": {"lr": 3e-3, "batch_size": 256}}
    settings = SamplingSettings(strategy=strategy, rate=0.2, rounds=2, first_batch=0.3, model="mlp", epochs=3)
    run = sample_offline(split, params, settings, seed=0)
    assert len(run.picks) == 24
    path = tmp_path / "samples" / "p.npz"
    save_sample(path, split["program_id"][run.picks], run, {"strategy": strategy})
    kept = restrict_to_sample(split, path)
    assert sorted(kept["program_id"]) == sorted(split["program_id"][run.picks])
    assert len(kept["x"]) == len(kept["label"]) == 24


def test_a_stale_sample_is_refused_with_its_path(tmp_path):
    split = synthetic_split(tasks=2, per_task=10)
    run = sample_rounds(make_sampler("random"), split["op_type"], split["task_key"], 0.5, 1, 0.5, 0,
                        lambda labelled: None)
    path = tmp_path / "old.npz"
    save_sample(path, np.asarray(["not-a-program"] * len(run.picks)), run, {})
    with pytest.raises(ValueError, match="old.npz"):
        restrict_to_sample(split, path)


def test_settings_reject_an_unknown_strategy():
    with pytest.raises(ValueError, match="sampling.strategy='nope'"):
        SamplingSettings.from_params({"sampling": {"strategy": "nope"}})
    s = SamplingSettings.from_params({"sampling": {"strategy": "alt", "rate": 0.3, "platforms": ["x"]}}, rate=0.05)
    assert (s.strategy, s.rate) == ("alt", 0.05)
    assert s.sampler(seed=3).seed == 3


@pytest.mark.slow
def test_active_mode_measures_only_the_picks_and_resumes_without_remeasuring(tmp_path, params, host_platform,
                                                                             measurer):
    """Real pools drawn by MetaSchedule, real builds and runs of the picks on this host."""
    import json

    from tcl.collect.catalog import CatalogTask, save_catalog
    from tcl.collect.collector import task_pool
    from tcl.data.metaschedule import trace_to_steps
    from tcl.data.store import RecordStore
    from tcl.features.tokenizer import Tokenizer
    from tcl.sampling.active import sample_active

    from conftest import toy_matmul_task

    tasks = [toy_matmul_task(16), toy_matmul_task(12)]
    records, active = RecordStore(tmp_path / "records"), RecordStore(tmp_path / "active")
    cfg = dict(params["collect"], pool_size=10, batch_size=5, population=16)
    pools = [task_pool(records, t, host_platform, cfg, 0) for t in tasks]
    save_catalog(records, host_platform.name, [CatalogTask(t, {"toy@16": 1}) for t in tasks], "test")
    tokenizer = Tokenizer.for_kind("cpu").fit([trace_to_steps(json.loads(p)) for pool in pools for p in pool],
                                              [host_platform.spec_vector])
    run_params = {**params, "collect": dict(cfg, source=host_platform.name)}
    settings = SamplingSettings(strategy="rdu", rate=0.3, rounds=2, first_batch=0.5, model="mlp", epochs=2)
    measured = [0]

    def go():
        return sample_active(host_platform, run_params, settings, 0, records, active, [t.key for t in tasks],
                             tokenizer, measurer, lambda n: measured.__setitem__(0, measured[0] + n))

    run, pool, labels = go()
    n_pool = sum(len(p) for p in pools)
    assert len(pool.texts) == n_pool and len(run.picks) == round(0.3 * n_pool)
    stored = active.read(host_platform.name, columns=["program_id", "mean_sec"])
    assert sorted(stored.column("program_id").to_pylist()) == sorted(pool.program_id[run.picks].tolist())
    assert measured[0] == len(run.picks), "only the picks are measured"
    assert (labels[run.picks] > 0).all() and (labels[np.setdiff1d(np.arange(n_pool), run.picks)] == 0).all()
    measured[0] = 0
    again, _, _ = go()
    assert measured[0] == 0, "a rerun reads the measured picks back instead of measuring them again"
    assert np.array_equal(np.sort(again.picks), np.sort(run.picks))
    assert active.count(host_platform.name) == len(run.picks)
