"""Baselines on TVM's PerStoreFeature, on real records: two tiny matmul tasks, 8 measured programs each."""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch

from tcl.collect.collector import measure_task
from tcl.data.splits import add_labels
from tcl.data.store import RecordStore
from tcl.features.per_store import FEATURE_DIM, FeatureCache, pad_stores, record_features, sum_stores, \
    workload_dir
from tcl.models import build_model
from tcl.models.metrics import pairwise_accuracy
from tcl.train.loop import TrainConfig, fit
from tcl.models.base import predict
from tcl.models.xgb_ranker import XGBConfig, XGBRanker

from conftest import toy_matmul_task

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def toy_store(tmp_path_factory, params, host_platform, measurer):
    """A record store with toy_a (16^3 matmul) and toy_b (32^3 matmul), 8 programs each."""
    root = tmp_path_factory.mktemp("baselines") / "records"
    store = RecordStore(root)
    cfg = dict(params["collect"], pool_size=8, batch_size=8)
    for n, network in ((16, "toy_a"), (32, "toy_b")):
        measure_task(toy_matmul_task(n, network), host_platform, host_platform, store, measurer, cfg, 0,
                     lambda _: None)
    table = add_labels(store.read(host_platform.name))
    assert table.num_rows == 16
    return store, table


def _features(store, table, platform, cache=None):
    return record_features(table, [workload_dir(store.root, platform)], cache)


def test_record_features_are_finite_and_deterministic(toy_store, host_platform, tmp_path):
    store, table = toy_store
    cache = tmp_path / "psf.npz"
    feats, errors = _features(store, table, host_platform.name, cache)
    ok = [not e for e in table.column("error_code").to_pylist()]
    assert any(ok)
    for f, err, good in zip(feats, errors, ok):
        if good:
            assert err == "" and f is not None, err
            assert f.ndim == 2 and f.shape[1] == FEATURE_DIM and f.shape[0] >= 1
            assert np.isfinite(f).all()
            assert (f != 0).any(axis=1).all(), "a real store row is all zeros: TensetMLP's padding mask would drop it"
    # Twice from scratch gives the same; the cache gives it back without extracting.
    again, _ = _features(store, table, host_platform.name)
    cached = FeatureCache.load(cache)
    assert set(cached.feats) == set(table.column("record_id").to_pylist())
    for a, b, rid in zip(feats, again, table.column("record_id").to_pylist()):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_array_equal(a, b)
            np.testing.assert_array_equal(a, cached.feats[rid])


def test_missing_workload_is_reported_not_dropped_and_found_in_another_store_later(toy_store, host_platform,
                                                                                   tmp_path):
    """A workload missing where one run looked is that run's problem, not the program's: the cache must not
    keep the miss (a tuning run's records keep their workloads in their own store, data/tuning)."""
    from tcl.train.inputs import workload_stores

    store, table = toy_store
    part, cache = table.slice(0, 3), tmp_path / "psf.npz"
    feats, errors = record_features(part, [tmp_path], cache)
    assert feats == [None] * 3 and all("no workload" in e for e in errors)
    written = cache.stat().st_mtime_ns
    record_features(part, [tmp_path], cache)  # the same miss again: nothing new, so the cache is not rewritten
    assert cache.stat().st_mtime_ns == written
    feats, errors = record_features(part, [tmp_path, workload_dir(store.root, host_platform.name)], cache)
    assert not any("no workload" in e for e in errors) and any(f is not None for f in feats), errors
    params = {"validate": {"stores": ["data/records", "data/tenset", "data/tuning"]}}
    assert workload_stores(params, store.root) == [str(store.root), "data/records", "data/tenset", "data/tuning"]


@pytest.mark.parametrize("name", ["tenset_mlp", "tcl_stores"])
def test_per_store_models_ignore_zero_padding_stores_and_learn_the_ranking(toy_store, host_platform, name):
    store, table = toy_store
    feats, _ = _features(store, table, host_platform.name)
    x = pad_stores(feats)
    padded = pad_stores(feats, max_stores=x.shape[1] + 7)
    labels = np.asarray(table.column("label").to_pylist(), np.float32)
    groups = np.unique(table.column("task_key").to_pylist(), return_inverse=True)[1]

    def trained(target):
        torch.manual_seed(0)
        model = build_model(name, feat_dim=FEATURE_DIM, seq_len=None, seed=0)
        # 16 rows: 30 epochs under-fit them (0.66-0.84 pairwise on the training rows, by machine); 150 reach 0.9+.
        fit(model, x, target, groups, TrainConfig(epochs=150, batch_size=64, seed=0))
        return model

    model = trained(labels)
    a, b = predict(model, x), predict(model, padded)
    assert np.isfinite(a).all()
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)
    # ...while the stores themselves matter, and their order by the label is what the model learns.
    assert not np.allclose(a, predict(model, np.zeros_like(x)))
    fitted = pairwise_accuracy(a, labels, groups)
    assert fitted > 0.7 and pairwise_accuracy(predict(trained(-labels), x), labels, groups) < 1 - 0.7, fitted


