"""Several trained bundles that read the same input, scoring MetaSchedule candidates together.

    tune.cost_models: [tenset_mlp,pretrained_xgb]        frozen
    tune.cost_models: [tenset_mlp,pretrained_xgb+boost]  per-task trees grown on top (tcl.tvm.online.boost)

Tenset-MLP and the pretrained XGB both read TVM's PerStoreFeature rows and rank held-out tasks
differently enough that their sum ranks better than either (benchmarks/eval_pins.py --ensemble).
The rows are extracted once (the cost of a learned model in the search, benchmarks/
bench_cost_overhead.py) and each member's forward pass is a fraction of a millisecond, so the
second opinion costs almost nothing. Members' scores live on different scales: each is divided by
its spread over the first population of a task it scores (after taking that population's mean
off), a standardization then kept for that task, so the scores of one task's later populations
stay comparable (the search keeps its best candidates across generations by score).

The ensemble is a prior of an online adapter (tcl.tvm.online: `prior`), scored inside the one
LearnedCostModel with the first member's featurization.
"""

from __future__ import annotations

import numpy as np

from ..models.base import predict


def check_members(bundles: list, names: list[str]) -> None:
    """ValueError unless every bundle reads the same input kind (one featurization serves them all)."""
    kinds = {type(b.featurizer).__name__ for b in bundles}
    if len(bundles) < 2 or len(kinds) != 1:
        raise ValueError(f"an ensemble needs two or more models that read the same input; "
                         f"{', '.join(f'{n}: {type(b.featurizer).__name__}' for n, b in zip(names, bundles))}")


class EnsemblePrior:
    """`prior(task, x)`: the sum of `bundles`' scores of inputs `x` of `task`, each scaled per task."""

    MIN_SPREAD = 1e-6      # a member that scores a whole population alike gets no say on that task
    MIN_POPULATION = 32    # fewer candidates than this set no task's standardization

    def __init__(self, bundles: list, names: list[str]):
        check_members(bundles, names)
        self.bundles, self.names = bundles, list(names)
        self.standard: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # task -> (mean, spread) per member

    def member_scores(self, task: str, x: np.ndarray) -> np.ndarray:
        """(members, candidates) scores, each row standardized as that member's first population of `task`
        was (a call too small to set it is standardized on its own)."""
        raw = np.stack([predict(b.model, x) for b in self.bundles])
        mean, spread = self.standard.get(task) or (raw.mean(axis=1), raw.std(axis=1))
        if task not in self.standard and raw.shape[1] >= self.MIN_POPULATION:
            self.standard[task] = (mean, spread)
        return (raw - mean[:, None]) / np.where(spread > self.MIN_SPREAD, spread, np.inf)[:, None]

    def __call__(self, task: str, x: np.ndarray) -> np.ndarray:
        return self.member_scores(task, x).sum(axis=0)
