"""A cost-model wrapper that times the inner model, so a tuning run can report the
share of its wall time spent in the cost model (predict + update)."""

from __future__ import annotations

import time

from tvm.ir.utils import derived_object
from .memo import hashed_call
from .wrapper import CostModelWrapper


@derived_object
class TimedCostModel(CostModelWrapper):
    """Delegates to `inner` and adds up the seconds spent in it."""

    def __init__(self, inner):
        super().__init__(inner)
        self.seconds = 0.0
        self.predicted = 0

    def update(self, context, candidates, results) -> None:
        start = time.perf_counter()
        self.inner.update(context, candidates, results)
        self.seconds += time.perf_counter() - start

    def predict(self, context, candidates):
        start = time.perf_counter()
        with hashed_call(candidates):  # the draft's and the features' memos inside share one hash a program
            scores = self.inner.predict(context, candidates)
        self.seconds += time.perf_counter() - start
        self.predicted += len(candidates)
        return scores
