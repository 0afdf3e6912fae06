"""MoA-Pruner's momentum online adaptation (Pruner paper §4.3), per task.

Reading of the paper: the cross-platform pretrained model is a Siamese model. At every
online update the target model starts from the Siamese weights and is fine-tuned on the
measured programs; then the Siamese weights follow the target by momentum,
phi_s <- m * phi_s + (1 - m) * phi_t with m = 0.99 (the reference code does this every
few updates: `period`). The target scores the candidates.

Choices the paper leaves open, for MetaSchedule's task-by-task tuning: each task has its
own target, trained on that task's programs only (LambdaRank within the task), so one
task's update never changes another task's scores directly; the Siamese model is shared
by all tasks of the run, so what the platform teaches it accumulates slowly (1% a step)
and reaches the next task's initialization, without early, biased data taking over.
"""

from __future__ import annotations

import copy

import numpy as np
import torch

from .base import register_adapter
from .gradient import GradientAdapter


@register_adapter("moa")
class MoAAdapter(GradientAdapter):
    def __init__(self, bundle, settings=None, prior=None):
        super().__init__(bundle, settings, prior)
        self.siamese = copy.deepcopy(bundle.model)

    def adapt(self, task: str, x: np.ndarray, labels: np.ndarray) -> None:
        target = self.task_model(task)
        target.load_state_dict(self.siamese.state_dict())
        self.train_steps(target, x, labels)
        if (self.updates.get(task, 0) + 1) % max(1, self.settings.period) == 0:
            self.momentum_update(target)

    @torch.no_grad()
    def momentum_update(self, target: torch.nn.Module) -> None:
        m = float(self.settings.momentum)
        for s, t in zip(self.siamese.state_dict().values(), target.state_dict().values()):
            if s.is_floating_point():
                s.mul_(m).add_(t, alpha=1.0 - m)
