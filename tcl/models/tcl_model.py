"""TCL's Mamba-based cost model (TCL paper §5.2, Fig. 5).

Each schedule-primitive row (and the hardware row) is lifted by a small MLP encoder,
mixed along the sequence by Mamba, mapped to a per-row score by an MLP decoder, and the
row scores are pooled into one score per program (higher = predicted faster).
"""

from __future__ import annotations

from typing import Sequence

import torch
import torch.nn as nn

from tcl.models.base import CostModel, mlp, register_model
from tcl.models.mamba_block import make_mamba

POOLINGS = ("sum", "mean", "last")


@register_model("tcl")
class TCLModel(CostModel):
    """Encoder -> LayerNorm -> n_layer Mamba -> LayerNorm -> decoder -> pool over rows.

    Defaults are the paper's best setting (Table 2: n_layer=1, d_state=8, expand=1,
    d_conv=4; encoder 64,128,128; decoder 64,32,1), about 92k parameters / 0.35 MB.
    The stages are separate attributes (encoder, norm_in, blocks, norm_out, decoder) so
    the CKD framework can wire lateral connections between two columns layer by layer.
    """

    def __init__(
        self,
        feat_dim: int,
        seq_len: int | None = None,
        encoder_dims: Sequence[int] = (64, 128, 128),
        decoder_dims: Sequence[int] = (64, 32),
        n_layer: int = 1,
        d_state: int = 8,
        d_conv: int = 4,
        expand: int = 1,
        activation: str = "relu",
        pool: str = "sum",
        backend: str = "auto",
    ):
        super().__init__()
        if pool not in POOLINGS:
            raise ValueError(f"pool must be one of {POOLINGS}, got {pool!r}")
        self.hparams = dict(
            feat_dim=feat_dim, seq_len=seq_len, encoder_dims=tuple(encoder_dims),
            decoder_dims=tuple(decoder_dims), n_layer=n_layer, d_state=d_state, d_conv=d_conv,
            expand=expand, activation=activation, pool=pool, backend=backend,
        )
        self.feat_dim, self.seq_len, self.pool = feat_dim, seq_len, pool
        d_model = encoder_dims[-1]
        self.encoder = mlp([feat_dim, *encoder_dims], activation, final_activation=False)
        self.norm_in = nn.LayerNorm(d_model)
        self.blocks = nn.ModuleList(
            make_mamba(d_model, d_state=d_state, d_conv=d_conv, expand=expand, backend=backend)
            for _ in range(n_layer)
        )
        self.norm_out = nn.LayerNorm(d_model)
        self.decoder = mlp([d_model, *decoder_dims, 1], activation, final_activation=False)

    def row_scores(self, x: torch.Tensor) -> torch.Tensor:
        """Per-row contributions (batch, seq_len) before pooling; useful for inspection."""
        self._check_input(x)
        h = self.norm_in(self.encoder(x))
        for block in self.blocks:
            h = block(h)
        return self.decoder(self.norm_out(h)).squeeze(-1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(batch, seq_len, feat_dim) float32 -> (batch,) scores, higher = faster."""
        return self.pool_rows(self.row_scores(x))

    def pool_rows(self, rows: torch.Tensor) -> torch.Tensor:
        """(batch, seq_len) row scores -> (batch,) program scores (CKD's columns pool the same way)."""
        if self.pool == "sum":
            return rows.sum(dim=1)
        if self.pool == "mean":
            return rows.mean(dim=1)
        return rows[:, -1]  # "last": the causal scan has seen every row by then
