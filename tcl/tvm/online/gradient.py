"""Shared by the adapters that train a neural model: a copy per task, trained on the task's programs."""

from __future__ import annotations

import copy

import numpy as np
import torch

from ...models.losses import rank_loss
from ...models.base import predict
from .base import OnlineAdapter


class GradientAdapter(OnlineAdapter):
    """Per-task copies of the bundle's network; tasks without measurements use the pretrained one."""

    def check(self, bundle) -> None:
        if not getattr(bundle.model, "trains_by_gradient", True):
            raise ValueError(f"online adaptation '{self.name}' trains by gradient; the {bundle.model_name} "
                             "model does not (pretrained XGB adapts with 'boost')")

    def __init__(self, bundle, settings=None, prior=None):
        super().__init__(bundle, settings, prior)
        self.models: dict[str, torch.nn.Module] = {}

    def score(self, task: str, x: np.ndarray) -> np.ndarray:
        return predict(self.models.get(task, self.bundle.model), x)

    def train_steps(self, model: torch.nn.Module, x: np.ndarray, labels: np.ndarray) -> None:
        """`settings.steps` Adam steps of LambdaRank over all of the task's programs (one group)."""
        xt, yt = torch.from_numpy(x), torch.from_numpy(labels)
        groups = torch.zeros(len(yt), dtype=torch.int64)
        opt = torch.optim.Adam(model.parameters(), lr=self.settings.lr)
        model.train()
        for _ in range(self.settings.steps):
            loss = rank_loss(model(xt), yt, groups)
            opt.zero_grad()
            loss.backward()
            opt.step()
        model.eval()

    def task_model(self, task: str) -> torch.nn.Module:
        if task not in self.models:
            self.models[task] = copy.deepcopy(self.bundle.model)
        return self.models[task]
