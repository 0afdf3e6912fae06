"""Model selection from a real MLflow registry, the learned cost model inside
MetaSchedule, and the GPU path (run on a CUDA machine, skipped here with the reason)."""

from __future__ import annotations

import numpy as np
import pytest

from tcl.features.tokenizer import Tokenizer
from tcl.models import build_model
from tcl.platforms import load_platforms, require_device
from tcl.models.bundle import ModelBundle

from test_foundation import TRACE


@pytest.fixture()
def registry(tmp_path, monkeypatch):
    import mlflow

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    mlflow.set_tracking_uri(uri)
    mlflow.set_experiment("test")
    yield mlflow
    mlflow.set_tracking_uri(None)


def _bundle(platform) -> ModelBundle:
    from tcl.data.metaschedule import trace_to_steps

    tokenizer = Tokenizer.for_kind("cpu").fit([trace_to_steps(TRACE)], [platform.spec_vector])
    rows, cols = tokenizer.feature_shape
    return ModelBundle("tcl", build_model("tcl", feat_dim=cols, seq_len=rows), tokenizer, platform.name,
                       platform.spec_vector, {})


def _register(mlflow, bundle, tmp_path, score, evidence=None, model="tcl"):
    """A new version of the bundle as `tcl-<model>-<platform>`, made champion directly (the gate is
    tests/test_promotion.py's)."""
    from tcl import tracking

    x = bundle.featurizer.transform([[{"kind": "Split", "nums": [1.0], "strs": []}]], [bundle.spec_vector])
    name = f"tcl-{model}-{bundle.platform}"
    with mlflow.start_run():
        version = tracking.registry.log_version(
            bundle, bundle.save(tmp_path / f"b{score}"), name, x,
            tags={"platform": bundle.platform, **tracking.version_tags({}, "md5-test", {"val_top1": score}),
                  **(evidence or {})})
    tracking.registry.set_champion(name, version)
    return version


def test_registered_champion_loads_as_the_model_it_was(registry, tmp_path, params):
    platform = load_platforms(params)["host-avx2-2c"]
    bundle = _bundle(platform)
    assert _register(registry, bundle, tmp_path, 0.5) == "1"
    from tcl.tvm.cost_model import load_bundle

    loaded = load_bundle("models:/tcl-tcl-host-avx2-2c@champion")
    steps = [[{"kind": "Split", "nums": [1.0, 0.0], "strs": []}]]
    np.testing.assert_allclose(loaded.score_steps(steps), bundle.score_steps(steps), rtol=1e-6)


def test_selection_prefers_own_champion_then_nearest_platform_by_spec(registry, tmp_path, params):
    from tcl.tvm.select import select_model

    platforms = load_platforms(params)
    with pytest.raises(LookupError, match=r"python -m flows\.register"):   # the committed pipeline registers tcl
        select_model(platforms["host-sse4-1c"], platforms, "tcl", "tcl")
    _register(registry, _bundle(platforms["host-avx2-2c"]), tmp_path, 0.5)
    _register(registry, _bundle(platforms["host-avx512-2c"]), tmp_path, 0.5)
    own = select_model(platforms["host-avx512-2c"], platforms, "tcl", "tcl")
    assert own.platform == "host-avx512-2c" and own.uri == f"models:/tcl-tcl-host-avx512-2c/{own.version}"
    assert own.version == "1" and own.data_version
    # The 1-thread SSE4 variant has no model: its nearest spec neighbour is the AVX2 one (16 vs 32 vs 64 B SIMD).
    near = select_model(platforms["host-sse4-1c"], platforms, "tcl", "tcl")
    assert near.platform == "host-avx2-2c" and "nearest platform" in near.reason


def test_selection_prefers_a_platform_measured_on_this_cpu_over_a_nearer_spec(registry, tmp_path, params):
    """The labels of a platform measured here are this machine's; a closer spec measured elsewhere is not."""
    from tcl.platforms import this_cpu
    from tcl.tvm.select import select_model

    cpu = this_cpu()
    base = params["platforms"]["local-1c"]
    here = {"vendor": cpu["vendor"], "family": cpu["family"], "model": cpu["model"]}
    wide = dict(base["specs"], simd_bytes=64, l1_kb=64)
    extra = {"here-wide": dict(base, host=here, specs=wide),
             "elsewhere-same": dict(base, host=dict(here, family=cpu["family"] + 1))}
    platforms = load_platforms({**params, "platforms": {**params["platforms"], **extra}})
    for name in extra:
        _register(registry, _bundle(platforms[name]), tmp_path / name, 0.5)
    chosen = select_model(platforms["local-1c"], platforms, "tcl", "tcl")
    assert chosen.platform == "here-wide" and "measured on this CPU" in chosen.reason


