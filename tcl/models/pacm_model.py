"""PaCM, Pruner's pattern-aware cost model (§4.2): a store branch and a dataflow branch.

The store branch encodes each of TVM's per-store feature rows with linear layers and sums them
(as Tenset-MLP does); the dataflow branch embeds each data block (tcl.features.dataflow) with its
position in the program's order and runs self-attention over the blocks, because a block's cost
depends on the blocks around it (the tile one level up, the store it feeds). The two summaries are
concatenated and decoded to one score, higher = faster; trained with LambdaRank like the others.

Input: (batch, rows, PACKED_DIM), rows typed by the last column (1 store, 2 block, 0 padding).
"""

from __future__ import annotations

import torch
import torch.nn as nn

from tcl.features.dataflow import BLOCK_ROW, DATAFLOW_DIM, PACKED_DIM, STORE_ROW
from tcl.features.kinds import PACM
from tcl.features.per_store import FEATURE_DIM
from tcl.models.base import CostModel, mlp, register_model


@register_model("pacm")
class PaCM(CostModel):
    """Store MLP -> sum  ||  block embedding + position -> self-attention -> mean  ->  MLP -> score."""

    input_kind = PACM

    def __init__(self, feat_dim: int = PACKED_DIM, seq_len: int | None = None, hidden: int = 128, heads: int = 4,
                 layers: int = 1, activation: str = "relu"):
        super().__init__()
        if feat_dim != PACKED_DIM:
            raise ValueError(f"PaCM reads rows of {PACKED_DIM} (tcl.features.dataflow.pack), got feat_dim={feat_dim}")
        self.hparams = dict(feat_dim=feat_dim, seq_len=seq_len, hidden=hidden, heads=heads, layers=layers,
                            activation=activation)
        self.feat_dim, self.seq_len = feat_dim, seq_len
        self.stores = mlp([FEATURE_DIM, hidden, hidden], activation, final_activation=True)
        self.blocks = nn.Linear(DATAFLOW_DIM, hidden)
        self.position = nn.Embedding(max(int(seq_len or 0), 1) + 1, hidden)
        layer = nn.TransformerEncoderLayer(hidden, heads, dim_feedforward=2 * hidden, dropout=0.0,
                                           batch_first=True)
        self.attention = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = mlp([2 * hidden, hidden, 1], activation, final_activation=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(batch, rows, PACKED_DIM) -> (batch,)."""
        self._check_input(x, ndim=3)
        kind = x[..., -1]
        store = (kind == STORE_ROW).unsqueeze(-1).to(x.dtype)
        block = kind == BLOCK_ROW
        stores = (self.stores(x[..., :FEATURE_DIM]) * store).sum(dim=1)
        position = (block.cumsum(dim=1) - 1).clamp(min=0, max=self.position.num_embeddings - 1)
        h = self.blocks(x[..., :DATAFLOW_DIM]) + self.position(position)
        # a program without blocks attends to its first row, whose output the mask then drops
        padding = ~block
        padding[:, 0] &= block.any(dim=1)
        h = self.attention(h, src_key_padding_mask=padding)
        weight = block.unsqueeze(-1).to(x.dtype)
        flows = (h * weight).sum(dim=1) / weight.sum(dim=1).clamp(min=1.0)
        return self.head(torch.cat([stores, flows], dim=-1)).squeeze(-1)
