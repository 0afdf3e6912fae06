"""Cost models by name: TCL's Mamba model and the TLP / Tenset-MLP baselines.

All take float32 features and return one score per program, higher = faster:
"tcl" and "tlp" read (batch, seq_len, feat_dim) schedule-primitive sequences, "mlp" a
flat (batch, feat_dim) vector (or the flattened sequence when built with seq_len > 1),
"tenset_mlp" TVM's PerStoreFeature as (batch, stores, 164) with zero-row padding, and so does
"xgb", Tenset's pretrained XGBoost (trees, trained by `fit_ranker` rather than gradients).
"ckd_ac" is CKD's deployable pair: the active column with its knowledge-base laterals.
"""

from __future__ import annotations

import torch
import torch.nn as nn

from tcl.models.ckd_model import CKDModel
from tcl.models.mlp_model import MLPModel
from tcl.models.tcl_model import TCLModel, param_count, size_on_disk
from tcl.models.tenset_mlp import TensetMLP
from tcl.models.tlp_model import TLPModel
from tcl.models.xgb_model import XGBPerStore

MODELS: dict[str, type[nn.Module]] = {"tcl": TCLModel, "tlp": TLPModel, "mlp": MLPModel,
                                     "tenset_mlp": TensetMLP, "ckd_ac": CKDModel, "xgb": XGBPerStore}


def build_model(name: str, feat_dim: int, seq_len: int | None, seed: int | None = None, **hparams) -> nn.Module:
    """Instantiate a registered cost model; unknown hyperparameters raise TypeError.

    With `seed`, the initial weights depend on it alone, not on what the process drew
    from torch's generator before (a rerun in one process must train the same model).
    """
    try:
        cls = MODELS[name]
    except KeyError:
        raise ValueError(f"unknown model {name!r}; choose one of {sorted(MODELS)}") from None
    if seed is None:
        return cls(feat_dim=feat_dim, seq_len=seq_len, **hparams)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return cls(feat_dim=feat_dim, seq_len=seq_len, **hparams)


__all__ = ["MODELS", "build_model", "TCLModel", "TLPModel", "MLPModel", "CKDModel",
           "TensetMLP", "XGBPerStore", "param_count", "size_on_disk"]
