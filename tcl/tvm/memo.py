"""What a tuning run computed for a candidate, kept per task by the scheduled program's structural hash.

The evolutionary search scores its population several times per batch and keeps the best
candidates from one generation to the next, so the same programs come back. Hashing a program
(~0.07 ms) is far cheaper than lowering it for TVM's PerStoreFeature (milliseconds) or walking
its loop nest for PSA (~0.6 ms): the learned model's features (tcl.tvm.cost_model) and PSA's
draft scores (tcl.tvm.draft) are both looked up here before they are computed.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence


class ProgramMemo:
    """Values by (task, program); a full memo is cleared rather than grown."""

    def __init__(self, max_entries: int):
        self.max_entries = max_entries
        self.values: dict[tuple[str, str], Any] = {}
        self.hits = self.misses = 0

    def lookup(self, context, candidates, compute: Callable[[list], Sequence]) -> list:
        """One value per candidate of `context`'s task; `compute` (candidates -> one value each) runs only
        for the programs this task has not seen, each once."""
        from tvm.s_tir.meta_schedule.utils import shash2hex

        if len(self.values) > self.max_entries:
            self.values.clear()
        task = str(context.task_name)
        keys = [(task, shash2hex(c.sch.mod)) for c in candidates]
        todo = list({k: i for i, k in enumerate(keys) if k not in self.values}.values())
        if todo:
            self.values.update(zip((keys[i] for i in todo), compute([candidates[i] for i in todo])))
        self.misses += len(todo)
        self.hits += len(keys) - len(todo)
        return [self.values[k] for k in keys]
