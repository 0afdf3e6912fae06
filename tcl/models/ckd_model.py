"""TCL's two columns for continual knowledge distillation (TCL §6, Fig. 6, eq. 7).

The knowledge base (KB) and the active column (AC) are both TCLModels with the same
hyperparameters. Every AC layer after the first reads, besides its own input, the
input of the KB's matching layer through a lateral connection (eq. 7):

    h_i = act(W_i h_{i-1} + alpha_i * U_i act(V_i h^KB_{i-1} + c_i) + b_i)

Lateral sites: each Linear of the encoder except the first (there both columns read
the same x, so a lateral would carry nothing of the KB), each Mamba block (the block
stands in for W_i h_{i-1}), and each Linear of the decoder. `act` is the column's
own activation where the TCLModel has one; after the encoder's last Linear, a Mamba
block and the decoder's output the lateral is added with no activation, so the AC
keeps the architecture of a plain TCLModel. V_i narrows to `lateral_dim` units (the
adapter of progressive networks): at the defaults the laterals add about a third of
one column (33k parameters to 92k) instead of doubling it. alpha_i is a trainable
vector, started at 0.1 so that a fresh AC begins close to a plain TCLModel and
learns how much of the KB to use.

`forward` is the AC with its KB laterals, the deployable model; `kb` alone is the
student of the distillation phase. The state_dict holds both columns and the
laterals, so `build_model("ckd_ac", ...)` + `load_state_dict` restores it.
"""

from __future__ import annotations

from typing import Iterator

import torch
import torch.nn as nn

from .base import CostModel, mlp, register_model
from .tcl_model import TCLModel

ALPHA_INIT = 0.1


class Lateral(nn.Module):
    """alpha * U act(V h_kb + c): one KB-to-AC connection (U has no bias: b_i is the AC layer's)."""

    def __init__(self, d_kb: int, d_out: int, width: int, activation: str):
        super().__init__()
        self.adapter = mlp([d_kb, width], activation, final_activation=True)  # act(V h + c)
        self.up = nn.Linear(width, d_out, bias=False)  # U
        self.alpha = nn.Parameter(torch.full((d_out,), ALPHA_INIT))

    def forward(self, h_kb: torch.Tensor) -> torch.Tensor:
        return self.alpha * self.up(self.adapter(h_kb))


def _linear_layers(stack: nn.Sequential) -> list[tuple[nn.Linear, nn.Module | None]]:
    """(Linear, the activation right after it or None) for each Linear of an `mlp` stack."""
    mods = list(stack)
    return [(m, mods[i + 1] if i + 1 < len(mods) and not isinstance(mods[i + 1], nn.Linear) else None)
            for i, m in enumerate(mods) if isinstance(m, nn.Linear)]


@register_model("ckd_ac")
class CKDModel(CostModel):
    """KB + AC (two TCLModels) joined by eq. 7's laterals; scores with the AC."""

    def __init__(self, feat_dim: int, seq_len: int | None = None, lateral_dim: int = 32, **tcl_hparams):
        super().__init__()
        self.kb = TCLModel(feat_dim, seq_len, **tcl_hparams)
        self.ac = TCLModel(feat_dim, seq_len, **tcl_hparams)
        self.hparams = {**self.ac.hparams, "lateral_dim": lateral_dim}
        self.feat_dim, self.seq_len = feat_dim, seq_len
        act = self.ac.hparams["activation"]
        d_model = self.ac.hparams["encoder_dims"][-1]
        sites: dict[str, nn.Module] = {}
        for i, (lin, _) in enumerate(_linear_layers(self.ac.encoder)):
            if i > 0:
                sites[f"encoder_{i}"] = Lateral(lin.in_features, lin.out_features, lateral_dim, act)
        for i in range(len(self.ac.blocks)):
            sites[f"block_{i}"] = Lateral(d_model, d_model, lateral_dim, act)
        for i, (lin, _) in enumerate(_linear_layers(self.ac.decoder)):
            sites[f"decoder_{i}"] = Lateral(lin.in_features, lin.out_features, lateral_dim, act)
        self.laterals = nn.ModuleDict(sites)

    def active_parameters(self) -> Iterator[nn.Parameter]:
        """What the continual-learning phase trains: the AC and its laterals (the KB stays frozen)."""
        yield from self.ac.parameters()
        yield from self.laterals.parameters()

    def _mlp_with_laterals(self, stage: str, h: torch.Tensor, h_kb: torch.Tensor):
        ac_layers = _linear_layers(getattr(self.ac, stage))
        kb_layers = _linear_layers(getattr(self.kb, stage))
        for i, ((lin, act), (kb_lin, kb_act)) in enumerate(zip(ac_layers, kb_layers)):
            pre = lin(h)
            if f"{stage}_{i}" in self.laterals:
                pre = pre + self.laterals[f"{stage}_{i}"](h_kb)
            h = act(pre) if act is not None else pre
            h_kb = kb_act(kb_lin(h_kb)) if kb_act is not None else kb_lin(h_kb)
        return h, h_kb

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(batch, seq_len, feat_dim) -> (batch,) AC scores with KB laterals, higher = faster."""
        self._check_input(x)
        h, h_kb = self._mlp_with_laterals("encoder", x, x)
        h, h_kb = self.ac.norm_in(h), self.kb.norm_in(h_kb)
        for i, (block, kb_block) in enumerate(zip(self.ac.blocks, self.kb.blocks)):
            h, h_kb = block(h) + self.laterals[f"block_{i}"](h_kb), kb_block(h_kb)
        h, h_kb = self.ac.norm_out(h), self.kb.norm_out(h_kb)
        rows, _ = self._mlp_with_laterals("decoder", h, h_kb)
        return self.ac.pool_rows(rows.squeeze(-1))
