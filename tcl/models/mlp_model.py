"""Tenset-MLP baseline cost model (Zheng et al., Tenset): an MLP on one flat vector.

Tenset's model encodes features with two Linear+ReLU layers, refines them with two
residual Linear+ReLU blocks and reads out one score. Here the input is one flat feature
vector per program, (batch, feat_dim). Passing seq_len > 1 makes it accept the TLP/TCL
sequence tensors (batch, seq_len, feat_dim) by flattening them (in_dim = seq_len *
feat_dim), so the baseline can run on the same features as the sequence models.
"""

from __future__ import annotations

import torch
import torch.nn as nn

from tcl.models.base import CostModel, mlp, register_model


@register_model("mlp")
class MLPModel(CostModel):
    """Encoder MLP -> residual blocks -> linear score."""

    def __init__(
        self,
        feat_dim: int,
        seq_len: int | None = None,
        hidden: int = 256,
        encoder_layers: int = 2,
        res_blocks: int = 2,
        activation: str = "relu",
    ):
        super().__init__()
        self.hparams = dict(feat_dim=feat_dim, seq_len=seq_len, hidden=hidden,
                            encoder_layers=encoder_layers, res_blocks=res_blocks,
                            activation=activation)
        self.feat_dim, self.seq_len = feat_dim, seq_len
        self.in_dim = feat_dim * (seq_len or 1)
        self.encoder = mlp([self.in_dim] + [hidden] * encoder_layers, activation,
                           final_activation=True)
        self.res_blocks = nn.ModuleList(
            mlp([hidden, hidden], activation, final_activation=True) for _ in range(res_blocks)
        )
        self.head = nn.Linear(hidden, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(batch, feat_dim), or (batch, seq_len, feat_dim) when seq_len > 1 -> (batch,)."""
        if x.dim() == 3 and (self.seq_len or 1) > 1:
            self._check_input(x, ndim=3)
            if x.shape[1] != self.seq_len:
                raise ValueError(f"MLPModel built for seq_len={self.seq_len}, "
                                 f"got {x.shape[1]} rows")
            x = x.flatten(1)
        elif x.dim() != 2 or x.shape[1] != self.in_dim:
            raise ValueError(f"MLPModel expects (batch, {self.in_dim}), got {tuple(x.shape)}")
        h = self.encoder(x)
        for block in self.res_blocks:
            h = block(h) + h
        return self.head(h).squeeze(-1)
