"""Moses (Zhao et al.): lottery-ticket transfer of a cost model to a new device (§3.3, eq. 4).

Each phase every weight is scored by |w * dL/dw|. The top `moses_keep` (half) of each
weight tensor is transferable and learns by gradient descent; the rest is domain-
variant: it receives no gradient update and decays toward zero, w <- w - lr *
moses_decay * w after every optimizer step (eq. 4). The variant weights are written
back after each step, so not even Adam's momentum moves them.

Choices the paper leaves open here: a phase is one epoch on the new platform (Moses
redraws the boundary every online training epoch); the score's gradient is summed
over one pass of the platform's batches before the epoch trains; the split is per
tensor, so a layer whose weights are small in scale is not frozen whole. The first
platform of the order is plain pretraining (Moses' step 1) and every later platform
a transfer, so with the same order Moses differs from fine-tuning only in the update
rule. Moses' adaptive controller (§3.4) decides when to stop measuring during online
tuning; offline, on a fixed sample, it has nothing to decide.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
import torch

from ..train.loop import group_batches
from .base import PhaseRecord, SequenceHooks, register_method
from .data import PlatformData
from .finetune import FineTune
from .phase import PhaseTensors


class LotterySplit:
    """Per-epoch transferable masks (`masks`: True = gradient updates) and eq. 4's decay of the rest."""

    def __init__(self, model: torch.nn.Module, batch_loss: Callable[[torch.Tensor], torch.Tensor],
                 batches: list[torch.Tensor], keep: float, decay: float):
        self.model, self.batch_loss, self.batches = model, batch_loss, batches
        self.keep, self.decay = keep, decay
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.masks: list[torch.Tensor] = []
        self._variant: list[torch.Tensor] = []  # each tensor as the last step left it

    def epoch_start(self, epoch: int) -> None:
        """Score every weight by |w * dL/dw| over the platform's batches; keep the top share of each tensor."""
        self.model.zero_grad()
        for rows in self.batches:
            self.batch_loss(rows).backward()
        self.masks = []
        for p in self.params:
            score = (p.detach() * (p.grad if p.grad is not None else torch.zeros_like(p))).abs().reshape(-1)
            mask = torch.zeros_like(score, dtype=torch.bool)
            mask[torch.topk(score, math.ceil(self.keep * score.numel())).indices] = True
            self.masks.append(mask.reshape(p.shape))
        self.model.zero_grad()
        self._variant = [p.detach().clone() for p in self.params]

    @torch.no_grad()
    def after_step(self, lr: float) -> None:
        """Undo the optimizer on the variant weights and decay them: w <- w - lr * decay * w."""
        for p, mask, before in zip(self.params, self.masks, self._variant):
            p.copy_(torch.where(mask, p, before * (1.0 - lr * self.decay)))
            before.copy_(p)


@register_method("moses")
class Moses(FineTune):
    """Fine-tuning's walk over the order, with Moses' update rule on every platform after the first."""

    def train_platform(self, model: torch.nn.Module, position: int, seen: list[str], data: PlatformData,
                       tensors: PhaseTensors, hooks: SequenceHooks) -> PhaseRecord:
        if position == 0:
            return super().train_platform(model, position, seen, data, tensors, hooks)
        loss = self.ranking_loss(model, tensors)
        scoring = [tensors.index(b) for b in group_batches(tensors.groups, self.settings.batch_size,
                                                           np.random.default_rng(self.seed))]
        split = LotterySplit(model, loss, scoring, self.settings.moses_keep, self.settings.moses_decay)
        return self.run_phase("moses", seen, data, model, model.parameters(), loss, tensors,
                              hooks, {"model": model}, step_hook=split)