def test_an_unknown_cpu_gets_the_model_with_the_most_lift_on_the_most_evidence(registry, tmp_path, params):
    """Raw top-1 on a 4-task held-out split (where random already scores 0.40) does not beat a smaller
    top-1 that is further above random on 48 tasks; a version without evidence tags comes last."""
    from tcl.platforms import this_cpu
    from tcl.tvm.select import select_model

    cpu = this_cpu()
    base = params["platforms"]["local-1c"]
    here = {"vendor": cpu["vendor"], "family": cpu["family"], "model": cpu["model"]}
    extra = {"few-tasks": dict(base, specs=dict(base["specs"], l2_kb=513)),          # nearest spec
             "many-tasks": dict(base, specs=dict(base["specs"], simd_bytes=64, l1_kb=64)),
             "no-evidence-here": dict(base, host=here)}                             # measured on this CPU
    platforms = load_platforms({**params, "platforms": {**params["platforms"], **extra}})
    evidence = {"few-tasks": {"score.test_top1": "0.57", "score.random_test_top1": "0.40", "eval.test_tasks": "4",
                              "train_rows": "640"},
                "many-tasks": {"score.test_top1": "0.26", "score.random_test_top1": "0.17",
                               "eval.test_tasks": "48", "train_rows": "807"},
                "no-evidence-here": {}}
    for name in extra:
        _register(registry, _bundle(platforms[name]), tmp_path / name, 0.5, evidence[name])
    chosen = select_model(platforms["local-1c"], platforms, "tcl", "tcl")
    assert chosen.platform == "many-tasks", chosen.reason
    assert "expected lift" in chosen.reason and "48 held-out tasks" in chosen.reason
    assert "few-tasks" in chosen.reason and "no-evidence-here: no evidence" in chosen.reason


def test_a_new_cpu_gets_the_knowledge_base_prior_of_its_vector_width_before_more_lift_elsewhere(registry, tmp_path,
                                                                                               params):
    """Zen 1 (AVX2) without a prior of its own: the AVX2 knowledge base's, though an AVX-512 one shows more lift;
    within its ISA class the lift decides. Per-platform models keep the evidence rule alone."""
    from tcl.tvm.select import select_model

    platforms = load_platforms(params)
    evidence = {"zen4-avx512-1c": {"score.test_top1": "0.80", "score.random_test_top1": "0.15",
                                   "eval.test_tasks": "48", "train_rows": "8000"},
                "zen3-avx2-1c": {"score.test_top1": "0.40", "score.random_test_top1": "0.15",
                                 "eval.test_tasks": "10", "train_rows": "2000"},
                "zen4-avx2-1c": {"score.test_top1": "0.50", "score.random_test_top1": "0.15",
                                 "eval.test_tasks": "20", "train_rows": "4000"}}
    for name, tags in evidence.items():
        for model in ("xgb_kb", "tcl"):
            _register(registry, _bundle(platforms[name]), tmp_path / model / name, 0.5, tags, model)
    chosen = select_model(platforms["zen1-avx2-1c"], platforms, "tcl", "xgb_kb")
    assert chosen.platform == "zen4-avx2-1c", chosen.reason
    assert "of its ISA class (cpu, 32-byte vectors, 1 thread)" in chosen.reason and "zen4-avx512-1c" in chosen.reason
    assert select_model(platforms["zen1-avx2-1c"], platforms, "tcl", "tcl").platform == "zen4-avx512-1c"
    # No AVX-512 prior is registered: the AVX-512 CPU gets the most lift of another class, and is told so.
    others = {n: platforms[n] for n in ["emr-avx512-1c", "zen3-avx2-1c", "zen4-avx2-1c"]}
    fallback = select_model(platforms["emr-avx512-1c"], others, "tcl", "xgb_kb")
    assert fallback.platform == "zen4-avx2-1c", fallback.reason
    assert "none of its ISA class (cpu, 64-byte vectors, 1 thread) has one" in fallback.reason


@pytest.mark.slow
def test_learned_cost_model_scores_metaschedule_candidates(params, host_platform):
    """The bundle as a PyCostModel: non-negative float64 scores for real candidates."""
    from tvm.s_tir import meta_schedule as ms

    from conftest import toy_matmul_task
    from tcl.tvm.cost_model import LearnedCostModel

    task = toy_matmul_task()
    ctx = ms.TuneContext(task.mod, target=host_platform.tvm_target(), space_generator="post-order-apply",
                         search_strategy="evolutionary", rand_state=1, num_threads=1)
    ctx.pre_tuning(max_trials=8, num_trials_per_iter=8, database=ms.database.MemoryDatabase(),
                   cost_model=ms.cost_model.RandomModel(seed=1))
    candidates = ctx.generate_measure_candidates()
    model = LearnedCostModel(_bundle(host_platform))
    scores = model.predict(ctx, candidates)
    assert scores.dtype == np.float64 and scores.shape == (len(candidates),) and (scores >= 0).all()
    assert len(set(np.round(scores, 9))) > 1  # different schedules, different scores


