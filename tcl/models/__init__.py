"""Cost models by name: TCL's Mamba model and the TLP / Tenset-MLP baselines.

All take float32 features and return one score per program, higher = faster:
"tcl" and "tlp" read (batch, seq_len, feat_dim) schedule-primitive sequences, "mlp" a
flat (batch, feat_dim) vector (or the flattened sequence when built with seq_len > 1),
"tenset_mlp" TVM's PerStoreFeature as (batch, stores, 164) with zero-row padding, and so do
"tcl_stores" (TCL's Mamba model over those rows) and
"xgb", Tenset's pretrained XGBoost (trees, trained by `fit_ranker` rather than gradients).
"pacm" Pruner's pattern-aware model reads PerStoreFeature plus dataflow blocks, packed.
"ckd_ac" is CKD's deployable pair: the active column with its knowledge-base laterals.

Each model module registers its class by name (tcl.models.base.register_model); importing
it here is what makes the name known. A new model: one module and one import line below.
"""

from __future__ import annotations

from tcl.models.base import MODELS, CostModel, build_model, param_count, register_model, size_on_disk
from tcl.models.ckd_model import CKDModel
from tcl.models.mlp_model import MLPModel
from tcl.models.pacm_model import PaCM
from tcl.models.tcl_model import TCLModel
from tcl.models.tcl_stores import TCLStores
from tcl.models.tenset_mlp import TensetMLP
from tcl.models.tlp_model import TLPModel
from tcl.models.xgb_model import XGBPerStore

__all__ = ["MODELS", "CostModel", "build_model", "register_model", "TCLModel", "TLPModel", "MLPModel",
           "CKDModel", "PaCM", "TCLStores", "TensetMLP", "XGBPerStore", "param_count", "size_on_disk"]
