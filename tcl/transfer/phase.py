"""One training phase on one platform's arrays: whole-task batches, Adam, a per-epoch LR schedule.

`tcl.train.loop.fit` trains one model on one fixed loss under one cosine schedule; a
transfer phase needs its own loss per batch (KD's three terms, MTL's heads), its own
schedule (CL: cosine restarted every `cl_period` epochs; KD: step decay) and a hook
after each optimizer step (Moses), so it has this loop. Batches come from
`group_batches` (whole tasks, reshuffled each epoch) unless the phase fixes them
(KD: Phi_j belongs to a batch).
"""

from __future__ import annotations

from typing import Callable, Iterable, Protocol

import numpy as np
import torch
from tqdm.auto import tqdm

from ..train.loop import PROGRESS_AFTER_S, group_batches
from .settings import TransferSettings

SCHEDULES = ("cosine", "step")


class StepHook(Protocol):
    """What a phase may do around the optimizer (Moses: re-score weights, decay the rest)."""

    def epoch_start(self, epoch: int) -> None: ...

    def after_step(self, lr: float) -> None: ...


class PhaseTensors:
    """A platform's arrays as tensors on the training device (x, y, g), plus the numpy groups."""

    def __init__(self, arrays: dict[str, np.ndarray], device: str):
        dev = torch.device(device)
        self.x = torch.from_numpy(np.ascontiguousarray(arrays["x"], dtype=np.float32)).to(dev)
        self.y = torch.from_numpy(np.asarray(arrays["label"], dtype=np.float32)).to(dev)
        self.g = torch.from_numpy(np.asarray(arrays["group"], dtype=np.int64)).to(dev)
        self.groups = np.asarray(arrays["group"])
        self.device = dev

    def index(self, rows: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(rows).to(self.device)


def make_scheduler(opt: torch.optim.Optimizer, schedule: str, settings: TransferSettings):
    """CL: cosine annealing restarted every `cl_period` epochs; KD: x`kd_gamma` every `kd_step` epochs."""
    if schedule == "cosine":
        return torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=max(settings.cl_period, 1))
    if schedule == "step":
        return torch.optim.lr_scheduler.StepLR(opt, step_size=max(settings.kd_step, 1), gamma=settings.kd_gamma)
    raise ValueError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")


def train_phase(module: torch.nn.Module, parameters: Iterable[torch.nn.Parameter],
                batch_loss: Callable[[torch.Tensor], torch.Tensor], data: PhaseTensors, epochs: int,
                settings: TransferSettings, schedule: str, seed: int,
                fixed_batches: list[np.ndarray] | None = None,
                on_epoch: Callable[[int, float], None] | None = None,
                hook: StepHook | None = None) -> list[float]:
    """Train `parameters` for `epochs` on `batch_loss(row indices)`; returns each epoch's mean loss.

    `fixed_batches` keeps the batches' composition (only their order is reshuffled).
    """
    torch.manual_seed(seed)
    torch.set_num_threads(settings.threads)
    params = [p for p in parameters if p.requires_grad]
    if not params:
        raise ValueError("train_phase got no trainable parameters (all are frozen)")
    opt = torch.optim.Adam(params, lr=settings.lr)
    scheduler = make_scheduler(opt, schedule, settings)
    rng = np.random.default_rng(seed)
    losses = []
    bar = tqdm(range(epochs), desc=f"transfer ({schedule})", unit="epoch", delay=PROGRESS_AFTER_S, leave=False)
    for epoch in bar:
        module.train()  # on_epoch may have evaluated it
        if hook is not None:
            hook.epoch_start(epoch)
        batches = ([fixed_batches[i] for i in rng.permutation(len(fixed_batches))] if fixed_batches is not None
                   else group_batches(data.groups, settings.batch_size, rng))
        epoch_losses = []
        for rows in batches:
            loss = batch_loss(data.index(rows))
            opt.zero_grad()
            loss.backward()
            opt.step()
            if hook is not None:
                hook.after_step(opt.param_groups[0]["lr"])
            epoch_losses.append(float(loss.detach()))
        scheduler.step()
        losses.append(float(np.mean(epoch_losses)))
        bar.set_postfix(loss=f"{losses[-1]:.4f}", refresh=False)
        if on_epoch is not None:
            on_epoch(epoch, losses[-1])
    module.eval()
    return losses
