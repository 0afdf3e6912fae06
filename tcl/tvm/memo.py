"""What a tuning run computed for a candidate, kept per task by the scheduled program's structural hash.

The evolutionary search scores its population several times per batch and keeps the best
candidates from one generation to the next, so the same programs come back. Hashing a program
(~0.1 ms) is far cheaper than lowering it for TVM's PerStoreFeature (milliseconds) or reading
and estimating its loop nest for PSA (~1.6 ms on a Zen 1): the learned model's features (tcl.tvm.cost_model) and PSA's
draft scores (tcl.tvm.draft) are both looked up here before they are computed.

One scoring call passes through several wrappers (the sketch spread's recorder, the timer, the
draft, the feature cache), and each needs the candidates' hashes: the outermost hashes them once
for the whole call (`hashed_call`) and the others read them back (`program_keys`). A py-spy
profile of a MobileNet-V2 run had hashing at 2.4% of the wall time, half of it the same
programs hashed a second time.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterator, Sequence

# candidate handle -> structural hash, for the scoring calls in progress; a handle is the address of a
# candidate the caller holds for the whole call, so it cannot be reused while its entry is here
_CALL_KEYS: dict[int, str] = {}


def program_keys(candidates) -> list[str]:
    """The structural hash of each candidate's program (`shash2hex`, the task-key format of the
    databases), from the call's `hashed_call` when an outer wrapper already took them."""
    from tvm.s_tir.meta_schedule.utils import shash2hex

    return [_CALL_KEYS.get(hash(c)) or shash2hex(c.sch.mod) for c in candidates]


@contextmanager
def hashed_call(candidates) -> Iterator[list[str]]:
    """The candidates' `program_keys`, readable by every wrapper scoring them inside the block."""
    keys = program_keys(candidates)
    handles = [h for h in map(hash, candidates) if h not in _CALL_KEYS]
    _CALL_KEYS.update(zip(map(hash, candidates), keys))
    try:
        yield keys
    finally:
        for h in handles:  # only what this block added: an outer block's entries stay for the rest of its call
            _CALL_KEYS.pop(h, None)


class ProgramMemo:
    """Values by (task, program); a full memo is cleared rather than grown."""

    def __init__(self, max_entries: int):
        self.max_entries = max_entries
        self.values: dict[tuple[str, str], Any] = {}
        self.hits = self.misses = 0

    def lookup(self, context, candidates, compute: Callable[[list], Sequence]) -> list:
        """One value per candidate of `context`'s task; `compute` (candidates -> one value each) runs only
        for the programs this task has not seen, each once."""
        if len(self.values) > self.max_entries:
            self.values.clear()
        task = str(context.task_name)
        keys = [(task, key) for key in program_keys(candidates)]
        todo = list({k: i for i, k in enumerate(keys) if k not in self.values}.values())
        if todo:
            self.values.update(zip((keys[i] for i in todo), compute([candidates[i] for i in todo])))
        self.misses += len(todo)
        self.hits += len(keys) - len(todo)
        return [self.values[k] for k in keys]
