"""Tuning replayed on measured pools: how fast an online adapter finds a task's best program.

A real tuning run takes an hour a network here; a task's collected programs (a random sample
of its schedule space, each with a measured latency) make a cheap stand-in. Each round the
adapter scores the programs not measured yet, the top `batch` are "measured" (their recorded
latencies revealed) and handed to `observe`, as MetaSchedule reports a measured batch. The
curve is the best latency found so far over the pool's best, after each round (1 = found).

What this leaves out: the evolutionary search (candidates here come from a fixed pool, not
from mutating the best ones) and measurement noise. It ranks adapters and their settings on
validation tasks before a tuning run spends hours on them; it does not replace the run.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from .base import OnlineAdapter


def replay_task(adapter: OnlineAdapter, task: str, x: np.ndarray, latency: np.ndarray, rounds: int, batch: int,
                rng: np.random.Generator) -> np.ndarray:
    """(rounds,) best found latency / pool best after each round; ties in the scores are broken at random."""
    left = np.arange(len(latency))
    found = np.inf
    curve = np.empty(rounds)
    for r in range(rounds):
        if len(left):
            scores = np.asarray(adapter.score(task, x[left]), dtype=np.float64)
            order = np.lexsort((rng.random(len(left)), -scores))  # best score first, random among equals
            picked, left = left[order[:batch]], left[order[batch:]]
            adapter.observe(task, x[picked], latency[picked])
            found = min(found, float(latency[picked].min()))
        curve[r] = latency.min() / found
    return curve


def replay_split(make: Callable[[], OnlineAdapter], split: dict[str, np.ndarray], rounds: int, batch: int,
                 seed: int, min_programs: int) -> dict[str, np.ndarray]:
    """task key -> its curve, for every task of `split` with at least `min_programs` measured programs; one
    fresh adapter per split (tasks keep their own state inside it, as in a tuning run)."""
    adapter = make()
    rng = np.random.default_rng(seed)
    return {str(task): replay_task(adapter, str(task), split["x"][rows], split["mean_sec"][rows], rounds, batch, rng)
            for task, rows in replayable_tasks(split, min_programs).items()}


def replayable_tasks(split: dict[str, np.ndarray], min_programs: int) -> dict:
    """task key -> rows of its measured programs, for the tasks of `split` with at least `min_programs`."""
    ok = np.isfinite(split["mean_sec"]) & (split["mean_sec"] > 0)
    tasks = {task: np.flatnonzero(ok & (split["task_key"] == task)) for task in np.unique(split["task_key"][ok])}
    return {task: rows for task, rows in tasks.items() if len(rows) >= min_programs}
