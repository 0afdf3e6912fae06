"""Search control inside MetaSchedule: Moses's adaptive controller (tcl.tvm.controller) and Pruner's
draft-then-verify wrapper (tcl.tvm.draft), on real tuning runs of a tiny network."""

from __future__ import annotations

import math

import pytest

from tcl.tvm.controller import ControllerSettings


def test_controller_stops_a_settled_task_and_keeps_a_falling_one():
    settings = ControllerSettings(window=3, cv_threshold=0.01)
    identical = [2e-3, 2e-3, 2e-3]
    falling = [4e-3, 3e-3, 2e-3]
    assert settings.settled(identical)
    assert not settings.settled(falling)
    assert not settings.settled(identical[:2])                     # fewer batches than the window
    assert not settings.settled([math.inf, 2e-3, 2e-3])            # a batch before any program ran
    assert settings.settled(falling + [1.999e-3, 1.999e-3, 1.998e-3])  # only the last `window` count


def test_a_heavy_task_needs_a_longer_plateau_than_a_light_one():
    from tvm.s_tir.meta_schedule.runner import RunnerResult
    from tvm.s_tir.meta_schedule.task_scheduler import TaskScheduler

    from tcl.tvm.controller import TaskLedger
    from tcl.tvm.curve import CurveRecorder

    ledger = TaskLedger()
    ledger.order = {"heavy": 0, "light": 1, "unmeasured": 2}
    assert ledger.load("heavy") == 1.0                              # before tuning starts: an average task
    ledger.curve = CurveRecorder([3.0, 1.0, 1.0])
    scheduler = TaskScheduler.create("round-robin")
    for task_id in (0, 1):                                          # one batch each, 2 ms at best
        ledger.curve.apply(scheduler, task_id, [], [], [RunnerResult(run_secs=[2e-3], error_msg=None),
                                                   RunnerResult(run_secs=None, error_msg="build failed")])
    assert ledger.load("heavy") == pytest.approx(1.5) and ledger.load("light") == pytest.approx(0.5)
    assert ledger.load("unmeasured") == 1.0                         # no estimate yet: an average task
    assert ledger.history("heavy", "best_so_far") == [2e-3] and ledger.history("unmeasured", "batch_best") == []
    ledger.curve.apply(scheduler, 0, [], [], [RunnerResult(run_secs=[3e-3], error_msg=None)])  # slower: best stays
    assert ledger.history("heavy", "best_so_far") == [2e-3, 2e-3]
    assert ledger.history("heavy", "batch_best") == [2e-3, 3e-3]  # ... while the batch itself was slower
    flat = [2e-3] * 4
    scaled = ControllerSettings(window=4, cv_threshold=0.01, scale_window=True)
    assert scaled.settled(flat, ledger.load("light"))               # a light task keeps the plain window
    assert not scaled.settled(flat, ledger.load("heavy"))           # 1.5 x 4 = 6 flat batches needed
    assert scaled.settled([3e-3] + flat + flat[:2], ledger.load("heavy"))
    assert not scaled.settled([3e-3] + flat + flat[:1], ledger.load("heavy"))  # the sixth batch back moved
    assert ControllerSettings(window=4, cv_threshold=0.01).settled(flat, ledger.load("heavy"))  # off: Moses's rule