def test_xgb_ranker_trains_and_scores(toy_store, host_platform):
    store, table = toy_store
    feats, _ = _features(store, table, host_platform.name)
    x = sum_stores(feats)
    labels = np.asarray(table.column("label").to_pylist(), np.float32)
    groups = np.unique(table.column("task_key").to_pylist(), return_inverse=True)[1]
    ranker = XGBRanker(XGBConfig(rounds=30, seed=0)).fit(x, labels, groups)
    scores = ranker.score(x)
    assert scores.shape == (len(x),) and np.isfinite(scores).all()
    np.testing.assert_array_equal(scores, XGBRanker(XGBConfig(rounds=30, seed=0)).fit(x, labels, groups).score(x))
    assert pairwise_accuracy(scores, labels, groups) > 0.6  # it fits its training data
    assert ranker.size_bytes() > 0 and ranker.n_nodes() > 0


def test_bench_models_runs_end_to_end(toy_store, params, host_platform, tmp_path):
    """The benchmark script on the toy store: toy_b held out as the test network."""
    from tcl.features.dataset import featurize_platforms

    store, _ = toy_store
    validated = tmp_path / f"platform={host_platform.name}.parquet"
    pq.write_table(store.read(host_platform.name), validated)
    bench_params = dict(params, split={"holdout_networks": ["toy_b"], "val_fraction": 0.0})
    featurize_platforms([host_platform], bench_params, tmp_path, store.root, tmp_path / "features")
    from benchmarks import bench_models as bench
    models = ["tcl", "tenset_mlp", "tcl_stores", "xgb", "pacm"]
    result = bench.run(host_platform.name, bench_params, epochs=1, seed=0, models=models,
                       features_root=tmp_path / "features", validated=validated, store_root=store.root,
                       xgb_rounds=5, log=lambda _: None)
    assert result["eval_split"] == "test" and result["rows"]["test"] == 8
    assert [r["name"] for r in result["models"]] == models
    assert {r["name"]: r["epochs"] for r in result["models"]} == {**dict.fromkeys(models, 1), "xgb": None}
    for r in result["models"]:
        assert 0 < r["top1_ratio_of_sums"] <= 1 and r["infer_per_s"] > 0 and r["featurize_per_s"] > 0, r
    assert (tmp_path / "features" / f"{host_platform.name}.per_store.npz").exists()
    assert "Tenset-MLP" in bench.render(result)


