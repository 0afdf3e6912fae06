"""The guard (tcl.tvm.guard): per task, the ranker that ordered the task's recent measured batches
better scores it. Real candidates of a tiny matmul, timed on this CPU; the two rankers compared are
built from those very timings (one orders candidates by measured speed, the other by its reverse),
so which one deserves the task is known exactly."""

from __future__ import annotations

import numpy as np
import pytest
from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.cost_model import PyCostModel

from conftest import toy_matmul_task
from tcl.tvm.guard import GuardedCostModel, GuardSettings


@derived_object
class ByMeasuredSpeed(PyCostModel):
    """Scores a candidate by its measured speed (or its reverse): a ranker whose quality is known."""

    def __init__(self, speed: dict[str, float], reverse: bool = False):
        super().__init__()
        self.speed, self.reverse, self.updates = speed, reverse, 0
        self.scored: list[int] = []  # candidates per predict call

    def load(self, path: str) -> None: ...

    def save(self, path: str) -> None: ...

    def update(self, context, candidates, results) -> None:
        self.updates += 1

    def predict(self, context, candidates) -> np.ndarray:
        from tvm.s_tir.meta_schedule.utils import shash2hex

        self.scored.append(len(candidates))
        s = np.asarray([self.speed[shash2hex(c.sch.mod)] for c in candidates])
        top = max(self.speed.values())
        return top - s if self.reverse else s  # non-negative either way


@pytest.fixture(scope="module")
def measured(host_platform, measurer):
    """(context, candidates, runner results, speed by program) of 24 distinct timed matmul programs."""
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule.utils import shash2hex

    task = toy_matmul_task(64)
    context = ms.TuneContext(task.mod, target=host_platform.tvm_target(), space_generator="post-order-apply",
                             search_strategy="replay-trace", task_name="matmul64", rand_state=3, num_threads=1)
    context.pre_tuning(max_trials=64, num_trials_per_iter=64, database=ms.database.MemoryDatabase(),
                       cost_model=None)
    unique = {}
    for cand in context.generate_measure_candidates():
        unique.setdefault(shash2hex(cand.sch.mod), cand)
    candidates = list(unique.values())[:24]
    _, results = measurer.measure(candidates)
    kept = [(c, r) for c, r in zip(candidates, results) if r.error_msg is None]
    assert len(kept) >= 16, "too few matmul programs ran"
    speed = {shash2hex(c.sch.mod): 1.0 / float(np.mean([float(s) for s in r.run_secs])) for c, r in kept}
    return context, [c for c, _ in kept], [r for _, r in kept], speed


def _feed(model, context, candidates, results, batch: int = 8) -> None:
    for lo in range(0, len(candidates), batch):
        model.update(context, candidates[lo:lo + batch], results[lo:lo + batch])


def test_a_task_goes_to_the_ranker_that_orders_its_measurements_better(measured):
    context, candidates, results, speed = measured
    task = str(context.task_name)
    good, bad = ByMeasuredSpeed(speed), ByMeasuredSpeed(speed, reverse=True)

    # a learned model that ranks this task backwards hands it over once the window has seen it
    guarded = GuardedCostModel(bad, good, GuardSettings(window=2, margin=0.05))
    assert np.allclose(guarded.predict(context, candidates), bad.predict(context, candidates))
    _feed(guarded, context, candidates, results)
    assert task in guarded.on_fallback and guarded.switches[0] == (task, 2, "fallback")
    assert np.allclose(guarded.predict(context, candidates), good.predict(context, candidates))
    ours, theirs = np.mean(guarded.accuracy[task], axis=0)
    assert ours < 0.2 and theirs > 0.8   # scores taken before the batch was learned, on real timings
    assert bad.updates == good.updates == len(guarded.accuracy[task])  # both keep learning

    # a learned model that ranks it well keeps it
    kept = GuardedCostModel(good, bad, GuardSettings(window=2, margin=0.05))
    _feed(kept, context, candidates, results)
    assert not kept.on_fallback and not kept.switches
    assert np.allclose(kept.predict(context, candidates), good.predict(context, candidates))


