"""Plain online fine-tuning: each task's copy of the pretrained model keeps training on its programs."""

from __future__ import annotations

import numpy as np

from .base import register_adapter
from .gradient import GradientAdapter


@register_adapter("ft")
class FineTuneAdapter(GradientAdapter):
    def adapt(self, task: str, x: np.ndarray, labels: np.ndarray) -> None:
        self.train_steps(self.task_model(task), x, labels)
