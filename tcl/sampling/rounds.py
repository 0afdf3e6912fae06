"""TCL Algorithm 1's outer loop: a random first batch, then T rounds of (retrain, predict, pick, label).

The loop knows nothing about models or measurement: `predict(labelled)` retrains
the cost model on the labelled programs and scores the whole pool, `label(picks)`
measures the picks (active mode) or does nothing (offline mode, labels known).
Both modes, and the evaluation, run this one loop.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .base import Pool, Sampler, make_sampler, round_budgets, total_budget


@dataclass
class Predictions:
    """What one retrained cost model says about the pool (see :class:`Pool` for the optional parts)."""

    scores: np.ndarray
    ensemble: np.ndarray | None = None
    features: np.ndarray | None = None


@dataclass
class RoundLog:
    round: int
    picked: int
    labelled: int
    seconds: float


@dataclass
class SampleRun:
    """The picks in the order they were labelled, and one log entry per round (0 = random first batch)."""

    picks: np.ndarray
    rounds: list[RoundLog] = field(default_factory=list)


def sample_rounds(sampler: Sampler, op_type, task, rate: float, rounds: int, first_batch: float, seed: int,
                  predict: Callable[[np.ndarray], Predictions], label: Callable[[np.ndarray], None] | None = None,
                  on_round: Callable[[RoundLog], None] | None = None) -> SampleRun:
    """Label `rate` of the pool: `first_batch` of the budget at random, the rest over `rounds` rounds.

    A sampler that ignores the model (``uses_model`` False, random) is never given
    a retrained one: random sampling costs no training.
    """
    op_type, task = np.asarray(op_type), np.asarray(task)
    n = len(op_type)
    budgets = round_budgets(total_budget(n, rate), rounds, first_batch)
    labelled = np.zeros(n, dtype=bool)
    first = make_sampler("random", seed=seed)
    run = SampleRun(picks=np.empty(0, dtype=np.int64))
    for r, budget in enumerate(budgets):
        start = time.perf_counter()
        if r == 0 or not sampler.uses_model:
            preds = Predictions(scores=np.zeros(n))
        else:
            preds = predict(np.flatnonzero(labelled))
        pool = Pool(op_type=op_type, task=task, scores=preds.scores, labelled=labelled,
                    ensemble=preds.ensemble, features=preds.features)
        picks = (first if r == 0 else sampler).select(pool, budget)
        if label is not None and len(picks):
            label(picks)
        labelled[picks] = True
        run.picks = np.concatenate([run.picks, picks])
        entry = RoundLog(round=r, picked=len(picks), labelled=int(labelled.sum()),
                         seconds=time.perf_counter() - start)
        run.rounds.append(entry)
        if on_round is not None:
            on_round(entry)
    return run
