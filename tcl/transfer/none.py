"""No transfer: the target's model learns from the target's sample alone (the floor transfer must beat)."""

from __future__ import annotations

from ..models import param_count
from .base import SequenceHooks, TransferMethod, TransferResult, register_method
from .data import PlatformData
from .phase import PhaseTensors


@register_method("none")
class NoTransfer(TransferMethod):
    """`settings.model` trained on the target only, with the CL phase's epochs and schedule."""

    def _fit(self, data: PlatformData, order: list[str], hooks: SequenceHooks) -> TransferResult:
        target = order[-1]
        arrays = data.train(target)
        model = self.build(self.settings.model, arrays)
        tensors = PhaseTensors(arrays, self.settings.device)
        model.to(tensors.device)
        record = self.run_phase("train", [target], data, model, model.parameters(),
                                self.ranking_loss(model, tensors), tensors, hooks, {"model": model})
        return TransferResult(model.cpu(), self.settings.model, [record], param_count(model))
