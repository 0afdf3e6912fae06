"""The bases of the cost models that wrap another (timing it, drafting for it, recording its scores)
and of the search strategies that wrap one task's search (stopping it, trimming its first batch).

Each passes every call to the object inside and changes only what it is for; subclasses are
decorated with `derived_object` as MetaSchedule's own Python cost models and strategies are.
"""

from __future__ import annotations

from tvm.s_tir.meta_schedule.cost_model import PyCostModel
from tvm.s_tir.meta_schedule.search_strategy import PySearchStrategy


class CostModelWrapper(PyCostModel):
    """Delegates every call to `inner`; override what the wrapper changes."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def load(self, path: str) -> None:
        self.inner.load(path)

    def save(self, path: str) -> None:
        self.inner.save(path)

    def update(self, context, candidates, results) -> None:
        self.inner.update(context, candidates, results)

    def predict(self, context, candidates):
        return self.inner.predict(context, candidates)


class SearchStrategyWrapper(PySearchStrategy):
    """Delegates every call to `inner` (one task's search strategy); override what the wrapper changes.
    `clone` is the subclass's: it knows its own arguments."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def _initialize_with_tune_context(self, context) -> None:
        self.inner._initialize_with_tune_context(context)

    def pre_tuning(self, max_trials, num_trials_per_iter, design_spaces, database=None, cost_model=None) -> None:
        self.inner.pre_tuning(max_trials, num_trials_per_iter, design_spaces, database, cost_model)

    def post_tuning(self) -> None:
        self.inner.post_tuning()

    def generate_measure_candidates(self):
        return self.inner.generate_measure_candidates()

    def notify_runner_results(self, measure_candidates, results) -> None:
        self.inner.notify_runner_results(measure_candidates, results)
