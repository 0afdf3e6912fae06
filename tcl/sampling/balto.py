"""BALTO-style biased diversity (our reading of Bi et al., 2023).

BALTO's point: pure diversity wastes measurements on programs no search would
ever keep, pure greed measures near-duplicates of the current favourite. So it
diversifies *among the programs the model already thinks are good*. Our reading:

1. Spread the round's budget over tasks in proportion to their unlabelled programs
   (largest remainder).
2. Bias: in each task, keep a shortlist of its ``shortlist`` x (task budget)
   best-predicted unlabelled programs.
3. Diversity: farthest-first (greedy k-center) within the shortlist, starting from
   the task's labelled programs: repeatedly take the shortlisted program farthest
   from everything labelled or taken. Distances are Euclidean in ``Pool.features``
   (e.g. the cost model's embeddings) when given, else in normalized prediction
   space. With nothing labelled in the task, or on distance ties, the
   better-predicted program wins, so the first pick is the task's favourite.

shortlist=1 is pure greed (top-k per task); a shortlist as large as the task is
pure k-center diversity.
"""

from __future__ import annotations

import math

import numpy as np

from .base import Pool, Sampler, apportion, register_sampler
from .normalize import METHODS, normalize


@register_sampler("balto")
class BALTOSampler(Sampler):
    """Per-task farthest-first traversal over the best-predicted shortlist (module docstring)."""

    def __init__(self, shortlist: float = 3.0, normalize: str = "task_rank"):
        if shortlist < 1.0:
            raise ValueError(f"shortlist is a multiple of the task budget, >= 1; got {shortlist}")
        if normalize not in METHODS:
            raise ValueError(f"unknown normalization {normalize!r}; choose one of {list(METHODS)}")
        self.shortlist, self.normalize = shortlist, normalize

    def _select(self, pool: Pool, budget: int) -> np.ndarray:
        tasks = pool.task_codes
        n_tasks = int(tasks.max()) + 1
        f = normalize(pool.scores, tasks, self.normalize)
        space = pool.features if pool.features is not None else f[:, None]
        cand = pool.candidates
        cand = cand[np.lexsort((-f[cand], tasks[cand]))]  # by task, best-predicted first
        per_task = np.bincount(tasks[cand], minlength=n_tasks)
        task_budget = apportion(per_task, budget, caps=per_task)
        c_start = np.cumsum(per_task) - per_task
        lab = np.flatnonzero(pool.labelled)
        lab = lab[np.argsort(tasks[lab], kind="stable")]
        n_lab = np.bincount(tasks[lab], minlength=n_tasks)
        l_start = np.cumsum(n_lab) - n_lab
        picks = []
        for t in np.flatnonzero(task_budget):
            b = int(task_budget[t])
            short = cand[c_start[t]:c_start[t] + min(per_task[t], max(b, math.ceil(self.shortlist * b)))]
            x = space[short]
            ref = space[lab[l_start[t]:l_start[t] + n_lab[t]]]
            if len(ref):
                d = np.sqrt(((x[:, None, :] - ref[None, :, :]) ** 2).sum(-1)).min(axis=1)
            else:
                d = np.full(len(short), np.inf)
            for _ in range(b):
                j = int(np.argmax(d))  # first max = best-predicted among ties
                picks.append(short[j])
                d = np.minimum(d, np.sqrt(((x - x[j]) ** 2).sum(-1)))
                d[j] = -1.0
        return np.asarray(picks, dtype=np.int64)
