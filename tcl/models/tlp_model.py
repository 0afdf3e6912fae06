"""TLP baseline cost model (Zhai et al., TLP §4.4 Fig. 7 and §6.1.3).

Rows are "upsampled" by an MLP to the hidden size, mixed by self-attention (TLP found
one layer with 8 heads best), refined by residual MLP blocks (two were best), mapped to
per-row scores by an MLP head and summed over the sequence.
`backbone` and `head` are separate so MTL-TLP can put one head per platform on top.
"""

from __future__ import annotations

from typing import Sequence

import torch
import torch.nn as nn

from tcl.models.base import CostModel, mlp, register_model


class _SelfAttention(nn.Module):
    """One multi-head self-attention layer with a residual connection, as in TLP."""

    def __init__(self, dim: int, heads: int, dropout: float):
        super().__init__()
        self.attn = nn.MultiheadAttention(dim, heads, dropout=dropout, batch_first=True)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.attn(h, h, h, need_weights=False)[0] + h


class _Residual(nn.Module):
    """h + act(Linear(h)): TLP's residual block."""

    def __init__(self, dim: int, activation: str):
        super().__init__()
        self.f = mlp([dim, dim], activation, final_activation=True)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.f(h) + h


class TLPBackbone(nn.Module):
    """Upsampling MLP -> self-attention layer(s) -> residual blocks; (b, L, F) -> (b, L, H)."""

    def __init__(self, feat_dim: int, upsample_dims: Sequence[int], heads: int,
                 attention_layers: int, res_blocks: int, activation: str, dropout: float):
        super().__init__()
        hidden = upsample_dims[-1]
        self.upsample = mlp([feat_dim, *upsample_dims], activation, final_activation=True)
        self.attention = nn.Sequential(*(_SelfAttention(hidden, heads, dropout)
                                         for _ in range(attention_layers)))
        self.residual = nn.Sequential(*(_Residual(hidden, activation) for _ in range(res_blocks)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.residual(self.attention(self.upsample(x)))


@register_model("tlp")
class TLPModel(CostModel):
    """TLP: backbone + per-row MLP head, summed over rows into one score per program."""

    def __init__(
        self,
        feat_dim: int,
        seq_len: int | None = None,
        upsample_dims: Sequence[int] = (64, 128, 256, 256),
        head_dims: Sequence[int] = (128, 64),
        heads: int = 8,
        attention_layers: int = 1,
        res_blocks: int = 2,
        activation: str = "relu",
        dropout: float = 0.0,
    ):
        super().__init__()
        if upsample_dims[-1] % heads:
            raise ValueError(f"hidden size {upsample_dims[-1]} not divisible by heads={heads}")
        self.hparams = dict(
            feat_dim=feat_dim, seq_len=seq_len, upsample_dims=tuple(upsample_dims),
            head_dims=tuple(head_dims), heads=heads, attention_layers=attention_layers,
            res_blocks=res_blocks, activation=activation, dropout=dropout,
        )
        self.feat_dim, self.seq_len = feat_dim, seq_len
        self.backbone = TLPBackbone(feat_dim, upsample_dims, heads, attention_layers,
                                    res_blocks, activation, dropout)
        self.head = mlp([upsample_dims[-1], *head_dims, 1], activation, final_activation=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(batch, seq_len, feat_dim) -> (batch,) scores, higher = faster."""
        self._check_input(x)
        return self.head(self.backbone(x)).squeeze(-1).sum(dim=1)
