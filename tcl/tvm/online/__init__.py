"""How a learned cost model keeps learning while MetaSchedule tunes a network, by name.

``make_adapter("moa", bundle, settings)``: "frozen" (the pretrained model as it is), "ft"
(plain fine-tuning of a per-task copy), "moa" (MoA-Pruner's momentum online adaptation
through a Siamese copy), "boost" (XGBoost trees grown on the measurements, per task or over
every task of the run, on top of the pretrained scores of a PerStoreFeature model, as TVM's
xgb learns from scratch).
"""

from __future__ import annotations

from .base import ADAPTERS, OnlineAdapter, OnlineSettings, make_adapter, register_adapter
from .boost import BoostAdapter
from .finetune import FineTuneAdapter
from .frozen import FrozenAdapter
from .moa import MoAAdapter

__all__ = ["ADAPTERS", "OnlineAdapter", "OnlineSettings", "make_adapter", "register_adapter",
           "BoostAdapter", "FineTuneAdapter", "FrozenAdapter", "MoAAdapter"]
