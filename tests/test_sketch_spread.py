"""tcl.tvm.spread: batches spread over a task's sketches, on MetaSchedule's real evolutionary search."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.cost_model import PyCostModel


@derived_object
class _LongestTraceFirst(PyCostModel):
    """A deterministic, one-sided scorer: the longer a program's trace, the better (it favours one structure)."""

    def load(self, path):
        pass

    def save(self, path):
        pass

    def update(self, context, candidates, results):
        pass

    def predict(self, context, candidates):
        return np.array([len(c.sch.trace.insts) + 1e-3 * (hash(str(c.sch.trace)) % 997) for c in candidates],
                        dtype="float64")


def test_spread_pick_caps_a_sketch_and_takes_each_sketchs_best_first():
    from tcl.tvm.spread import spread_pick

    scored = [(10.0 - i, "a", f"a{i}") for i in range(8)] + [(1.0 - 0.1 * i, "b", f"b{i}") for i in range(3)]
    assert spread_pick(scored, 4, max_share=1.0) == ["a0", "a1", "a2", "a3"], "no cap: the model's own order"
    assert spread_pick(scored, 4, max_share=0.5) == ["a0", "a1", "b0", "b1"], "each sketch's best, not its worst"
    assert spread_pick(scored, 8, max_share=0.25) == ["a0", "a1", "b0", "b1", "a2", "a3", "a4", "a5"], \
        "each sketch's best two first, the rest by score"
    assert spread_pick(scored[:8], 3, max_share=0.25) == ["a0", "a1", "a2"], "one sketch: the cap cannot apply"


def test_a_spread_search_measures_more_sketches_than_the_models_own_pick_and_never_a_program_twice():
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule.utils import shash2hex

    from test_search_control import _matmul_context
    from tcl.tvm.spread import SketchSpreadSearch, sketch_of

    def search(spread: bool):
        ctx, spaces, db = _matmul_context(seed=3)
        inner = ms.search_strategy.EvolutionarySearch(population_size=64, genetic_num_iters=2, eps_greedy=0.0)
        strategy = SketchSpreadSearch(inner, max_share=0.25, eps_greedy=0.0) if spread else inner
        strategy._initialize_with_tune_context(ctx)
        strategy.pre_tuning(64, 8, spaces, db, _LongestTraceFirst())
        return strategy, ctx  # the search holds no reference to its context: keep it alive

    (plain, _plain_ctx), (spread, _spread_ctx) = search(False), search(True)
    own = list(plain.generate_measure_candidates())
    batch = list(spread.generate_measure_candidates())
    assert len(batch) == len(own) == 8
    own_sketches, spread_sketches = Counter(map(sketch_of, own)), Counter(map(sketch_of, batch))
    assert len(spread_sketches) > len(own_sketches), "the spread batch covers more structures"
    seen = spread.recorder.seen
    available = Counter(sketch_of(c) for _, c in seen.values())
    if sum(min(n, 2) for n in available.values()) >= 8:
        assert max(spread_sketches.values()) <= 2, "one sketch holds at most 2 of 8 while others have candidates"
    # within each sketch the batch holds that sketch's best-scored candidates the search saw
    for sketch in spread_sketches:
        of_sketch = sorted((score for score, c in seen.values() if sketch_of(c) == sketch), reverse=True)
        picked = sorted((seen[shash2hex(c.sch.mod)][0] for c in batch if sketch_of(c) == sketch), reverse=True)
        assert picked == of_sketch[:len(picked)]
    results = [ms.runner.RunnerResult(run_secs=[1e-3], error_msg=None) for _ in batch]
    spread.notify_runner_results(batch, results)
    again = list(spread.generate_measure_candidates())
    assert again and not {shash2hex(c.sch.mod) for c in again} & {shash2hex(c.sch.mod) for c in batch}, \
        "a program sent once is not sent again"
    plain.post_tuning()
    spread.post_tuning()


def test_the_spread_search_tunes_under_the_gradient_scheduler(tiny_cnn, host_platform, measurer, tmp_path):
    from tvm.s_tir import meta_schedule as ms

    from tcl.tvm.spread import SketchSpreadSearch
    from tcl.tvm.tuning import SearchSettings, tune_network

    settings = SearchSettings.for_cost_model({"tune": {"learned_search": {"max_sketch_share": 0.5}}}, "tcl")
    assert isinstance(settings.strategy(), SketchSpreadSearch), "tune.learned_search's key reaches the search"
    assert not isinstance(SearchSettings.for_cost_model({"tune": {"learned_search": {"max_sketch_share": 0.5}}},
                                                        "xgb").strategy(), SketchSpreadSearch)
    search = SearchSettings(population=32, genetic_iters=1, max_sketch_share=0.5)
    result = tune_network(tiny_cnn, host_platform, network="tiny_cnn", cost_model=ms.cost_model.RandomModel(seed=0),
                          cost_model_name="random", trials=32, work_dir=tmp_path / "spread", num_trials_per_iter=4,
                          progress=False, measurer=measurer, search=search)
    assert result.trials >= 24 and math.isfinite(result.final_estimate)
    assert result.settings["max_sketch_share"] == 0.5
    traces: dict[str, list[str]] = {}
    for record in result.database.get_all_tuning_records():
        traces.setdefault(str(record.workload.mod), []).append(str(record.trace))
    assert all(len(t) == len(set(t)) for t in traces.values()), "a program measured twice in one task"


def test_one_scoring_call_hashes_each_program_once_for_every_wrapper_inside_it(monkeypatch):
    """The recorder hashes the population; a memo inside the same call reads those hashes (tcl.tvm.memo)
    instead of hashing again, gets the same keys, and nothing of the call is kept after it."""
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule import utils as ms_utils

    from test_search_control import _matmul_context
    from tcl.tvm import memo
    from tcl.tvm.spread import RecordingCostModel

    ctx, spaces, _db = _matmul_context(seed=3)
    sampled = ms.search_strategy.ReplayTrace().clone()
    sampled._initialize_with_tune_context(ctx)
    sampled.pre_tuning(8, 8, spaces, None, None)
    candidates = list(sampled.generate_measure_candidates())
    sampled.post_tuning()
    truth = [ms_utils.shash2hex(c.sch.mod) for c in candidates]

    @derived_object
    class _MemoInside(_LongestTraceFirst._cls):
        def predict(self, context, cands):
            self.keys = memo.program_keys(cands)
            return super().predict(context, cands)

    inner = _MemoInside()
    recorder = RecordingCostModel(inner)
    calls = []
    real = ms_utils.shash2hex
    monkeypatch.setattr(ms_utils, "shash2hex", lambda mod: calls.append(1) or real(mod))
    recorder.predict(ctx, candidates)
    assert inner.keys == truth, "the memo inside the call sees each program's own structural hash"
    assert len(calls) == len(candidates), "each program hashed once per call, not once per wrapper"
    assert sorted(recorder.seen) == sorted(set(truth))
    assert not memo._CALL_KEYS, "a call's hashes are dropped when it returns (a handle may be reused later)"
    memo.program_keys(candidates)
    assert len(calls) == 2 * len(candidates), "outside a call every program is hashed again"