def test_gpu_platform_fails_early_by_name_without_cuda(params):
    import tvm

    if tvm.cuda(0).exist:
        pytest.skip("this machine has CUDA: the GPU path is exercised by test_gpu_collection_on_cuda")
    with pytest.raises(RuntimeError, match="nvidia-h100.*needs a CUDA device"):
        require_device(load_platforms(params)["nvidia-h100"])


@pytest.mark.slow
def test_gpu_collection_on_cuda(tmp_path, params):
    import tvm

    if not tvm.cuda(0).exist:
        pytest.skip("no CUDA device on this machine (tvm.cuda(0).exist is False): GPU collection is tested "
                    "only where one is present")
    from conftest import toy_matmul_task
    from tcl.collect.collector import measure_task
    from tcl.collect.measure import LocalMeasurer
    from tcl.data.store import RecordStore

    gpu = load_platforms(params)["nvidia-h100"]
    measurer = LocalMeasurer(gpu.tvm_target(), 1, {"timeout_sec": 120}, {"number": 2, "repeat": 2})
    cfg = dict(params["collect"], pool_size=4, batch_size=4)
    store = RecordStore(tmp_path)
    measure_task(toy_matmul_task(64), gpu, gpu, store, measurer, cfg, 0, lambda n: None)
    rows = store.read(gpu.name).to_pylist()
    assert len(rows) == 4 and any(not r["error_code"] and r["mean_sec"] > 0 for r in rows)


def test_a_pinned_bundle_keeps_its_weights_when_the_registry_moves_on(registry, tmp_path, params):
    """bench_tune's pin: saved once from the champion, loaded later by `tune.bundles` with its
    registered version, even after another version became champion; edited files are refused."""
    import copy

    from tcl.tvm.pinned import pin_bundle
    from tcl.tvm.stage import cost_model_factories, registered_choice

    platform = load_platforms(params)["host-avx2-2c"]
    first = _bundle(platform)
    _register(registry, first, tmp_path, 0.5)
    pin_dir = tmp_path / "pinned" / "tcl"
    pin = pin_bundle(pin_dir, lambda: registered_choice("tcl", platform, params, print))
    assert (pin["registered_model"], pin["version"]) == ("tcl-tcl-host-avx2-2c", "1")

    import torch

    torch.manual_seed(1)
    _register(registry, _bundle(platform), tmp_path, 0.6)  # other weights, now the champion
    assert pin_bundle(pin_dir, lambda: pytest.fail("a pinned bundle is not resolved again")) == pin

    run_params = copy.deepcopy(params)
    run_params["tune"]["bundles"] = {"tcl": str(pin_dir)}
    factories, pins = cost_model_factories(["tcl", "random"], platform, run_params, print)
    assert pins == {"tcl": pin} and sorted(factories) == ["random", "tcl"]
    steps = [[{"kind": "Split", "nums": [1.0, 0.0], "strs": []}]]
    np.testing.assert_allclose(factories["tcl"]().bundle.score_steps(steps), first.score_steps(steps), rtol=1e-6)
    unpinned = registered_choice("tcl", platform, params, print)[0]
    assert not np.allclose(unpinned.score_steps(steps), first.score_steps(steps))  # the registry's is v2

    # a pin from before bundles kept their training operator types gets them, the weights' digest kept
    from tcl.tvm.pinned import add_op_types, load_pinned, weight_digests

    amended = add_op_types(pin_dir, {"conv2d": 3}, "a test's split")
    assert amended["sha256"] != pin["sha256"] and weight_digests(amended) == {amended["sha256"], pin["sha256"]}
    assert load_pinned(pin_dir)[0].op_types == {"conv2d": 3} and first.op_types is None
    with pytest.raises(ValueError, match="already names"):
        add_op_types(pin_dir, {"conv2d": 4}, "again")

    weights = pin_dir / "model.pt"
    weights.write_bytes(weights.read_bytes() + b"\0")
    with pytest.raises(ValueError, match=r"pinned.tcl: its files changed since they were pinned"):
        cost_model_factories(["tcl"], platform, run_params, print)