@pytest.mark.parametrize("name", ["tenset_mlp", "tcl_stores"])
def test_per_store_bundle_is_a_metaschedule_cost_model_that_sees_its_training_features(
        toy_store, host_platform, tmp_path, name):
    """Trained on stored records, saved, loaded, and used by MetaSchedule: at tuning time its
    featurizer must give the very features it was trained on (else its scores mean nothing)."""
    import json

    import tvm
    from tvm.s_tir import meta_schedule as ms

    from tcl.features.per_store import PerStoreFeaturizer, context, replay
    from tcl.models.bundle import ModelBundle
    from tcl.tvm.cost_model import LearnedCostModel
    from tcl.tvm.online import OnlineSettings

    store, table = toy_store
    feats, _ = _features(store, table, host_platform.name)
    x = pad_stores(feats)
    labels = np.asarray(table.column("label").to_pylist(), np.float32)
    groups = np.unique(table.column("task_key").to_pylist(), return_inverse=True)[1]
    model = build_model(name, feat_dim=FEATURE_DIM, seq_len=x.shape[1], seed=0)
    fit(model, x, labels, groups, TrainConfig(epochs=5, batch_size=64, seed=0))
    bundle = ModelBundle(name, model, PerStoreFeaturizer(x.shape[1]), host_platform.name,
                         host_platform.spec_vector, {})
    loaded = ModelBundle.load(bundle.save(tmp_path / "bundle"))
    assert isinstance(loaded.featurizer, PerStoreFeaturizer) and loaded.featurizer.max_stores == x.shape[1]

    # The stored programs of one task, replayed as MetaSchedule candidates under a TuneContext.
    key = table.column("task_key")[0].as_py()
    rows = [i for i, k in enumerate(table.column("task_key").to_pylist()) if k == key and feats[i] is not None]
    mod = tvm.ir.load_json((workload_dir(store.root, host_platform.name) / f"{key}.json").read_text())
    cands, _ = replay(mod, [table.column("program")[i].as_py() for i in rows])
    ctx = context(mod, tvm.target.Target(json.loads(table.column("target")[0].as_py())))
    np.testing.assert_allclose(loaded.score_candidates(ctx, cands), predict(model, x[rows]), rtol=1e-5, atol=1e-6)

    cost_model = LearnedCostModel(loaded, adaptation="ft", settings=OnlineSettings(steps=2))
    scores = cost_model.predict(ctx, cands)
    # a candidate scored again is not lowered again, and scores the same
    assert (cost_model.features.hits, cost_model.features.misses) == (0, len(cands))
    np.testing.assert_array_equal(cost_model.predict(ctx, cands[::-1]), scores[::-1])
    assert (cost_model.features.hits, cost_model.features.misses) == (len(cands), len(cands))
    assert cost_model.features.hit_rate == 0.5
    assert scores.dtype == np.float64 and (scores >= 0).all() and len(set(np.round(scores, 9))) > 1
    results = [ms.runner.RunnerResult(run_secs=[float(1 + i)], error_msg=None) for i in range(len(cands))]
    cost_model.update(ctx, cands, results)  # online fine-tuning on per-store rows of any width
    assert not np.allclose(cost_model.predict(ctx, cands), scores)


def test_pacm_learns_the_measured_ranking_and_scores_candidates_as_it_was_trained(
        toy_store, host_platform, tmp_path):
    """PaCM on the records' PerStoreFeature + dataflow blocks: it fits the measured order (and the
    reversed order when trained on it: a sign flip shows), and its bundle featurizes MetaSchedule
    candidates at tuning time into the very input it was trained on."""
    import json

    import tvm

    from tcl.features.dataflow import PACKED_DIM, PacmFeaturizer, dataflow_rows, platform_levels
    from tcl.features.per_store import context, replay
    from tcl.models.bundle import ModelBundle

    store, table = toy_store
    stores, _ = _features(store, table, host_platform.name)
    levels = platform_levels(host_platform)
    blocks, errors = record_features(table, [workload_dir(store.root, host_platform.name)], tmp_path / "df.npz",
                                     kind=dataflow_rows(levels))
    assert all(b is not None and len(b) for b in blocks), errors
    featurizer = PacmFeaturizer(max(len(s) for s in stores if s is not None), max(len(b) for b in blocks), levels)
    x = featurizer.pack(stores, blocks)
    labels = np.asarray(table.column("label").to_pylist(), np.float32)
    groups = np.unique(table.column("task_key").to_pylist(), return_inverse=True)[1]

    def trained(y):
        model = build_model("pacm", feat_dim=PACKED_DIM, seq_len=x.shape[1], seed=0, hidden=32)
        fit(model, x, y, groups, TrainConfig(epochs=100, batch_size=64, lr=3e-3, seed=0))
        return model

    model = trained(labels)
    fitted = pairwise_accuracy(predict(model, x), labels, groups)
    reversed_ = pairwise_accuracy(predict(trained(-labels), x), labels, groups)
    assert fitted > 0.75 and reversed_ < 0.5, (fitted, reversed_)

    loaded = ModelBundle.load(ModelBundle("pacm", model, featurizer, host_platform.name, host_platform.spec_vector,
                                          {}).save(tmp_path / "bundle"))
    assert loaded.featurizer.levels == featurizer.levels and loaded.featurizer.feature_shape == x.shape[1:]
    key = table.column("task_key")[0].as_py()
    rows = [i for i, k in enumerate(table.column("task_key").to_pylist()) if k == key and stores[i] is not None]
    mod = tvm.ir.load_json((workload_dir(store.root, host_platform.name) / f"{key}.json").read_text())
    cands, _ = replay(mod, [table.column("program")[i].as_py() for i in rows])
    ctx = context(mod, tvm.target.Target(json.loads(table.column("target")[0].as_py())))
    np.testing.assert_array_equal(loaded.featurize_candidates(ctx, cands), x[rows])
    np.testing.assert_allclose(loaded.score_candidates(ctx, cands), predict(model, x[rows]), rtol=1e-5, atol=1e-6)
