"""A small first batch per task: the network's first estimate after tasks x `first_batch` trials.

MetaSchedule's gradient scheduler gives every task one batch of `num_trials_per_iter` before it
ranks tasks by what more trials would gain, so a network of n tasks has no estimate before n x 8
trials (MobileNet-V2's 33 tasks: 264, more than the tuning issue's 256). A pretrained model's first
picks are its most confident: measuring only its best few per task in that round ends the round
sooner and leaves the trials to the tasks the scheduler finds worth them. Later batches are full
size. Smaller batches throughout (`tune.learned_trials_per_iter`) pay a whole search per few trials
in every round; this pays it once per task.
"""

from __future__ import annotations

from tvm.ir.utils import derived_object

from .wrapper import SearchStrategyWrapper


@derived_object
class FirstBatchSearch(SearchStrategyWrapper):
    """`inner` (one task's search) measuring only the first `first_batch` candidates of its first batch
    (the search's order: the model's best first, its eps-greedy random picks last)."""

    def __init__(self, inner, first_batch: int):
        super().__init__(inner)
        if first_batch < 1:
            raise ValueError(f"first_batch must be >= 1, got {first_batch}")
        self.first_batch = int(first_batch)
        self.batches = 0

    def pre_tuning(self, max_trials, num_trials_per_iter, design_spaces, database=None, cost_model=None) -> None:
        self.batches = 0
        super().pre_tuning(max_trials, num_trials_per_iter, design_spaces, database, cost_model)

    def generate_measure_candidates(self):
        candidates = self.inner.generate_measure_candidates()
        if candidates is None or self.batches:
            return candidates
        return list(candidates)[:self.first_batch]

    def notify_runner_results(self, measure_candidates, results) -> None:
        super().notify_runner_results(measure_candidates, results)
        self.batches += 1

    def clone(self):
        return FirstBatchSearch(self.inner.clone(), self.first_batch)
