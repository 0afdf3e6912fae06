"""The base of the cost models that wrap another (timing it, drafting for it, recording its scores).

Each passes load, save and update to the model inside and changes only what it is for; subclasses
are decorated with `derived_object` as MetaSchedule's own Python cost models are.
"""

from __future__ import annotations

from tvm.s_tir.meta_schedule.cost_model import PyCostModel


class CostModelWrapper(PyCostModel):
    """Delegates every call to `inner`; override what the wrapper changes."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def load(self, path: str) -> None:
        self.inner.load(path)

    def save(self, path: str) -> None:
        self.inner.save(path)

    def update(self, context, candidates, results) -> None:
        self.inner.update(context, candidates, results)

    def predict(self, context, candidates):
        return self.inner.predict(context, candidates)