def test_mosess_test_reads_each_batchs_own_best_not_the_flat_best_so_far():
    """A narrow search that finds nothing better keeps the best so far flat while its batches still differ: Moses's
    CV over the batches' own bests keeps such a task, and stops one whose batches are equally fast."""
    from tvm.s_tir.meta_schedule.runner import RunnerResult
    from tvm.s_tir.meta_schedule.task_scheduler import TaskScheduler

    from tcl.tvm.controller import SettlingSearch, TaskLedger
    from tcl.tvm.curve import CurveRecorder

    ledger = TaskLedger()
    ledger.order = {"moving": 0, "steady": 1}
    ledger.curve = CurveRecorder([1.0, 1.0])
    scheduler = TaskScheduler.create("round-robin")
    for moving, steady in ((1e-3, 2e-3), (3e-3, 2e-3), (1.6e-3, 2e-3), (2.4e-3, 2e-3)):
        for task_id, secs in ((0, moving), (1, steady)):
            ledger.curve.apply(scheduler, task_id, [], [], [RunnerResult(run_secs=[secs], error_msg=None),
                                                           RunnerResult(run_secs=[secs * 2], error_msg=None)])
    assert ledger.history("moving", "batch_best") == [1e-3, 3e-3, 1.6e-3, 2.4e-3]
    assert ledger.history("moving", "best_so_far") == [1e-3] * 4                   # the best so far never moved
    moses = ControllerSettings(window=4, cv_threshold=0.01)
    assert moses.statistic == "batch_best"

    class Asked:  # stands in for the task's EvolutionarySearch: records that the controller let it generate
        asked = 0

        def generate_measure_candidates(self):
            Asked.asked += 1

    search = SettlingSearch(Asked(), moses, ledger)
    for task in ("moving", "steady"):
        search.task = task
        assert search.generate_measure_candidates() is None
    assert ledger.stopped == ["steady"] and Asked.asked == 1        # the moving task's search went on
    best_so_far = ControllerSettings(window=4, cv_threshold=0.01, statistic="best_so_far")
    assert best_so_far.settled(ledger.history("moving", best_so_far.statistic))   # the earlier rule ends it
    # a batch in which nothing ran is no evidence of a plateau
    ledger.curve.apply(scheduler, 1, [], [], [RunnerResult(run_secs=None, error_msg="timeout")])
    assert ledger.history("steady", "batch_best")[-1] == math.inf and not moses.settled(
        ledger.history("steady", "batch_best"))
    with pytest.raises(ValueError, match="statistic"):
        ControllerSettings(statistic="median")


def test_a_controlled_search_needs_the_runs_ledger():
    from tcl.tvm.tuning import SearchSettings

    # without the ledger (and its CurveRecorder) the controller would see no history and never end a task
    with pytest.raises(ValueError, match="TaskLedger"):
        SearchSettings().strategy(ControllerSettings(enabled=True))


def test_controller_settings_are_strict():
    assert ControllerSettings.from_params({"tune": {"controller": {"window": 5}}}).window == 5
    with pytest.raises(ValueError, match=r"tune\.controller"):
        ControllerSettings.from_params({"tune": {"controller": {"cv": 0.1}}})
    with pytest.raises(ValueError, match=r"tune\.controller"):
        ControllerSettings(window=1)


def test_a_run_drafts_when_every_model_does_or_its_name_asks():
    from tcl.tvm.draft import DraftSettings

    off, on = DraftSettings(), DraftSettings(enabled=True, population=64, verify=8)
    assert off.for_run(False) is None and off.for_run(True) == off
    assert on.for_run(False) == on
    with pytest.raises(ValueError, match=r"tune\.draft"):
        DraftSettings.from_params({"tune": {"draft": {"verify": 0}}})


def test_a_drafting_run_spreads_its_batches_over_sketches_as_the_draft_says():
    """The draft's population and its spread replace the search's; a search that spreads tighter keeps its own,
    and the run records what it searched with (bench_tune tells runs apart by it)."""
    from tcl.tvm.draft import DraftSettings
    from tcl.tvm.tuning import SearchSettings, recorded_settings

    draft = DraftSettings(population=256, verify=32, max_sketch_share=0.25)
    search = draft.search(SearchSettings())
    assert (search.population, search.max_sketch_share) == (256, 0.25)
    assert draft.search(SearchSettings(max_sketch_share=0.125)).max_sketch_share == 0.125
    assert DraftSettings(max_sketch_share=1.0).search(SearchSettings()).max_sketch_share == 1.0
    recorded = recorded_settings(SearchSettings(), draft, psa={})
    assert (recorded["population"], recorded["max_sketch_share"], recorded["draft_verify"]) == (256, 0.25, 32)
    with pytest.raises(ValueError, match=r"tune\.draft\.max_sketch_share"):
        DraftSettings.from_params({"tune": {"draft": {"max_sketch_share": 0}}})


