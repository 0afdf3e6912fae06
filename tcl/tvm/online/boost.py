"""A pretrained model that keeps learning the task at hand the way TVM's xgb does: trees grown on
top of the pretrained scores.

Each update fits `boost_rounds` XGBoost trees (rank:pairwise, query = task) on measured programs,
with the pretrained model's score of each program as the base margin: the trees learn what the
knowledge base got wrong, and a candidate's score is the pretrained score plus the trees'
correction. A task with nothing measured yet is scored by the pretrained model alone, and the
pretrained model itself is never changed. So a learned model starts where the knowledge base
leaves it and corrects towards the measurements: what TVM's xgb learns from nothing, it learns
on top of a prior.

`boost_scope` says which measurements the trees learn from. `task` (the default): one booster
per task on that task's programs only, so one task's corrections never touch another's ranking.
`run`: one booster over every measured program of the run, each task its own query, as TVM's
xgb learns one model for all of a network's tasks: a network's tasks of one kind (BERT's dense
layers, ResNet's convolutions) then correct the prior together, and a task's first batch is
already scored with what its siblings taught (the trees read the program's features, not the
task's name). On top of the pretrained XGB it did not pay in the tuning benchmark (BERT-base,
three seeds; ResNet-50, one: docs/results.md), so `task` stays the default.

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

SCOPES = ("task", "run")


@register_adapter("boost")
class BoostAdapter(FrozenAdapter):
    learns = True

    def check(self, bundle) -> None:
        if bundle.model.input_kind != PER_STORE:
            raise ValueError(f"online adaptation 'boost' grows XGBoost trees on TVM's PerStoreFeature; the "
                             f"{bundle.model_name} model reads {bundle.model.input_kind} (use 'moa' or 'ft')")
        if self.settings.boost_scope not in SCOPES:
            raise ValueError(f"tune.online.boost_scope must be one of {SCOPES}, got {self.settings.boost_scope!r}")

    def __init__(self, bundle, settings=None, prior=None):
        super().__init__(bundle, settings, prior)
        self.boosters: dict = {}   # task -> its booster ("task" scope); {None: the run's one booster} ("run")
        self._fitted: dict = {}    # task -> (summed inputs, pretrained margins, labels) of its measured programs
        model = bundle.model
        # the pretrained XGB's own tree settings; TVM-xgb-like defaults for any other prior
        self.tree_params = (model.config(seed=0, threads=1) if isinstance(model, XGBPerStore)
                            else XGBConfig(threads=1)).params()

    def score(self, task: str, x: np.ndarray) -> np.ndarray:
        prior = super().score(task, x)
        booster = self.boosters.get(task, self.boosters.get(None))
        if booster is None:
            return prior
        return np.asarray(booster.inplace_predict(summed(x), base_margin=prior), dtype=np.float64)

    def adapt(self, task: str, x: np.ndarray, labels: np.ndarray) -> None:
        self._fitted[task] = (summed(x), super().score(task, x), labels)
        if self.settings.boost_scope == "task":
            self.boosters[task] = self._fit({task: self._fitted[task]})
        else:
            self.boosters = {None: self._fit(self._fitted)}

    def _fit(self, measured: dict):
        """Trees on the measured programs of `measured`'s tasks, one query each, on the pretrained margins."""
        import xgboost as xgb

        parts = list(measured.values())
        qid = np.repeat(np.arange(len(parts), dtype=np.int64), [len(p[2]) for p in parts])
        data = xgb.DMatrix(np.concatenate([p[0] for p in parts]), label=np.concatenate([p[2] for p in parts]),
                           qid=qid, base_margin=np.concatenate([p[1] for p in parts]))
        return xgb.train(self.tree_params, data, num_boost_round=int(self.settings.boost_rounds))
