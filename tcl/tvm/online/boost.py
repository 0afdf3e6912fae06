"""Pretrained XGBoost that keeps learning the task at hand, as TVM's xgb does from nothing.

Each update grows `boost_rounds` trees on top of the pretrained booster, fitted on all
of the task's measured programs so far (rank:pairwise within the task), into a per-task
booster; the pretrained trees are never changed. A task with no measurements yet is
scored by the pretrained trees alone. So the model starts where the knowledge base
leaves it and corrects towards the measurements, which is what makes a pretrained XGB
an addition to TVM's xgb rather than a replacement.
"""

from __future__ import annotations

import numpy as np

from ...models.xgb_model import XGBPerStore, summed
from .base import register_adapter
from .frozen import FrozenAdapter


@register_adapter("boost")
class BoostAdapter(FrozenAdapter):
    learns = True

    def check(self, bundle) -> None:
        if not isinstance(bundle.model, XGBPerStore):
            raise ValueError(f"online adaptation 'boost' grows XGBoost trees; the {bundle.model_name} model is "
                             "not a pretrained XGB (use 'moa' or 'ft')")

    def __init__(self, bundle, settings=None):
        super().__init__(bundle, settings)
        self.boosters: dict = {}

    def score(self, task: str, x: np.ndarray) -> np.ndarray:
        booster = self.boosters.get(task)
        if booster is None:
            return super().score(task, x)
        return np.asarray(booster.inplace_predict(summed(x)), dtype=np.float64)

    def adapt(self, task: str, x: np.ndarray, labels: np.ndarray) -> None:
        import xgboost as xgb

        base = self.bundle.model
        params = base.config(seed=0, threads=1).params()
        data = xgb.DMatrix(summed(x), label=labels, qid=np.zeros(len(labels), dtype=np.int64))
        self.boosters[task] = xgb.train(params, data, num_boost_round=int(self.settings.boost_rounds),
                                        xgb_model=base.booster)
