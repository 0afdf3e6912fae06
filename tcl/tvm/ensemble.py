"""Several trained bundles that read the same input scoring MetaSchedule candidates together.

    tune.cost_models: [tenset_mlp,pretrained_xgb]     (tcl.tvm.names: members joined by commas)

Tenset-MLP and the pretrained XGB both read TVM's PerStoreFeature rows and rank held-out tasks
differently enough that their sum ranks better than either (benchmarks/eval_pins.py --ensemble).
The rows are extracted once (the cost of a learned model in the search, benchmarks/
bench_cost_overhead.py) and each member's forward pass is a fraction of a millisecond, so the
second opinion costs almost nothing. Members' scores live on different scales: each is divided by
its spread over the first population of a task it scores (after taking that population's mean
off), a standardization then kept for that task, so the scores of one task's later populations
stay comparable (the search keeps its best candidates across generations by score). Frozen:
measurements teach the members nothing.
"""

from __future__ import annotations

import numpy as np
from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.cost_model import PyCostModel

from ..models.base import predict
from .cost_model import FeatureCache


def check_members(bundles: list, names: list[str]) -> None:
    """ValueError unless every bundle reads the same input kind (one featurization serves them all)."""
    kinds = {type(b.featurizer).__name__ for b in bundles}
    if len(bundles) < 2 or len(kinds) != 1:
        raise ValueError(f"an ensemble needs two or more models that read the same input; "
                         f"{', '.join(f'{n}: {type(b.featurizer).__name__}' for n, b in zip(names, bundles))}")


@derived_object
class EnsembleCostModel(PyCostModel):
    """Scores candidates with the sum of `bundles`' scores, each scaled per task (see the module doc)."""

    MIN_SPREAD = 1e-6      # a member that scores a whole population alike gets no say on that task
    MIN_POPULATION = 32    # fewer candidates than this set no task's standardization

    def __init__(self, bundles: list, names: list[str], spec_vector=None):
        import torch

        super().__init__()
        check_members(bundles, names)
        torch.set_num_threads(1)
        self.bundles, self.names = bundles, list(names)
        self.spec_vector = list(spec_vector) if spec_vector is not None else bundles[0].spec_vector
        self.features = FeatureCache(bundles[0], self.spec_vector)
        self.standard: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # task -> (mean, spread) per member

    def load(self, path: str) -> None:
        raise NotImplementedError("an ensemble is built from its members' bundles (tcl.tvm.stage)")

    def save(self, path: str) -> None:
        raise NotImplementedError("an ensemble is built from its members' bundles (tcl.tvm.stage)")

    def update(self, context, candidates, results) -> None:
        """Frozen: nothing to learn."""

    def member_scores(self, task: str, x: np.ndarray) -> np.ndarray:
        """(members, candidates) scores, each row standardized as that member's first population of `task`
        was (a call too small to set it is standardized on its own)."""
        raw = np.stack([predict(b.model, x) for b in self.bundles])
        mean, spread = self.standard.get(task) or (raw.mean(axis=1), raw.std(axis=1))
        if task not in self.standard and raw.shape[1] >= self.MIN_POPULATION:
            self.standard[task] = (mean, spread)
        return (raw - mean[:, None]) / np.where(spread > self.MIN_SPREAD, spread, np.inf)[:, None]

    def predict(self, context, candidates) -> np.ndarray:
        if not candidates:
            return np.zeros(0, dtype="float64")
        x = self.features.of(context, candidates)
        scores = self.member_scores(str(context.task_name), x).sum(axis=0)
        return np.logaddexp(0.0, scores).astype("float64")  # non-negative, monotone (tcl.tvm.cost_model)