def _tune(tiny_cnn, host_platform, measurer, tmp_path, cost_model, name, trials, **kw):
    from tcl.tvm.tuning import SearchSettings, tune_network

    return tune_network(tiny_cnn, host_platform, network="tiny_cnn", cost_model=cost_model,
                        cost_model_name=name, trials=trials, work_dir=tmp_path / name, num_trials_per_iter=4,
                        progress=False, measurer=measurer, search=SearchSettings(population=32, genetic_iters=1),
                        **kw)


@pytest.mark.slow
def test_controller_ends_settled_tasks_under_the_gradient_scheduler(tiny_cnn, host_platform, measurer, tmp_path):
    from tvm.s_tir import meta_schedule as ms

    from tcl.tvm.draft import DraftSettings

    # every task counts as settled after two batches (any CV is below 1e9): each is ended in turn; the
    # name's modifiers switch both the controller and the draft on (their settings say enabled: false)
    result = _tune(tiny_cnn, host_platform, measurer, tmp_path, ms.cost_model.RandomModel(seed=0),
                   "random+draft+moses", trials=64, controller=ControllerSettings(window=2, cv_threshold=1e9),
                   draft=DraftSettings(population=48, verify=8))
    assert result.tasks >= 2
    assert len(result.stopped_tasks) >= result.tasks - 1, result.stopped_tasks
    assert result.trials < 64  # the budget is not spent on tasks that stopped moving
    assert math.isfinite(result.final_estimate)
    # the run records the settings in force: the draft's population replaced the search's 32
    assert result.settings["population"] == 48 and result.settings["draft_verify"] == 8
    assert result.settings["controller"] == {"enabled": True, "window": 2, "cv_threshold": 1e9,
                                             "scale_window": False, "statistic": "batch_best"}
    # PSA's time is part of the cost model's and reported apart (the <= 0.10 share goal is read off both)
    assert 0 < result.draft_share <= result.cost_model_share


@pytest.mark.slow
def test_a_scaled_window_keeps_measuring_the_task_that_carries_the_estimate(tiny_cnn, host_platform, measurer,
                                                                           tmp_path):
    from tvm.s_tir import meta_schedule as ms

    # any CV counts as settled: with the plain window of two every task ends after two batches (8 trials);
    # scaled by load, a task above the average share of the estimate needs three or more
    result = _tune(tiny_cnn, host_platform, measurer, tmp_path, ms.cost_model.RandomModel(seed=0), "random+moses",
                   trials=96, controller=ControllerSettings(window=2, cv_threshold=1e9, scale_window=True))
    trials = {t["task"]: t["trials"] for t in result.task_results}
    latency = {t["task"]: t["weight"] * t["best_us"] for t in result.task_results}
    heaviest = max(latency, key=latency.get)
    assert trials[heaviest] > 8, trials
    assert min(trials.values()) <= 8, trials        # a light task still ends on the plain window


def test_the_controller_ledger_knows_every_task_by_its_tuning_name_and_weight(tiny_cnn, host_platform, tmp_path):
    from tcl.tvm.controller import TaskLedger
    from tcl.tvm.curve import CurveRecorder
    from tcl.tvm.tuning import tune_contexts

    ledger = TaskLedger()
    contexts, weights = tune_contexts(tiny_cnn, host_platform, tmp_path, 0, controller=ControllerSettings(),
                                      ledger=ledger)
    assert ledger.order == {str(ctx.task_name): i for i, ctx in enumerate(contexts)}
    ledger.curve = CurveRecorder(weights)
    ledger.curve.best[:] = [1e-3] * len(weights)                   # every task at 1 ms: loads follow the weights
    for ctx, weight in zip(contexts, weights):
        assert ledger.load(str(ctx.task_name)) == pytest.approx(weight / sum(weights) * len(weights))


