"""Record the tuning curve as MetaSchedule measures: after every batch, the trial
count, wall seconds since start, and the network latency estimate
sum(task weight x best latency so far) that the gradient task scheduler optimizes."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.measure_callback import PyMeasureCallback


@dataclass(frozen=True)
class CurvePoint:
    trial: int
    seconds: float
    estimated_latency: float  # NaN until every task has a successful measurement


@derived_object
class CurveRecorder(PyMeasureCallback):
    """A measure callback that appends one CurvePoint per measured batch."""

    def __init__(self, task_weights: list[float], on_batch=None):
        super().__init__()
        self.weights = [float(w) for w in task_weights]
        self.best = [math.inf] * len(task_weights)
        self.measured = [0] * len(task_weights)
        self.batch_best: list[list[float]] = [[] for _ in task_weights]  # each batch's own best (inf: none ran)
        self.points: list[CurvePoint] = []
        self.trials = 0
        self.start = time.perf_counter()
        self.on_batch = on_batch

    def apply(self, task_scheduler, task_id, measure_candidates, builder_results, runner_results) -> None:
        batch = math.inf
        for res in runner_results:
            if res.error_msg is None and res.run_secs:
                secs = [float(x) for x in res.run_secs]
                batch = min(batch, sum(secs) / len(secs))
        self.best[task_id] = min(self.best[task_id], batch)
        self.batch_best[task_id].append(batch)
        self.trials += len(runner_results)
        self.measured[task_id] += len(runner_results)
        estimate = (sum(w * b for w, b in zip(self.weights, self.best))
                    if all(math.isfinite(b) for b in self.best) else math.nan)
        self.points.append(CurvePoint(self.trials, time.perf_counter() - self.start, estimate))
        if self.on_batch is not None:
            self.on_batch(len(runner_results), estimate)

    def load(self, task_id: int) -> float:
        """Task `task_id`'s share of the estimate over the tasks measured so far, times their number: 1 for an
        average task, and for one not measured yet (Moses's controller scales a task's window by it)."""
        latency = {i: w * b for i, (w, b) in enumerate(zip(self.weights, self.best)) if math.isfinite(b)}
        total = sum(latency.values())
        if task_id not in latency or total <= 0:
            return 1.0
        return latency[task_id] / total * len(latency)

    def per_task(self, names: list[str]) -> list[dict]:
        """Each task's end state, named: weight, best latency in us (None: nothing ran) and trials measured,
        so a network estimate that trails another run's can be traced to the tasks that cost it."""
        return [{"task": name, "weight": w, "best_us": b * 1e6 if math.isfinite(b) else None, "trials": n}
                for name, w, b, n in zip(names, self.weights, self.best, self.measured)]
