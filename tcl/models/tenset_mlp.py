"""Tenset-MLP on TVM's PerStoreFeature (Zheng et al., Tenset; TVM's SegmentSumMLP).

Each BufferStore's 164-wide vector is encoded by a 2-layer MLP, the encodings are summed
over the program's stores (the "segment sum"), refined by two residual Linear+ReLU layers
and decoded to one score (higher = faster).

Input is (batch, max_stores, 164) with zero rows after each program's stores, because the
shared training loop takes dense (N, R, C) arrays. Padding must contribute nothing, but a
biased encoder maps a zero row to a non-zero vector, so rows that are entirely zero are
masked out before the sum. Real stores are never all zero (every store has at least its
loop/buffer features), and if one were, it would carry no information beyond "a store
exists". Masking keeps the biases, i.e. keeps TVM's architecture, where a bias-free first
layer would not (ReLU(W2 ReLU(0) + b2) is still non-zero).
"""

from __future__ import annotations

import torch
import torch.nn as nn

from tcl.features.kinds import PER_STORE
from tcl.models.base import CostModel, mlp, register_model

PER_STORE_DIM = 164


@register_model("tenset_mlp")
class TensetMLP(CostModel):
    """Per-store encoder -> masked sum over stores -> 2 residual layers -> linear score."""

    input_kind = PER_STORE

    def __init__(self, feat_dim: int = PER_STORE_DIM, seq_len: int | None = None, hidden: int = 256,
                 res_blocks: int = 2, activation: str = "relu"):
        super().__init__()
        self.hparams = dict(feat_dim=feat_dim, seq_len=seq_len, hidden=hidden, res_blocks=res_blocks,
                            activation=activation)
        self.feat_dim, self.seq_len = feat_dim, seq_len  # seq_len unused: any number of stores works
        self.encoder = mlp([feat_dim, hidden, hidden], activation, final_activation=True)
        self.res_blocks = nn.ModuleList(mlp([hidden, hidden], activation, final_activation=True)
                                        for _ in range(res_blocks))
        self.head = nn.Linear(hidden, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(batch, stores, feat_dim) -> (batch,); all-zero store rows are padding."""
        self._check_input(x, ndim=3)
        mask = (x != 0).any(dim=-1, keepdim=True).to(x.dtype)
        h = (self.encoder(x) * mask).sum(dim=1)
        for block in self.res_blocks:
            h = block(h) + h
        return self.head(h).squeeze(-1)