@pytest.mark.slow
def test_a_wide_first_batch_runs_under_the_gradient_scheduler_without_measuring_a_program_twice(
        tiny_cnn, host_platform, measurer, tmp_path):
    from tvm.s_tir import meta_schedule as ms

    from tcl.tvm.tuning import SearchSettings, tune_network

    search = SearchSettings(population=16, genetic_iters=1, wide_batches=1,
                            wide=SearchSettings(population=48, genetic_iters=1))
    result = tune_network(tiny_cnn, host_platform, network="tiny_cnn", cost_model=ms.cost_model.RandomModel(seed=0),
                          cost_model_name="random", trials=32, work_dir=tmp_path / "wide", num_trials_per_iter=4,
                          progress=False, measurer=measurer, search=search)
    assert result.trials >= 24 and math.isfinite(result.final_estimate)
    assert result.settings["wide_batches"] == 1 and result.settings["wide"]["population"] == 48
    traces: dict[str, list[str]] = {}
    for record in result.database.get_all_tuning_records():
        traces.setdefault(str(record.workload.mod), []).append(str(record.trace))
    assert all(len(t) == len(set(t)) for t in traces.values()), "a program measured twice in one task"

def test_draft_verifies_only_psa_top_candidates(params, host_platform):
    import numpy as np
    from tvm.s_tir import meta_schedule as ms

    from tcl.tvm.draft import DraftThenVerify
    from tcl.tvm.psa import make_analyzer
    from tcl.tvm.timed import TimedCostModel
    from test_psa import _matmul

    mods = [_matmul(128, tile, vector) for tile in (8, 16, 32, 64, 128) for vector in (0, 8)]
    args = ms.arg_info.ArgInfo.from_prim_func(mods[0]["main"])
    candidates = [ms.MeasureCandidate(ms_schedule(m), args) for m in mods]
    psa = make_analyzer(host_platform, params)

    class CountingAnalyzer:
        analysed = 0

        def scores(self, programs):
            self.analysed += len(programs)
            return psa.scores(programs)

    analyzer = CountingAnalyzer()
    inner = TimedCostModel(ms.cost_model.RandomModel(seed=0))
    context = ms.TuneContext(mod=mods[0], target=host_platform.tvm_target(), num_threads=1)
    drafting = DraftThenVerify(inner, analyzer, verify=4)
    scores = drafting.predict(context, candidates)
    assert inner.predicted == 4  # the learned model saw only the drafted top 4
    draft_order = np.argsort(-psa.scores(mods), kind="stable")
    top, rest = draft_order[:4], draft_order[4:]
    assert scores[rest].max() < scores[top].min() and (scores >= 0).all()
    assert (np.diff(scores[rest]) < 0).all()  # the rest keep PSA's order
    # the next generation re-scores the survivors: PSA's scores come from the cache, in the same order
    assert analyzer.analysed == len(mods)
    again = drafting.draft(context, candidates[::-1])
    assert analyzer.analysed == len(mods) and drafting.psa_scores.hits == len(mods)
    assert np.array_equal(again, psa.scores(mods[::-1]))


def ms_schedule(mod):
    import tvm

    return tvm.s_tir.Schedule(mod)


def test_names_carry_search_modifiers():
    from tcl.tvm.names import parse_cost_model

    spec = parse_cost_model("tcl+moa+draft+moses")
    assert (spec.base, spec.adaptation, spec.draft, spec.moses) == ("tcl", "moa", True, True)
    assert parse_cost_model("tcl+draft").adaptation == "frozen"
    assert parse_cost_model("xgb+moses").builtin and parse_cost_model("xgb+moses").moses
    assert not parse_cost_model("pretrained_xgb+boost").draft
    for bad in ("tcl+moa+ft", "xgb+moa+draft", "tcl+draft+warp", "draft", "tcl+draft+draft"):
        with pytest.raises(ValueError, match="tune.cost_models"):
            parse_cost_model(bad)
    # a misspelled model fails when the name is read, listing the names there are
    with pytest.raises(ValueError, match=r"no cost model is called 'tlc'.*'tenset_mlp'"):
        parse_cost_model("tlc+moa")
    assert parse_cost_model("ckd").registered == "ckd" and parse_cost_model("pretrained_xgb").registered == "xgb"