def test_the_guard_decides_per_task_and_not_before_its_window(measured, host_platform):
    from tvm.s_tir import meta_schedule as ms

    context, candidates, results, speed = measured
    other = ms.TuneContext(context.mod, target=host_platform.tvm_target(), task_name="another task",
                           num_threads=1)
    guarded = GuardedCostModel(ByMeasuredSpeed(speed, reverse=True), ByMeasuredSpeed(speed),
                               GuardSettings(window=3, margin=0.05))
    _feed(guarded, context, candidates[:16], results[:16])          # two batches: fewer than the window
    assert not guarded.on_fallback
    _feed(guarded, context, candidates[16:], results[16:])
    assert guarded.on_fallback == {str(context.task_name)}         # the other task was never judged
    assert np.allclose(guarded.predict(other, candidates), ByMeasuredSpeed(speed, reverse=True).predict(
        other, candidates))


def test_a_task_of_an_operator_type_the_model_never_trained_on_is_xgbs_throughout(measured):
    from tcl.workloads.tasks import classify_op_type

    context, candidates, results, speed = measured
    task, op = str(context.task_name), classify_op_type(str(context.task_name), context.mod)
    good, bad = ByMeasuredSpeed(speed), ByMeasuredSpeed(speed, reverse=True)

    # trained on other operators only: the fallback scores the task from its first call, and keeps it even
    # though the learned model ranks its batches better (accuracy on its own picks is no proof there)
    unseen = GuardedCostModel(good, bad, GuardSettings(window=2, margin=0.05), op_types={"conv1d": 40})
    assert np.allclose(unseen.predict(context, candidates), bad.predict(context, candidates))
    _feed(unseen, context, candidates, results)
    assert unseen.unfamiliar == {task: op} and unseen.switches == [(task, 0, "unfamiliar")]
    assert task in unseen.on_fallback and good.updates == bad.updates > 0   # both still learn
    assert task not in unseen.accuracy   # never judged: no batch can hand it back

    # trained on this operator type: the learned model starts; too few tasks of it under familiar_tasks: not
    seen = GuardedCostModel(good, bad, GuardSettings(), op_types={op: 2})
    assert np.allclose(seen.predict(context, candidates), good.predict(context, candidates)) and not seen.unfamiliar
    rare = GuardedCostModel(good, bad, GuardSettings(familiar_tasks=3), op_types={op: 2})
    assert np.allclose(rare.predict(context, candidates), bad.predict(context, candidates))
    # a bundle that does not say what it trained on: every task starts on the learned model
    unknown = GuardedCostModel(good, bad, GuardSettings(), op_types=None)
    assert np.allclose(unknown.predict(context, candidates), good.predict(context, candidates))


def test_handoff_gives_each_task_to_xgb_after_its_first_batches_whatever_the_ranking(measured, host_platform):
    from tvm.s_tir import meta_schedule as ms

    context, candidates, results, speed = measured
    task = str(context.task_name)
    other = ms.TuneContext(context.mod, target=host_platform.tvm_target(), task_name="another task",
                           num_threads=1)
    good, bad = ByMeasuredSpeed(speed), ByMeasuredSpeed(speed, reverse=True)
    # the learned model ranks this task perfectly, and still hands it over: the hand-off counts batches
    handed = GuardedCostModel(good, bad, GuardSettings(handoff_batches=2), handoff=True)
    _feed(handed, context, candidates[:8], results[:8])
    assert not handed.on_fallback
    assert np.allclose(handed.predict(context, candidates), good.predict(context, candidates))
    _feed(handed, context, candidates[8:], results[8:])
    assert handed.on_fallback == handed.handed_off == {task} and handed.switches == [(task, 2, "handoff")]
    assert np.allclose(handed.predict(context, candidates), bad.predict(context, candidates))
    assert bad.updates == 3   # the fallback learned every batch, the ones before the hand-off too
    assert good.updates == 1  # the learned model, only the batch before it: it never scores the task again
    assert len(handed.accuracy[task]) == 1   # compared on its first batch only: nothing can hand it back
    # a task with no batches yet stays the learned model's
    assert np.allclose(handed.predict(other, candidates), good.predict(other, candidates))
    # without +handoff the same feed keeps the task on the learned model that ranks it well
    guarded = GuardedCostModel(good, bad, GuardSettings(handoff_batches=2))
    _feed(guarded, context, candidates, results)
    assert not guarded.on_fallback


