"""Pretrained XGBoost on TVM's PerStoreFeature (Tenset's strongest CPU model), as a bundle model.

The trees are `tcl.models.xgb_ranker.XGBRanker`'s (rank:pairwise, query = task, stores
summed on the input side). Wrapping the booster in an `nn.Module` lets it travel in the
same bundle, registry entry and MetaSchedule cost model as the neural models: the booster's
bytes live in a buffer of the state dict, `forward` scores padded (batch, stores, 164)
inputs like Tenset-MLP's, and training is `fit_ranker` instead of gradient steps (the
train stage asks `trains_by_gradient`).

In tuning, `tcl.tvm.online.boost` keeps learning from the task's measurements by adding
trees to a per-task copy of this booster, the way TVM's own xgb learns from scratch.
"""

from __future__ import annotations

import numpy as np
import torch

from tcl.features.kinds import PER_STORE
from tcl.models.base import CostModel, register_model
from tcl.models.xgb_ranker import XGBConfig, XGBRanker, tree_nodes

PER_STORE_DIM = 164


@register_model("xgb")
class XGBPerStore(CostModel):
    """Gradient-boosted ranking trees over the per-program sum of PerStoreFeature rows."""

    input_kind = PER_STORE
    trains_by_gradient = False

    def __init__(self, feat_dim: int = PER_STORE_DIM, seq_len: int | None = None, rounds: int = 200,
                 max_depth: int = 10, eta: float = 0.2, gamma: float = 0.001, min_child_weight: float = 0.0):
        super().__init__()
        self.hparams = dict(feat_dim=feat_dim, seq_len=seq_len, rounds=rounds, max_depth=max_depth, eta=eta,
                            gamma=gamma, min_child_weight=min_child_weight)
        self.feat_dim, self.seq_len = feat_dim, seq_len
        self.register_buffer("booster_ubj", torch.zeros(0, dtype=torch.uint8))
        self._booster = None

    # -- the booster, kept in the state dict as UBJSON bytes
    @property
    def booster(self):
        if self._booster is None and self.booster_ubj.numel():
            import xgboost as xgb

            self._booster = xgb.Booster(model_file=bytearray(self.booster_ubj.numpy().tobytes()))
            self._booster.set_param({"nthread": 1})
        return self._booster

    def set_booster(self, booster) -> None:
        self._booster = booster
        self.booster_ubj = torch.frombuffer(bytearray(booster.save_raw(raw_format="ubj")), dtype=torch.uint8)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        # the saved booster's length is not the empty buffer's: take it as it is
        key = prefix + "booster_ubj"
        if key in state_dict:
            self.booster_ubj = state_dict[key].clone()
            self._booster = None
        else:
            missing_keys.append(key)

    def config(self, seed: int = 0, threads: int = 1):
        hp = self.hparams
        return XGBConfig(rounds=int(hp["rounds"]), max_depth=int(hp["max_depth"]), eta=float(hp["eta"]),
                         gamma=float(hp["gamma"]), min_child_weight=float(hp["min_child_weight"]), seed=seed,
                         threads=threads)

    def fit_ranker(self, x: np.ndarray, labels: np.ndarray, groups: np.ndarray, seed: int = 0,
                   threads: int = 1) -> "XGBPerStore":
        """Train the trees on padded (N, stores, 164) inputs, labels and task groups."""
        ranker = XGBRanker(self.config(seed, threads)).fit(summed(x), labels, groups)
        self.set_booster(ranker.booster)
        return self

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(batch, stores, 164) -> (batch,) scores, higher = faster; zeros before training."""
        self._check_input(x, ndim=3)
        if self.booster is None:
            return torch.zeros(x.shape[0], dtype=torch.float32)
        scores = self.booster.inplace_predict(summed(x.detach().cpu().numpy()))
        return torch.from_numpy(np.asarray(scores, dtype=np.float32))

    def param_count(self, trainable_only: bool = False) -> int:
        return tree_nodes(self.booster)


def summed(x: np.ndarray) -> np.ndarray:
    """(N, stores, 164) padded -> (N, 164): the sum over stores (padding rows are zeros)."""
    return np.ascontiguousarray(np.asarray(x, dtype=np.float32).sum(axis=1))

