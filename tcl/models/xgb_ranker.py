"""TVM's XGBModel-style ranker: gradient-boosted trees on the per-store-summed PerStoreFeature.

Same inputs as TVM (PerStoreFeature), same labels and task groups as our models. Two
deliberate differences from TVM's XGBModel, so that the baseline is trained the way our
models are:
* objective `rank:pairwise` with qid = task group (the tuner only ranks candidates of one
  task; our models train with LambdaRank for the same reason), where TVM regresses the
  label with a label-weighted squared error. XGBoost 3 builds every same-task pair with
  different labels (pair method topk, unbounded pairs per sample);
* the stores are summed on the input side (one 164-vector per program), where TVM sums
  the per-store tree outputs ("pack-sum", which needs a custom objective). The summed
  vector works with XGBoost's built-in ranker, at the price of trees seeing program
  totals rather than individual stores.
Tree settings follow TVM's XGBConfig (max_depth 10, eta 0.2, gamma 0.001,
min_child_weight 0); a fixed number of rounds, deterministic under the seed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np



@dataclass
class XGBConfig:
    rounds: int = 200
    max_depth: int = 10
    eta: float = 0.2
    gamma: float = 0.001
    min_child_weight: float = 0.0
    objective: str = "rank:pairwise"
    seed: int = 0
    threads: int = 1

    def params(self) -> dict[str, Any]:
        return {"objective": self.objective, "max_depth": self.max_depth, "eta": self.eta, "gamma": self.gamma,
                "min_child_weight": self.min_child_weight, "seed": self.seed, "nthread": self.threads,
                "tree_method": "hist"}


class XGBRanker:
    """Fit on (N, 164) vectors + labels + task groups; score() returns higher = faster."""

    def __init__(self, cfg: XGBConfig | None = None):
        self.cfg = cfg or XGBConfig()
        self.booster = None

    def fit(self, x: np.ndarray, labels: np.ndarray, groups: np.ndarray) -> "XGBRanker":
        import xgboost as xgb

        order = np.argsort(np.asarray(groups), kind="stable")  # XGBoost wants each query's rows contiguous
        y = np.nan_to_num(np.asarray(labels, dtype=np.float32)[order], nan=0.0, posinf=0.0, neginf=0.0)
        dtrain = xgb.DMatrix(np.asarray(x, dtype=np.float32)[order], label=y,
                             qid=np.asarray(groups)[order] if self.cfg.objective.startswith("rank:") else None,
                             nthread=self.cfg.threads)
        self.booster = xgb.train(self.cfg.params(), dtrain, num_boost_round=self.cfg.rounds)
        return self

    def score(self, x: np.ndarray) -> np.ndarray:
        if self.booster is None:
            raise RuntimeError("XGBRanker.score before fit")
        return self.booster.inplace_predict(np.asarray(x, dtype=np.float32)).astype(np.float64)

    def size_bytes(self) -> int:
        """Bytes of the saved model (UBJSON, XGBoost's native format)."""
        return len(self.booster.save_raw(raw_format="ubj")) if self.booster is not None else 0

    def n_nodes(self) -> int:
        return tree_nodes(self.booster)


def tree_nodes(booster) -> int:
    """Tree nodes (splits + leaves) of a booster, 0 before training: the closest thing trees have to a
    parameter count."""
    if booster is None:
        return 0
    return sum(sum(1 for line in tree.splitlines() if line.strip()) for tree in booster.get_dump())
