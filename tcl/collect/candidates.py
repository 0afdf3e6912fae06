"""Propose candidate schedules for one task from MetaSchedule's design space.

As TVM's dataset scripts did, the search is MetaSchedule's own evolutionary search
driven by a random cost model (or plain replay of the design space): the programs
are diverse rather than good.
"""

from __future__ import annotations

from ..data.metaschedule import to_plain_json


def trace_json(candidate) -> list:
    """The candidate's trace as plain JSON (the form JSONDatabase stores)."""
    return to_plain_json(candidate.sch.trace.as_json())


class CandidateSource:
    """A resumable stream of fresh candidates for one task."""

    def __init__(self, mod, target, *, search: str, seed: int, max_trials: int, batch_size: int,
                 population: int = 128, threads: int = 1):
        from tvm.s_tir import meta_schedule as ms

        from .intrinsics import load_tensor_intrinsics

        load_tensor_intrinsics()  # the space generator imports them; this way takes seconds, not minutes
        if search == "evolutionary":
            # With a random cost model, TVM's default population of 512 evolved 4 times costs
            # seconds per batch and buys nothing; a smaller population keeps the draws diverse.
            strategy = ms.search_strategy.EvolutionarySearch(
                population_size=max(population, 2 * batch_size), init_min_unmeasured=min(50, population),
                genetic_num_iters=1)
        elif search == "replay-trace":
            strategy = ms.search_strategy.ReplayTrace()
        else:
            raise ValueError(f"collect.search: '{search}' is not 'evolutionary' or 'replay-trace'")
        self._ms = ms
        self.ctx = ms.TuneContext(mod, target=target, space_generator="post-order-apply",
                                  search_strategy=strategy, rand_state=seed, num_threads=threads)
        self.database = ms.database.MemoryDatabase()
        self.ctx.pre_tuning(max_trials=max_trials, num_trials_per_iter=batch_size,
                            database=self.database,
                            cost_model=ms.cost_model.RandomModel(seed=seed) if search == "evolutionary" else None)

    def next_batch(self) -> list:
        """The next candidates, or [] when the search strategy is exhausted."""
        return list(self.ctx.generate_measure_candidates() or [])

    def notify(self, candidates, runner_results) -> None:
        self.ctx.notify_runner_results(candidates, runner_results)
