"""Fine-tuning: one model trained on each platform in turn, sources first, the target last.

With several sources this is a fine-tuning chain: each platform starts from the
weights the previous one left (TCL Table 6's fine-tuning uses one source; a longer
order gives it the same sources CKD sees). Each platform gets the CL phase's epochs
and schedule and a fresh optimizer.
"""

from __future__ import annotations

import torch

from ..models import param_count
from .base import PhaseRecord, SequenceHooks, TransferMethod, TransferResult, register_method
from .data import PlatformData
from .phase import PhaseTensors


@register_method("finetune")
class FineTune(TransferMethod):
    """Plain training on every platform of the order, carrying the weights over."""

    def _fit(self, data: PlatformData, order: list[str], hooks: SequenceHooks) -> TransferResult:
        model, history = None, []
        for i, platform in enumerate(order):
            arrays = data.train(platform)
            if model is None:
                model = self.build(self.settings.model, arrays)
            tensors = PhaseTensors(arrays, self.settings.device)
            model.to(tensors.device)
            history.append(self.train_platform(model, i, order[:i + 1], data, tensors, hooks))
        return TransferResult(model.cpu(), self.settings.model, history, param_count(model))

    def train_platform(self, model: torch.nn.Module, position: int, seen: list[str], data: PlatformData,
                       tensors: PhaseTensors, hooks: SequenceHooks) -> PhaseRecord:
        """One platform's training (`position` in the order); Moses changes it after the first."""
        return self.run_phase("train", seen, data, model, model.parameters(),
                              self.ranking_loss(model, tensors), tensors, hooks, {"model": model})
