"""TCL's Mamba model over TVM's per-store rows instead of schedule-primitive tokens.

The same encoder -> Mamba -> decoder -> sum as `tcl` (tcl_model.py), reading one row per
BufferStore (TVM's PerStoreFeature, 164 wide, the input of Tenset-MLP and pretrained XGB):
the learning curves (reports/learning_curve/) put the token models well below the models
on these rows at every data size, so this separates what the input decides from what the
sequence model adds. Stores come in program order, so the scan sees the loop nest's
producer-consumer order that Tenset-MLP's sum over stores discards.

Rows that are entirely zero are padding (see tenset_mlp.py): their row scores are masked
out of the sum, so a program's score does not depend on the batch's longest program.
"""

from __future__ import annotations

import torch

from tcl.features.kinds import PER_STORE
from tcl.models.base import register_model
from tcl.models.tcl_model import TCLModel
from tcl.models.tenset_mlp import PER_STORE_DIM


@register_model("tcl_stores")
class TCLStores(TCLModel):
    """TCLModel on (batch, stores, 164) PerStoreFeature rows, padding rows masked."""

    input_kind = PER_STORE

    def __init__(self, feat_dim: int = PER_STORE_DIM, seq_len: int | None = None, **kwargs):
        super().__init__(feat_dim, seq_len, **kwargs)

    def row_scores(self, x: torch.Tensor) -> torch.Tensor:
        """Per-store contributions (batch, stores); zero for padding rows."""
        mask = (x != 0).any(dim=-1).to(x.dtype)
        return super().row_scores(x) * mask
