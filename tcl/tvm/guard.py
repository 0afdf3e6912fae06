"""A learned model that cannot rank a task worse than TVM's XGB for long: per-task choice on fresh batches.

A pretrained model that ranks familiar tasks well can steer the search below random search on an
operator it has never seen. Guarded (`+guard`), each task is scored by whichever of two rankers
ordered that task's last `window` measured batches better: the learned model (adapting as its name
says) or TVM's XGB, which learns from every measurement of the run exactly as it does when it tunes
alone. Each measured batch is a fresh test for both: their scores for it are taken before either
learns its latencies. The learned model keeps a task unless XGB's pairwise accuracy over the window
beats it by `margin`; a task handed to XGB comes back the same way. Costs one XGB per run and two
extra scorings of each measured batch.

Pairwise accuracy on batches the learned model picked itself does not expose a model that is lost on
an operator it never saw (M5's conv1d on a model trained on 2-D convolutions kept every task and tuned
the heaviest one 1.5x slower than XGB). So a task whose operator type has fewer than `familiar_tasks`
tasks in the model's training data (the bundle's `op_types`) is XGB's from its first batch to the end.

Handed off (`+handoff`), every task is XGB's for good once the learned model has picked its first
`handoff_batches` measured batches: the knowledge base makes the cold-start picks, where it is far
ahead of an XGB that has seen nothing, and the task's own measurements (those picks, which also seed
the next populations) teach XGB from there, where a frozen model stalls (docs/results.md, ResNet-50).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.cost_model import PyCostModel

from ..config import settings_from
from ..models.metrics import pairwise_accuracy
from ..workloads.tasks import classify_op_type


@dataclass(frozen=True)
class GuardSettings:
    """`tune.guard` of params.yaml (`enabled` turns it on for every learned model; `+guard` for one)."""

    enabled: bool = False
    window: int = 3         # measured batches of a task the two rankers are compared over
    margin: float = 0.05    # pairwise accuracy by which the other ranker must lead to take the task
    familiar_tasks: int = 1  # training tasks of its operator type a task needs to start on the learned model
    handoff_batches: int = 1  # +handoff: a task's measured batches the learned model picks before XGB takes it
    draft_fallback: bool = True  # +draft: PSA drafts for XGB's tasks too (False: XGB scores them whole, as alone)
    cold_draft_batches: int = 0  # with draft_fallback off: PSA still drafts an XGB task's first this many batches

    def __post_init__(self):
        if (self.window < 1 or not 0.0 <= self.margin < 1.0 or self.familiar_tasks < 0 or self.handoff_batches < 1
                or self.cold_draft_batches < 0):
            raise ValueError(f"params.yaml tune.guard: need window >= 1, 0 <= margin < 1, familiar_tasks >= 0, "
                             f"handoff_batches >= 1 and cold_draft_batches >= 0, got window={self.window}, "
                             f"margin={self.margin}, familiar_tasks={self.familiar_tasks}, "
                             f"handoff_batches={self.handoff_batches}, cold_draft_batches={self.cold_draft_batches}")

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> "GuardSettings":
        return settings_from(cls, (params.get("tune") or {}).get("guard"), "tune.guard")

    def for_run(self, spec) -> "GuardSettings | None":
        """The settings a run guards with (a tcl.tvm.names.CostModelName): every learned model when `enabled`,
        one by its +guard or +handoff, else None."""
        return self if ((self.enabled and not spec.builtin) or spec.guard or spec.handoff) else None


@derived_object
class GuardedCostModel(PyCostModel):
    """Scores each task with `inner` or `fallback`, whichever ranked its recent measured batches better;
    `fallback` alone scores the tasks of operator types `inner` was not trained on (`op_types`: training
    tasks per operator type; None when unknown, and then every task starts on `inner`). With `handoff`,
    a task is `fallback`'s for good after `settings.handoff_batches` measured batches."""

    def __init__(self, inner, fallback, settings: GuardSettings, op_types: dict[str, int] | None = None,
                 handoff: bool = False):
        super().__init__()
        self.inner, self.fallback, self.settings, self.op_types = inner, fallback, settings, op_types
        self.handoff = handoff
        self.accuracy: dict[str, list[tuple[float, float]]] = {}  # task -> (inner, fallback) per batch
        self.batches: dict[str, int] = {}  # task -> measured batches so far
        self.on_fallback: set[str] = set()
        self.unfamiliar: dict[str, str] = {}  # task -> its operator type, absent from the training data
        self.handed_off: set[str] = set()
        self.switches: list[tuple[str, int, str]] = []  # (task, batch, "fallback" | "inner" | "unfamiliar"
        #                                                   | "handoff")
        self._seen: set[str] = set()

    def _task(self, context) -> str:
        """The context's task name; a task seen for the first time is checked against the training operators."""
        task = str(context.task_name)
        if task not in self._seen:
            self._seen.add(task)
            if self.op_types is not None:
                op = classify_op_type(task, context.mod)
                if self.op_types.get(op, 0) < self.settings.familiar_tasks:
                    self.unfamiliar[task] = op
                    self.on_fallback.add(task)
                    self.switches.append((task, 0, "unfamiliar"))
        return task

    def load(self, path: str) -> None:
        self.inner.load(path)

    def save(self, path: str) -> None:
        self.inner.save(path)

    def drafted(self, context) -> bool:
        """Whether a draft (tcl.tvm.draft) around this model should draft for the task: not for one XGB scores
        when `draft_fallback` is off, so that XGB searches as it does alone, PSA's blind spots aside, except
        in the task's first `cold_draft_batches` batches: there XGB has seen nothing of the task and ranks
        about at random, and PSA's draft is the better first pick (M5's conv1d: docs/results.md, stop 90)."""
        task = self._task(context)
        return (self.settings.draft_fallback or task not in self.on_fallback
                or self.batches.get(task, 0) < self.settings.cold_draft_batches)

    def predict(self, context, candidates) -> np.ndarray:
        model = self.fallback if self._task(context) in self.on_fallback else self.inner
        return np.asarray(model.predict(context, candidates), dtype="float64")

    def update(self, context, candidates, results) -> None:
        task = self._task(context)
        ran = [i for i, r in enumerate(results) if r.error_msg is None and r.run_secs]
        self.batches[task] = self.batches.get(task, 0) + 1
        # a task the accuracy test already gave XGB is handed off too, or the test could give it back
        if (self.handoff and task not in self.handed_off and task not in self.unfamiliar
                and self.batches[task] >= self.settings.handoff_batches):
            self.on_fallback.add(task)
            self.handed_off.add(task)
            self.switches.append((task, self.batches[task], "handoff"))
        # an unfamiliar or handed-off task stays XGB's: nothing to compare
        if len(ran) >= 2 and task not in self.unfamiliar and task not in self.handed_off:
            measured = [candidates[i] for i in ran]
            speed = 1.0 / np.asarray([np.mean([float(s) for s in results[i].run_secs]) for i in ran])
            same_task = np.zeros(len(ran))
            scores = [model.predict(context, measured) for model in (self.inner, self.fallback)]
            accuracy = tuple(pairwise_accuracy(s, speed, same_task) for s in scores)
            if all(np.isfinite(accuracy)):
                self.accuracy.setdefault(task, []).append(accuracy)
                self._choose(task)
        if task not in self.handed_off:  # a handed-off task is never scored by `inner` again: nothing to learn
            self.inner.update(context, candidates, results)
        self.fallback.update(context, candidates, results)

    def _choose(self, task: str) -> None:
        history = self.accuracy[task]
        if len(history) < self.settings.window:
            return
        ours, theirs = np.mean(history[-self.settings.window:], axis=0)
        if task not in self.on_fallback and theirs > ours + self.settings.margin:
            self.on_fallback.add(task)
            self.switches.append((task, len(history), "fallback"))
        elif task in self.on_fallback and ours > theirs + self.settings.margin:
            self.on_fallback.discard(task)
            self.switches.append((task, len(history), "inner"))
