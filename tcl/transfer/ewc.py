"""Elastic weight consolidation (Kirkpatrick et al. 2017), the third term of TCL eq. 9.

lambda/2 * sum_k F_k (theta_k - theta*_k)^2, with theta* the KB before this platform's
distillation and F its diagonal Fisher information.

Choices the paper leaves open: F is the empirical Fisher of the ranking loss on the
platform the KB has just absorbed, estimated while that platform's data is still the
one loaded (right after its KD phase). A LambdaRank sample is a query, i.e. one task
group, so F_k is the mean over task groups of (dL_group/dtheta_k)^2, each group's
loss with the per-group ("mean") reduction so large tasks do not dominate.
"""

from __future__ import annotations

import numpy as np
import torch

from ..models.losses import rank_loss
from .phase import PhaseTensors


def fisher_diagonal(model: torch.nn.Module, data: PhaseTensors, kind: str = "lambdarank") -> dict[str, torch.Tensor]:
    """Mean over task groups of the squared gradient of each group's ranking loss, per parameter."""
    params = {n: p for n, p in model.named_parameters()}
    fisher = {n: torch.zeros_like(p) for n, p in params.items()}
    was_training = model.training
    model.eval()
    groups = np.unique(data.groups)
    for g in groups:
        rows = data.index(np.flatnonzero(data.groups == g))
        grads = torch.autograd.grad(rank_loss(model(data.x[rows]), data.y[rows], data.g[rows], kind=kind,
                                              reduction="mean"),
                                    list(params.values()), allow_unused=True)
        for (n, _), grad in zip(params.items(), grads):
            if grad is not None:
                fisher[n] += grad.detach() ** 2
    model.train(was_training)
    return {n: f / max(len(groups), 1) for n, f in fisher.items()}


class EWCPenalty:
    """lambda/2 * sum F (theta - theta*)^2 for `model`, anchored at its weights when built."""

    def __init__(self, model: torch.nn.Module, fisher: dict[str, torch.Tensor], lam: float):
        self.model, self.fisher, self.lam = model, fisher, float(lam)
        self.anchor = {n: p.detach().clone() for n, p in model.named_parameters()}

    def __call__(self) -> torch.Tensor:
        total = sum(((p - self.anchor[n]) ** 2 * self.fisher[n]).sum()
                    for n, p in self.model.named_parameters())
        return 0.5 * self.lam * total
