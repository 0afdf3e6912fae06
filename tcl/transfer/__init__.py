"""Cross-platform transfer of cost models, by name.

``make_method("ckd", settings, hparams, seed)`` (TCL's continual knowledge
distillation), ``"finetune"``, ``"mtl"`` (MTL-TLP), ``"moses"``, ``"none"`` (the
target's sample alone). Every method's ``fit_sequence(data, order)`` walks the
platforms (sources first, the target last) through a :class:`PlatformData` and
returns the target's deployable model with one record per training phase;
``run_tracked`` runs one as MLflow runs and registers its models.
"""

from __future__ import annotations

from . import ckd, finetune, moses, mtl, none  # noqa: F401  (each registers its method)
from .base import (TRANSFER_METHODS, PhaseRecord, SequenceHooks, TransferMethod, TransferResult, make_method,
                   register_method)
from .data import PlatformData
from .monitor import Monitor
from .settings import TransferSettings

__all__ = ["TRANSFER_METHODS", "PhaseRecord", "SequenceHooks", "TransferMethod", "TransferResult", "make_method",
           "register_method", "PlatformData", "Monitor", "TransferSettings"]
