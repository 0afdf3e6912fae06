"""A wide search for a task's first batches, a narrow one after.

Before a task has any measurement a learned model's picks are all the search has, and a wider
evolutionary search (TVM's population 512 x 4 generations) finds better first programs than a
narrow one (256 x 2; docs/results.md, MobileNet-V2 at trial 257: 9.2-10.9 ms against 11.0-12.8);
after the first batches the measured programs seed each generation and the narrow search costs a
third of the seconds. `tune.learned_search.wide_batches` sets how many of a task's batches search wide.

MetaSchedule's EvolutionarySearch keeps the programs it sent for measurement in its own state, so
two instances do not know each other's picks; this wrapper drops from the narrow search's batches
the programs the wide one already sent (structural hash) and asks again when nothing new is left.
"""

from __future__ import annotations

from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.search_strategy import PySearchStrategy

from .memo import program_keys

RETRIES = 3  # narrow batches asked for when every candidate was measured already


@derived_object
class WideStartSearch(PySearchStrategy):
    """`wide` for the task's first `wide_batches` batches, then `narrow` (both one task's strategies)."""

    def __init__(self, wide, narrow, wide_batches: int):
        super().__init__()
        if wide_batches < 1:
            raise ValueError(f"wide_batches must be >= 1, got {wide_batches}")
        self.wide, self.narrow, self.wide_batches = wide, narrow, wide_batches
        self.batches = 0
        self.sent: set[str] = set()

    def _initialize_with_tune_context(self, context) -> None:
        self.wide._initialize_with_tune_context(context)
        self.narrow._initialize_with_tune_context(context)

    def pre_tuning(self, max_trials, num_trials_per_iter, design_spaces, database=None, cost_model=None) -> None:
        self.batches, self.sent = 0, set()
        for inner in (self.wide, self.narrow):
            inner.pre_tuning(max_trials, num_trials_per_iter, design_spaces, database, cost_model)

    def post_tuning(self) -> None:
        self.wide.post_tuning()
        self.narrow.post_tuning()

    def generate_measure_candidates(self):
        inner = self.wide if self.batches < self.wide_batches else self.narrow
        for _ in range(RETRIES):
            candidates = inner.generate_measure_candidates()
            if candidates is None:
                return None
            keys = program_keys(candidates)
            fresh = [(key, c) for key, c in zip(keys, candidates) if key not in self.sent]
            if fresh or not candidates:
                self.sent.update(key for key, _ in fresh)
                return [c for _, c in fresh]
        return None  # the narrow search only finds what was measured: the task is done

    def notify_runner_results(self, measure_candidates, results) -> None:
        # both count the task's trials, so the narrow search stops at the same budget the wide one would
        self.wide.notify_runner_results(measure_candidates, results)
        self.narrow.notify_runner_results(measure_candidates, results)
        self.batches += 1

    def clone(self):
        return WideStartSearch(self.wide.clone(), self.narrow.clone(), self.wide_batches)