def _matmul_context(seed: int = 0):
    """A 16x16 matmul's TuneContext, its design spaces and an empty database (search only: nothing is measured)."""
    import tvm
    from tvm.s_tir import meta_schedule as ms

    from conftest import toy_matmul_task

    task = toy_matmul_task(16)
    ctx = ms.TuneContext(mod=task.mod, target=tvm.target.Target({"kind": "llvm", "num-cores": 1}),
                         space_generator="post-order-apply", search_strategy="evolutionary",
                         task_name=task.name, rand_state=seed, num_threads=1)
    return ctx, ctx.space_generator.generate_design_space(task.mod), ms.database.MemoryDatabase()


class _Replay:
    """A stand-in narrow search that always proposes the same candidates (counts how often it was asked)."""

    def __init__(self, candidates):
        self.candidates, self.asked, self.notified = list(candidates), 0, 0

    def _initialize_with_tune_context(self, context):
        pass

    def pre_tuning(self, *args):
        pass

    def post_tuning(self):
        pass

    def generate_measure_candidates(self):
        self.asked += 1
        return self.candidates

    def notify_runner_results(self, candidates, results):
        self.notified += 1


def test_wide_start_searches_wide_first_then_narrow_and_never_sends_a_program_twice():
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule.utils import shash2hex

    from tcl.tvm.widestart import RETRIES, WideStartSearch

    ctx, spaces, db = _matmul_context()
    cost_model = ms.cost_model.RandomModel(seed=1)
    wide = ms.search_strategy.EvolutionarySearch(population_size=32, genetic_num_iters=1)
    other = ms.search_strategy.EvolutionarySearch(population_size=32, genetic_num_iters=1)
    other._initialize_with_tune_context(ctx)
    other.pre_tuning(64, 4, spaces, db, cost_model)
    narrow = _Replay([])
    search = WideStartSearch(wide, narrow, wide_batches=1)
    search._initialize_with_tune_context(ctx)
    search.pre_tuning(64, 4, spaces, db, cost_model)
    batch1 = list(search.generate_measure_candidates())
    assert narrow.asked == 0 and len(batch1) == 4, "the first batch is the wide search's"
    results = [ms.runner.RunnerResult(run_secs=[1e-3], error_msg=None) for _ in batch1]
    search.notify_runner_results(batch1, results)
    assert narrow.notified == 1, "the narrow search counts the wide batch's trials too"
    sent = {shash2hex(c.sch.mod) for c in batch1}
    fresh = [c for c in other.generate_measure_candidates() if shash2hex(c.sch.mod) not in sent]
    assert fresh
    narrow.candidates = batch1[:2] + fresh  # proposes two programs the wide search already sent
    sent = {shash2hex(c.sch.mod) for c in batch1}
    batch2 = list(search.generate_measure_candidates())
    assert narrow.asked == 1
    assert [shash2hex(c.sch.mod) for c in batch2] == [shash2hex(c.sch.mod) for c in fresh], \
        "the narrow batch without what the wide one sent"
    search.notify_runner_results(batch2, results[:len(batch2)])
    assert search.generate_measure_candidates() is None, "nothing new left: the task ends"
    assert narrow.asked == 1 + RETRIES
    search.post_tuning()
    other.post_tuning()