def test_a_task_the_accuracy_test_gave_xgb_before_its_handoff_is_handed_off_for_good(measured):
    context, candidates, results, speed = measured
    task = str(context.task_name)
    good, bad = ByMeasuredSpeed(speed), ByMeasuredSpeed(speed, reverse=True)
    # a backward learned model loses the task to XGB on its first batch (window 1), before the hand-off count
    handed = GuardedCostModel(bad, good, GuardSettings(window=1, margin=0.05, handoff_batches=2), handoff=True)
    _feed(handed, context, candidates[:16], results[:16])
    assert handed.switches == [(task, 1, "fallback"), (task, 2, "handoff")]
    assert handed.handed_off == handed.on_fallback == {task}  # so the accuracy test can never give it back
    assert np.allclose(handed.predict(context, candidates), good.predict(context, candidates))


def test_a_handed_off_task_is_scored_undrafted_only_when_draft_fallback_is_off(measured, params, host_platform):
    """With +draft around the guard, PSA drafts for XGB's tasks too unless `draft_fallback` is off: then XGB sees
    every candidate of a handed-off task, as it does tuning alone, while the learned model's tasks stay drafted."""
    from tcl.tvm.draft import DraftThenVerify
    from tcl.tvm.psa import make_analyzer

    context, candidates, results, speed = measured
    for draft_fallback, fallback_sees in ((True, 4), (False, len(candidates))):
        good, bad = ByMeasuredSpeed(speed), ByMeasuredSpeed(speed, reverse=True)
        handed = GuardedCostModel(good, bad, GuardSettings(handoff_batches=1, draft_fallback=draft_fallback),
                                  handoff=True)
        drafting = DraftThenVerify(handed, make_analyzer(host_platform, params), verify=4)
        assert handed.drafted(context)  # before the hand-off the learned model's task is drafted either way
        drafting.predict(context, candidates)
        assert good.scored == [4] and not bad.scored
        _feed(handed, context, candidates[:8], results[:8])
        bad.scored.clear()
        drafting.predict(context, candidates)
        assert bad.scored == [fallback_sees] and len(candidates) > 4


def test_cold_draft_batches_draft_an_xgb_task_only_until_xgb_has_measured_it(measured, params, host_platform):
    """With `draft_fallback` off and `cold_draft_batches: 1`, a task XGB scores from the start (an operator the
    learned model never saw) is drafted by PSA for its first batch, where XGB has seen nothing of it, and scored
    whole after; with 0, it is scored whole from the first batch."""
    from tcl.tvm.draft import DraftThenVerify
    from tcl.tvm.psa import make_analyzer

    context, candidates, results, speed = measured
    for cold, first_sees in ((1, 4), (0, len(candidates))):
        good, bad = ByMeasuredSpeed(speed), ByMeasuredSpeed(speed, reverse=True)
        guarded = GuardedCostModel(good, bad, GuardSettings(draft_fallback=False, cold_draft_batches=cold),
                                   op_types={}, handoff=True)  # no training task of any type: XGB's throughout
        drafting = DraftThenVerify(guarded, make_analyzer(host_platform, params), verify=4)
        drafting.predict(context, candidates)
        assert guarded.unfamiliar and bad.scored == [first_sees] and not good.scored
        _feed(guarded, context, candidates[:8], results[:8])
        bad.scored.clear()
        drafting.predict(context, candidates)
        assert bad.scored == [len(candidates)] and len(candidates) > 4
    with pytest.raises(ValueError, match="cold_draft_batches"):
        GuardSettings(cold_draft_batches=-1)


def test_guard_settings_and_names():
    from tcl.tvm.names import parse_cost_model

    assert GuardSettings.from_params({"tune": {"guard": {"window": 5}}}).window == 5
    with pytest.raises(ValueError, match=r"tune\.guard"):
        GuardSettings.from_params({"tune": {"guard": {"windows": 5}}})
    with pytest.raises(ValueError, match=r"tune\.guard"):
        GuardSettings(window=0)
    with pytest.raises(ValueError, match="familiar_tasks"):
        GuardSettings(familiar_tasks=-1)
    spec = parse_cost_model("tenset_mlp+moa+guard")
    assert spec.guard and spec.adaptation == "moa" and not parse_cost_model("tcl+draft").guard
    with pytest.raises(ValueError, match="nothing to guard"):
        parse_cost_model("xgb+guard")
    with pytest.raises(ValueError, match="handoff_batches"):
        GuardSettings(handoff_batches=0)
    assert parse_cost_model("tenset_mlp+handoff").handoff and not spec.handoff
    with pytest.raises(ValueError, match="hand over"):
        parse_cost_model("xgb+handoff")
