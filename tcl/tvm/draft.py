"""Pruner's draft-then-verify inside MetaSchedule's search: PSA drafts, the learned model verifies.

The evolutionary search scores its whole population with the cost model. Wrapped here, PSA
(tcl.tvm.psa) ranks every candidate first and the inner model scores only the `verify` best of
them (the paper verifies ~512 of ~8,000); the rest get scores below every verified one, in PSA's
order, so the search still prefers the drafted candidates. Updates go to the inner model, so any
cost model works inside: a registered one adapting online, TVM's XGB, the random model.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from tvm.ir.utils import derived_object
from ..config import settings_from
from .memo import ProgramMemo
from .wrapper import CostModelWrapper


@dataclass(frozen=True)
class DraftSettings:
    """`tune.draft` of params.yaml (`enabled` turns it on for every cost model; `+draft` for one)."""

    enabled: bool = False
    population: int = 512    # the search's population while drafting (params.yaml says why these two)
    verify: int = 64         # candidates of each scoring call the learned model sees
    max_sketch_share: float = 0.25  # most of a drafted batch one sketch takes (tcl/tvm/spread.py; params.yaml: why)

    def __post_init__(self):
        if self.verify < 1 or self.population < self.verify:
            raise ValueError(f"params.yaml tune.draft: need 1 <= verify <= population, got verify={self.verify}, "
                             f"population={self.population}")
        if not 0 < self.max_sketch_share <= 1:
            raise ValueError(f"params.yaml tune.draft.max_sketch_share: need a share in (0, 1], "
                             f"got {self.max_sketch_share}")

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> "DraftSettings":
        return settings_from(cls, (params.get("tune") or {}).get("draft"), "tune.draft")

    def for_run(self, draft: bool) -> "DraftSettings | None":
        """The settings a run drafts with: on for every model (`enabled`) or for one by its +draft, else None."""
        return self if (self.enabled or draft) else None

    def search(self, search):
        """The search a drafting run does (a tcl.tvm.tuning.SearchSettings): the draft's population, and batches
        spread over sketches at most `max_sketch_share` each, or tighter where the search itself asks for that.
        PSA's draft narrows the sketches a task's batches come from, and a model learning from the task's
        measurements then never sees the others (docs/results.md, stops 63 and 79)."""
        return dataclasses.replace(search, population=self.population,
                                   max_sketch_share=min(search.max_sketch_share, self.max_sketch_share))


@derived_object
class DraftThenVerify(CostModelWrapper):
    """Scores with `inner` only the `verify` candidates PSA (`analyzer`) estimates fastest."""

    def __init__(self, inner, analyzer, verify: int):
        super().__init__(inner)
        self.analyzer, self.verify = analyzer, int(verify)
        self.psa_scores = ProgramMemo(max_entries=100_000)  # a float each
        self.draft_seconds = 0.0  # PSA's part of the cost model's time (hashing included), for the share report

    def predict(self, context, candidates) -> np.ndarray:
        n = len(candidates)
        drafted = getattr(self.inner, "drafted", None)  # a guard may keep its XGB's tasks undrafted (tcl.tvm.guard)
        if n <= self.verify or (drafted is not None and not drafted(context)):
            return np.asarray(self.inner.predict(context, candidates), dtype="float64")
        order = np.argsort(-self.draft(context, candidates), kind="stable")
        top, rest = order[:self.verify], order[self.verify:]
        verified = np.asarray(self.inner.predict(context, [candidates[i] for i in top]), dtype="float64")
        out = np.empty(n, dtype="float64")
        out[top] = verified
        # below the lowest verified score, still non-negative (the search samples parents in proportion)
        low = max(float(verified.min()), 0.0)
        out[rest] = 0.5 * low * (1.0 - np.arange(len(rest)) / len(rest))
        return out

    def draft(self, context, candidates) -> np.ndarray:
        """PSA's score of each candidate; a program this task has seen is looked up, not analysed again
        (tcl.tvm.memo)."""
        start = time.perf_counter()
        scores = self.psa_scores.lookup(context, candidates, lambda cs: self.analyzer.scores([c.sch.mod for c in cs]))
        self.draft_seconds += time.perf_counter() - start
        return np.asarray(scores, dtype="float64")