def test_learned_search_can_keep_the_wide_search_for_a_tasks_first_batches():
    from tcl.tvm.tuning import SearchSettings
    from tcl.tvm.widestart import WideStartSearch

    params = {"tune": {"search": {"population": 512, "genetic_iters": 4},
                       "learned_search": {"population": 256, "genetic_iters": 2, "wide_batches": 1}}}
    learned = SearchSettings.for_cost_model(params, "tenset_mlp")
    assert (learned.population, learned.wide_batches) == (256, 1)
    assert (learned.wide.population, learned.wide.genetic_iters, learned.wide.wide_batches) == (512, 4, 0)
    strategy = learned.strategy()
    assert isinstance(strategy, WideStartSearch) and strategy.wide_batches == 1
    assert (strategy.wide.population_size, strategy.narrow.population_size) == (512, 256)
    assert SearchSettings.for_cost_model(params, "xgb").wide is None, "TVM's xgb keeps tune.search"
    assert not isinstance(SearchSettings.for_cost_model({"tune": {"learned_search": {"population": 256}}},
                                                        "tcl").strategy(), WideStartSearch)
    with pytest.raises(ValueError, match="learned_search"):
        SearchSettings.from_params({"tune": {"search": {"wide_batches": 1}}})


@pytest.mark.slow
def test_boosted_trees_over_the_run_learn_from_every_task_metaschedule_measures(tiny_cnn, host_platform, measurer,
                                                                                tmp_path):
    """tune.online.boost_scope run: MetaSchedule's updates of every task feed one set of trees (a per-task
    booster would learn each task alone), and the run records the scope it tuned with."""
    from tcl.features.per_store import PerStoreFeaturizer
    from tcl.models import build_model
    from tcl.models.bundle import ModelBundle
    from tcl.tvm.cost_model import LearnedCostModel
    from tcl.tvm.online import OnlineSettings

    model = build_model("xgb", feat_dim=164, seq_len=None, seed=0)  # untrained: scores 0, the trees learn it all
    bundle = ModelBundle("xgb", model, PerStoreFeaturizer(16), host_platform.name, host_platform.spec_vector, {})
    cost_model = LearnedCostModel(bundle, adaptation="boost",
                                  settings=OnlineSettings(boost_rounds=5, boost_scope="run"))
    result = _tune(tiny_cnn, host_platform, measurer, tmp_path, cost_model, "pretrained_xgb+boost", trials=24)
    adapter = cost_model.adapter
    assert len(adapter.updates) >= 2, adapter.updates             # several tasks measured and handed over
    assert list(adapter.boosters) == [None]                        # ... into one booster, not one each
    assert result.settings["boost_scope"] == "run"


@pytest.mark.slow
def test_a_small_first_batch_gives_the_network_an_estimate_after_one_trial_a_task(tiny_cnn, host_platform, measurer,
                                                                                  tmp_path):
    """search.first_batch: the scheduler's first round measures that many of each task's programs, later batches
    the full num_trials_per_iter; so the network has its first estimate after tasks x first_batch trials."""
    from tvm.s_tir import meta_schedule as ms

    from tcl.tvm.firstbatch import FirstBatchSearch
    from tcl.tvm.tuning import SearchSettings, tune_network

    result = tune_network(tiny_cnn, host_platform, network="tiny_cnn", cost_model=ms.cost_model.RandomModel(seed=0),
                          cost_model_name="random", trials=24, work_dir=tmp_path / "first", num_trials_per_iter=4,
                          progress=False, measurer=measurer,
                          search=SearchSettings(population=32, genetic_iters=1, first_batch=1))
    trials = [0] + [point.trial for point in result.curve]
    sizes = [b - a for a, b in zip(trials, trials[1:])]           # each measured batch's size
    n = result.tasks
    assert n >= 2 and sizes[:n] == [1] * n, sizes                  # one program a task in the first round
    assert math.isfinite(result.curve[n - 1].estimated_latency)    # ... and then the network has an estimate
    assert max(sizes[n:]) == 4, sizes                             # later batches are full size
    assert result.settings["first_batch"] == 1

    params = {"tune": {"learned_search": {"first_batch": 2}}}
    assert isinstance(SearchSettings.for_cost_model(params, "pretrained_xgb+boost").strategy(), FirstBatchSearch)
    assert not isinstance(SearchSettings.for_cost_model(params, "xgb").strategy(), FirstBatchSearch)
    with pytest.raises(ValueError, match="first_batch"):
        FirstBatchSearch(SearchSettings().strategy(), 0)
