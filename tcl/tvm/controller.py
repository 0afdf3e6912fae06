"""Moses's adaptive controller inside MetaSchedule's search: stop measuring a task once it has settled.

After each measured batch of a task, the run's CurveRecorder appends the batch's own best latency to the task's
history; when the coefficient of variation (std / mean) of the last `window` of them, or of the task's best
so far after each of those batches (`statistic`), falls below `cv_threshold`, the task asks for no more measurements, and
the gradient task scheduler (any MetaSchedule scheduler) terminates it and gives the remaining trials to the
tasks that still move.

`statistic: batch_best` is Moses's test (paper, section 3.4: the CV over the batches' own measurements): a task
stops once the programs the model proposes batch after batch are equally fast. `best_so_far` was this
project's first reading of it: the best so far is flat whenever a batch finds nothing better, so under a narrow
search it ended every ResNet-50 task after 12-47 trials (docs/results.md, stop 60).

With `scale_window`, a task's window grows with its load: its share of the network's estimate (weight x
best latency) times the number of tasks measured, 1 for an average task. A best latency that has not moved
for four batches is a plateau of a light task and a pause of a heavy one: on MobileNet-V2 the fixed window
ended the five heaviest tasks (a third of the estimate) at 32-40 trials each (docs/results.md).

It wraps each task's search strategy: a strategy that generates no candidates is the scheduler's
own signal that a task is done. (Terminating the task from a measure callback instead races the
scheduler: it joins a task's batch, runs the callbacks, and may then pick or terminate that very
task itself; tried, it fails MetaSchedule's `!task->is_terminated` check.)
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from tvm.ir.utils import derived_object
from ..config import settings_from
from .wrapper import SearchStrategyWrapper


# what the CV is taken over: CurveRecorder's per-task history of each
STATISTICS = ("batch_best", "best_so_far")


@dataclass(frozen=True)
class ControllerSettings:
    """`tune.controller` of params.yaml (`enabled` turns it on for every cost model; `+moses` for one)."""

    enabled: bool = False
    window: int = 4              # batches of a task the coefficient of variation is taken over
    cv_threshold: float = 0.01   # below it, the task's best latency has stopped moving
    scale_window: bool = False   # a task with k times the average share of the estimate waits k windows
    statistic: str = "batch_best"  # the CV is over each batch's own best (Moses) or the best so far

    def __post_init__(self):
        if self.window < 2 or not self.cv_threshold >= 0:
            raise ValueError(f"params.yaml tune.controller: window must be >= 2 and cv_threshold >= 0, "
                             f"got window={self.window}, cv_threshold={self.cv_threshold}")
        if self.statistic not in STATISTICS:
            raise ValueError(f"params.yaml tune.controller.statistic: {self.statistic!r} is not one of "
                             f"{list(STATISTICS)}")

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> "ControllerSettings":
        return settings_from(cls, (params.get("tune") or {}).get("controller"), "tune.controller")

    def for_run(self, moses: bool) -> "ControllerSettings | None":
        """The settings a run tunes with: on for every model (`enabled`) or for one by its +moses, else None;
        returned enabled, so the settings a run records say it was on either way."""
        return dataclasses.replace(self, enabled=True) if (self.enabled or moses) else None

    def settled(self, history: list[float], load: float = 1.0) -> bool:
        """Whether the last `window` values of a task's history vary less than the threshold (Moses's CV test);
        with `scale_window`, the last ceil(window x load) of them for a task of `load` above 1. A batch in which
        nothing ran (inf) keeps the task going."""
        window = math.ceil(self.window * max(1.0, load)) if self.scale_window else self.window
        recent = np.asarray(history[-window:], dtype="float64")
        if len(recent) < window or not np.isfinite(recent).all():
            return False
        return float(recent.std() / recent.mean()) < self.cv_threshold


class TaskLedger:
    """What one run's SettlingSearch clones share: each task's place in the tuning order (set once the tasks are
    extracted), the run's CurveRecorder (which keeps every task's weight, best latency so far and each of its
    batches' best) and the names of the tasks that ended, in order."""

    def __init__(self):
        self.order: dict[str, int] = {}
        self.curve = None  # tcl.tvm.curve.CurveRecorder, set before tuning starts
        self.stopped: list[str] = []

    def _recorded(self, task: str) -> bool:
        return self.curve is not None and task in self.order

    def load(self, task: str) -> float:
        """The task's share of the estimate over the tasks measured so far, times their number (1 = average)."""
        return self.curve.load(self.order[task]) if self._recorded(task) else 1.0

    def history(self, task: str, statistic: str) -> list[float]:
        """The task's `statistic` (STATISTICS) after each of its measured batches ([] before tuning starts)."""
        if not self._recorded(task):
            return []
        batches = self.curve.batch_best[self.order[task]]
        return list(itertools.accumulate(batches, min)) if statistic == "best_so_far" else batches


@derived_object
class SettlingSearch(SearchStrategyWrapper):
    """`inner` (one task's EvolutionarySearch) until the task settles; then it generates nothing. The task's
    history is the run's CurveRecorder's, through `ledger`: a ledger without one never settles a task."""

    def __init__(self, inner, settings: ControllerSettings, ledger: TaskLedger):
        super().__init__(inner)
        self.settings, self.ledger = settings, ledger
        self.task = ""

    def _initialize_with_tune_context(self, context) -> None:
        self.task = str(context.task_name)
        super()._initialize_with_tune_context(context)

    def generate_measure_candidates(self):
        # the recorder has seen every batch of this task by now: the scheduler joins a task's batch (and runs the
        # measure callbacks) before it asks the task for the next one
        history = self.ledger.history(self.task, self.settings.statistic)
        if self.settings.settled(history, self.ledger.load(self.task)):
            self.ledger.stopped.append(self.task)
            return None
        return self.inner.generate_measure_candidates()

    def clone(self):
        return SettlingSearch(self.inner.clone(), self.settings, self.ledger)
