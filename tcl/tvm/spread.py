"""Batches spread over a task's sketches, each sketch's best candidates first.

A learned model that ranks one program structure first fills every batch of a task with it: over
each task's first 24 measured programs, the learned runs of the benchmark cover 1.7-2.3 sketches where
TVM's XGB covers 6.8-9.0 (tcl.tvm.diversity; a sketch here is a trace's primitive kinds, so a
design space and how postprocessing parallelized, vectorized and unrolled it), and a task whose best
programs have another structure is never measured there. Random programs widen the batches and waste
their trials (eps_greedy 0.25, docs/results.md stop 63). Here one sketch takes at most `max_share` of
a batch while the search scored candidates of others, each sketch contributing its own best-scored.

The evolutionary search keeps its best candidates in its own heap, so this wrapper learns the scores
by handing the inner search a cost model that records every candidate it scores during a batch, then
sends its own pick in place of the inner one's (the inner's eps-greedy random share kept as it chose).
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.search_strategy import PySearchStrategy

from ..features.ffi_arrays import items
from .memo import hashed_call, program_keys
from .wrapper import CostModelWrapper


def sketch_of(candidate) -> tuple[str, ...]:
    """The candidate's primitive kinds, postprocessing's included (tcl.tvm.diversity reads stored traces)."""
    return tuple(inst.kind.name for inst in items(candidate.sch.trace.insts))


def spread_pick(scored: list[tuple[float, tuple, object]], n: int, max_share: float) -> list[object]:
    """`n` items of `scored` (score, sketch, item): each sketch's best max(1, floor(max_share * n)) in score
    order first, then the remaining slots by score."""
    cap = max(1, math.floor(max_share * n))
    order = sorted(range(len(scored)), key=lambda i: -scored[i][0])
    taken, counts, chosen = set(), Counter(), []
    for i in order:
        if len(chosen) == n:
            break
        if counts[scored[i][1]] < cap:
            counts[scored[i][1]] += 1
            taken.add(i)
            chosen.append(scored[i][2])
    chosen += [scored[i][2] for i in order if i not in taken][:n - len(chosen)]
    return chosen


@derived_object
class RecordingCostModel(CostModelWrapper):
    """Passes every call to `inner`; remembers each candidate scored since `clear`, by structural hash."""

    def __init__(self, inner):
        super().__init__(inner)
        self.seen: dict[str, tuple[float, object]] = {}

    def clear(self) -> None:
        self.seen = {}

    def predict(self, context, candidates) -> np.ndarray:
        with hashed_call(candidates) as keys:  # the models inside read the hashes taken here
            scores = np.asarray(self.inner.predict(context, candidates), dtype="float64")
        for key, candidate, score in zip(keys, candidates, scores):
            if key not in self.seen or score > self.seen[key][0]:
                self.seen[key] = (float(score), candidate)
        return scores


@derived_object
class SketchSpreadSearch(PySearchStrategy):
    """`inner` (one task's search) with its batches re-picked by `spread_pick` over what it scored."""

    def __init__(self, inner, max_share: float, eps_greedy: float):
        super().__init__()
        if not 0 < max_share <= 1:
            raise ValueError(f"max_sketch_share must be in (0, 1], got {max_share}")
        self.inner, self.max_share, self.eps_greedy = inner, float(max_share), float(eps_greedy)
        self.recorder = None
        self.sent: set[str] = set()
        self.mod = None

    def _initialize_with_tune_context(self, context) -> None:
        self.mod = context.mod
        self.inner._initialize_with_tune_context(context)

    def pre_tuning(self, max_trials, num_trials_per_iter, design_spaces, database=None, cost_model=None) -> None:
        self.recorder = RecordingCostModel(cost_model)
        self.sent = self._measured(database)
        self.inner.pre_tuning(max_trials, num_trials_per_iter, design_spaces, database, self.recorder)

    def _measured(self, database) -> set[str]:
        """The structural hashes of this task's programs the database holds (a resumed run's)."""
        if database is None or self.mod is None or not database.has_workload(self.mod):
            return set()
        records = database.get_top_k(database.commit_workload(self.mod), 1 << 30)
        return set(program_keys([r.as_measure_candidate() for r in records]))

    def post_tuning(self) -> None:
        self.inner.post_tuning()
        self.recorder = None

    def generate_measure_candidates(self):
        self.recorder.clear()
        picks = self.inner.generate_measure_candidates()
        if not picks:
            return picks
        randoms = list(picks[len(picks) - int(len(picks) * self.eps_greedy):]) if self.eps_greedy else []
        random_keys = set(program_keys(randoms))
        scored = [(score, sketch_of(c), (key, c)) for key, (score, c) in self.recorder.seen.items()
                  if key not in self.sent and key not in random_keys]
        chosen = spread_pick(scored, len(picks) - len(randoms), self.max_share)
        self.sent.update(key for key, _ in chosen)
        self.sent.update(random_keys)
        if not chosen and not randoms:  # everything it scored was measured: the inner search's own fresh picks
            fresh = list(zip(program_keys(picks), picks))
            chosen = [(key, c) for key, c in fresh if key not in self.sent]
            self.sent.update(key for key, _ in chosen)
        return [c for _, c in chosen] + randoms

    def notify_runner_results(self, measure_candidates, results) -> None:
        self.inner.notify_runner_results(measure_candidates, results)

    def clone(self):
        return SketchSpreadSearch(self.inner.clone(), self.max_share, self.eps_greedy)
