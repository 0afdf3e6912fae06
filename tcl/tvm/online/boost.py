"""A pretrained model that keeps learning the task at hand the way TVM's xgb does: per-task trees
grown on top of the pretrained scores.

Each update fits `boost_rounds` XGBoost trees (rank:pairwise within the task) on all of the
task's measured programs so far, with the pretrained model's score of each program as the
base margin: the trees learn what the knowledge base got wrong about this task, and a
candidate's score is the pretrained score plus the trees' correction. A task with no
measurements yet is scored by the pretrained model alone, and the pretrained model itself
is never changed. So a learned model starts where the knowledge base leaves it and corrects
towards the measurements: what TVM's xgb learns from nothing, it learns on top of a prior.

Any model on TVM's PerStoreFeature can be the prior (the trees read the same features,
summed over stores as TVM's xgb does): the pretrained XGB (for it, trees on its margin are
the same as more boosting rounds of its own booster), Tenset-MLP, and an ensemble of them
(tcl.tvm.ensemble, the `prior`).
"""

from __future__ import annotations

import numpy as np

from ...features.kinds import PER_STORE
from ...models.xgb_model import XGBPerStore, summed
from ...models.xgb_ranker import XGBConfig
from .base import register_adapter
from .frozen import FrozenAdapter


@register_adapter("boost")
class BoostAdapter(FrozenAdapter):
    learns = True

    def check(self, bundle) -> None:
        if bundle.model.input_kind != PER_STORE:
            raise ValueError(f"online adaptation 'boost' grows XGBoost trees on TVM's PerStoreFeature; the "
                             f"{bundle.model_name} model reads {bundle.model.input_kind} (use 'moa' or 'ft')")

    def __init__(self, bundle, settings=None, prior=None):
        super().__init__(bundle, settings, prior)
        self.boosters: dict = {}
        model = bundle.model
        # the pretrained XGB's own tree settings; TVM-xgb-like defaults for any other prior
        self.tree_params = (model.config(seed=0, threads=1) if isinstance(model, XGBPerStore)
                            else XGBConfig(threads=1)).params()

    def score(self, task: str, x: np.ndarray) -> np.ndarray:
        prior = super().score(task, x)
        booster = self.boosters.get(task)
        if booster is None:
            return prior
        return np.asarray(booster.inplace_predict(summed(x), base_margin=prior), dtype=np.float64)

    def adapt(self, task: str, x: np.ndarray, labels: np.ndarray) -> None:
        import xgboost as xgb

        data = xgb.DMatrix(summed(x), label=labels, qid=np.zeros(len(labels), dtype=np.int64),
                           base_margin=super().score(task, x))
        self.boosters[task] = xgb.train(self.tree_params, data, num_boost_round=int(self.settings.boost_rounds))
