"""Per-epoch training checkpoints, so a killed training resumes where it stopped.

A checkpoint holds everything the next epoch depends on: the weights, the optimizer
and LR-scheduler state, the numpy Generator that shuffles the task groups, torch's
RNG, the epochs done and their losses. Resuming from it gives the weights an
uninterrupted run would have, bit for bit.

It also holds a fingerprint of what is trained: the TrainConfig, the model (its
structure and initial weights, so its name, hparams and seed) and the training
arrays. A checkpoint of other data or settings is never resumed: it is ignored
with a warning and overwritten. Files are written with the project's atomic
writer, so a kill mid-save leaves the previous epoch's checkpoint intact.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import pickle
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..data.store import atomic_write_bytes

log = logging.getLogger(__name__)


def fingerprint(model: torch.nn.Module, cfg: Any, *arrays: np.ndarray) -> str:
    """What a checkpoint must match to be resumed: config, model as built, training arrays."""
    h = hashlib.sha256(json.dumps(asdict(cfg), sort_keys=True).encode())
    h.update(repr(model).encode())
    for name, tensor in model.state_dict().items():
        h.update(name.encode())
        h.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(f"{a.dtype}{a.shape}".encode())
        h.update(memoryview(a).cast("B"))
    return h.hexdigest()


@dataclass
class TrainState:
    """The objects a training epoch advances (what a checkpoint saves and restores)."""

    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    rng: np.random.Generator
    device: torch.device


class Checkpoint:
    """One training's checkpoint file, valid only for the training whose fingerprint it holds."""

    def __init__(self, path: str | Path, fingerprint: str):
        self.path, self.fingerprint = Path(path), fingerprint

    def save(self, state: TrainState, losses: list[float]) -> None:
        """After an epoch: the state the next epoch starts from."""
        blob = {"fingerprint": self.fingerprint, "epochs_done": len(losses), "train_loss": list(losses),
                "model": state.model.state_dict(), "optimizer": state.optimizer.state_dict(),
                "scheduler": state.scheduler.state_dict(), "numpy_rng": state.rng.bit_generator.state,
                "torch_rng": torch.get_rng_state()}
        if state.device.type == "cuda":
            blob["cuda_rng"] = torch.cuda.get_rng_state(state.device)
        buf = io.BytesIO()
        torch.save(blob, buf)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(self.path, buf.getvalue())

    def restore(self, state: TrainState) -> list[float]:
        """Load a matching checkpoint into `state`; returns the losses of the epochs it holds
        ([] when there is none to resume: absent, unreadable or of another training)."""
        blob = self._load()
        if blob is None:
            return []
        state.model.load_state_dict(blob["model"])
        state.optimizer.load_state_dict(blob["optimizer"])
        state.scheduler.load_state_dict(blob["scheduler"])
        state.rng.bit_generator.state = blob["numpy_rng"]
        torch.set_rng_state(blob["torch_rng"])
        if state.device.type == "cuda":
            torch.cuda.set_rng_state(blob["cuda_rng"], state.device)
        log.info("%s: resuming after epoch %d", self.path, blob["epochs_done"])
        return list(blob["train_loss"])

    def _load(self) -> dict[str, Any] | None:
        if not self.path.exists():
            return None
        try:
            blob = torch.load(self.path, map_location="cpu", weights_only=True)
        except (RuntimeError, EOFError, pickle.UnpicklingError) as e:
            log.warning("%s: unreadable checkpoint (%s); training starts over and overwrites it", self.path, e)
            return None
        if not isinstance(blob, dict) or blob.get("fingerprint") != self.fingerprint:
            log.warning("%s: checkpoint of other data or settings; ignored, training starts over and "
                        "overwrites it", self.path)
            return None
        return blob
