"""The training loop shared by every sequence cost model.

LambdaRank compares programs of the same task, so a batch is packed from whole
task groups (shuffled each epoch) rather than from shuffled rows. Adam with a
cosine schedule, as in the TLP/TCL papers; deterministic under a seed. With a
checkpoint path, a killed training resumes after its last finished epoch and ends
with the weights of an uninterrupted run (tcl.train.checkpoint).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
from tqdm.auto import tqdm

from ..config import check_keys
from ..models.losses import KINDS as LOSSES, rank_loss
from .checkpoint import Checkpoint, TrainState, fingerprint

# Training loops show a bar (a line per epoch in a log) once they have run this long: short fits,
# such as the sampling rounds' retraining, stay quiet.
PROGRESS_AFTER_S = 10.0


@dataclass
class TrainConfig:
    epochs: int = 30
    lr: float = 7e-4
    batch_size: int = 1024
    loss: str = "lambdarank"  # or "mse"
    weight_decay: float = 0.0
    seed: int = 0
    threads: int = 1  # torch intra-op threads (params train.threads)
    device: str = "cpu"  # "cuda" on a GPU machine (the data is small: it is moved there whole)

    @classmethod
    def from_params(cls, params: dict[str, Any], model: str | None = None, **overrides: Any) -> "TrainConfig":
        """The optimizer settings of params.yaml's `train:` section (and the top-level `seed`), then
        `train.optimizer_by_model.<model>` (one model's recipe, e.g. tcl_stores' searched lr and batch), then
        any non-None keyword: the train stage, the sampler's f and the benchmarks train alike. An unknown key
        in the section fails here, naming it, before any training starts."""
        cfg = dict(params.get("train") or {})
        optimizer = ("epochs", "lr", "batch_size", "loss", "weight_decay", "threads")
        check_keys(cfg, (*optimizer, *TRAIN_SECTION_KEYS), "train")
        by_model = cfg.get("optimizer_by_model") or {}
        for name, recipe in by_model.items():
            check_keys(recipe or {}, optimizer, f"train.optimizer_by_model.{name}")
        values = {k: cfg[k] for k in optimizer if cfg.get(k) is not None}
        values.update({k: v for k, v in (by_model.get(model) or {}).items() if v is not None})
        values["seed"] = params.get("seed", 0)
        values.update({k: v for k, v in overrides.items() if v is not None})
        out = cls(**values)
        casts = {"epochs": int, "lr": float, "batch_size": int, "loss": str, "weight_decay": float, "seed": int,
                 "threads": int, "device": str}
        for name, cast in casts.items():
            setattr(out, name, cast(getattr(out, name)))
        if out.loss not in LOSSES:
            raise ValueError(f"params.yaml train.loss={out.loss!r}: choose one of {list(LOSSES)}")
        return out


def model_hparams(params: dict[str, Any], model: str, model_class: str | None = None) -> dict[str, Any]:
    """`train.hparams.<model>`: the model constructor's arguments, the other half of a model's recipe (its
    optimizer settings are `TrainConfig.from_params(params, model)`); for a registered variant of a model class
    without its own (`tcl_stores_joint` of `tcl_stores`), the class's; empty when params.yaml names none."""
    section = (params.get("train") or {}).get("hparams") or {}
    return dict(section.get(model) or (section.get(model_class) if model_class else None) or {})


# The train section's keys that are not optimizer settings (read by the train stage and tcl.train.evaluate).
TRAIN_SECTION_KEYS = ("platforms", "models", "joint_models", "checkpoint_dir", "eval", "hparams",
                      "optimizer_by_model")


@dataclass
class History:
    train_loss: list[float] = field(default_factory=list)  # every epoch's, resumed ones included
    start_epoch: int = 0  # the first epoch this call trained: > 0 when it resumed from a checkpoint


def group_batches(groups: np.ndarray, batch_size: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Row indices packed into batches of whole groups (a group larger than a batch is its own batch)."""
    order = rng.permutation(np.unique(groups))
    rows_of = {g: np.flatnonzero(groups == g) for g in order}
    batches, current, size = [], [], 0
    for g in order:
        rows = rows_of[g]
        if current and size + len(rows) > batch_size:
            batches.append(np.concatenate(current))
            current, size = [], 0
        current.append(rows)
        size += len(rows)
    if current:
        batches.append(np.concatenate(current))
    return batches


def fit(model: torch.nn.Module, x: np.ndarray, labels: np.ndarray, groups: np.ndarray, cfg: TrainConfig,
        on_epoch: Callable[[int, float], None] | None = None, extra_loss: Callable[[], torch.Tensor] | None = None,
        checkpoint: str | Path | None = None) -> History:
    """Train `model` in place; `on_epoch(epoch, mean_loss)` is called after each epoch.

    With `checkpoint`, the training state is saved there after every epoch, and a checkpoint
    of this same training found there is resumed from its next epoch.
    """
    torch.manual_seed(cfg.seed)
    torch.set_num_threads(cfg.threads)
    dev = torch.device(cfg.device)
    ckpt = Checkpoint(checkpoint, fingerprint(model, cfg, x, labels, groups)) if checkpoint else None
    model.to(dev)
    xt = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)).to(dev)
    yt = torch.from_numpy(np.asarray(labels, dtype=np.float32)).to(dev)
    gt = torch.from_numpy(np.asarray(groups, dtype=np.int64)).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    state = TrainState(model, opt, torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(cfg.epochs, 1)),
                       np.random.default_rng(cfg.seed), dev)
    resumed = ckpt.restore(state) if ckpt else []
    history = History(train_loss=resumed, start_epoch=len(resumed))
    bar = tqdm(range(history.start_epoch, cfg.epochs), desc="train", unit="epoch", initial=history.start_epoch,
               total=cfg.epochs, delay=PROGRESS_AFTER_S, leave=False)
    for epoch in bar:
        model.train()  # on_epoch may have evaluated it
        losses = []
        for idx in group_batches(np.asarray(groups), cfg.batch_size, state.rng):
            ii = torch.from_numpy(idx).to(dev)
            loss = rank_loss(model(xt[ii]), yt[ii], gt[ii], kind=cfg.loss)
            if extra_loss is not None:
                loss = loss + extra_loss()
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
        state.scheduler.step()
        mean = float(np.mean(losses)) if losses else float("nan")
        history.train_loss.append(mean)
        bar.set_postfix(loss=f"{mean:.4f}", refresh=False)  # refresh=True would show it before the delay
        if on_epoch is not None:
            on_epoch(epoch, mean)
        if ckpt is not None:
            ckpt.save(state, history.train_loss)
    model.eval()
    return history
