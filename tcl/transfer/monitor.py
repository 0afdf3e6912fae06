"""Top-1 on every platform seen so far, after every epoch: the forgetting picture (TCL Fig. 8).

Scores each model a phase asks to watch (CKD: the AC with its laterals, and the KB
alone) on each seen platform's held-out split (a platform whose split is empty has no curve). The held-out arrays are read once per
platform and kept here; they are scored, never trained on.
"""

from __future__ import annotations

import numpy as np
import torch

from ..train.evaluate import ranking_metrics
from ..models.base import predict
from .base import PhaseRecord, SequenceHooks
from .data import PlatformData


def metric_key(model: str, platform: str) -> str:
    """e.g. "ac_top1.zen4-avx2-1c" (an MLflow metric name)."""
    return f"{model}_top1.{platform}"


class Monitor(SequenceHooks):
    """Held-out top-1 (TCL eq. 12) of the watched models on every seen platform, each epoch."""

    def __init__(self, data: PlatformData):
        self.data = data
        self.held_out: dict[str, dict[str, np.ndarray]] = {}

    def _held_out(self, platform: str) -> dict[str, np.ndarray]:
        if platform not in self.held_out:
            self.held_out[platform] = self.data.evaluation(platform)
        return self.held_out[platform]

    def epoch_end(self, record: PhaseRecord, epoch: int, loss: float,
                  models: dict[str, torch.nn.Module]) -> dict[str, float]:
        out = {}
        for platform in record.seen:
            split = self._held_out(platform)
            if len(split["label"]) == 0:  # no held-out task on it (the split by task left it none): no curve
                continue
            for name, model in models.items():
                scores = predict(model, split["x"])
                out[metric_key(name, platform)] = ranking_metrics(split, scores, ks=(1,))["top1_ratio_of_sums"]
        return out
