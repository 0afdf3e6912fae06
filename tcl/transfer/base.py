"""The transfer-method interface, its registry by name, and what a sequence reports.

Shaped like tcl.sampling: one small abstract class, one module per method, a
registry (``make_method("ckd", settings, hparams, seed)``). A method walks the
platforms of `order` (sources first, the target last), reading each platform's data
from a :class:`PlatformData`, and returns the deployable target model with one
:class:`PhaseRecord` per training phase. Callers watch it through
:class:`SequenceHooks` (monitoring, MLflow); methods never log or write files.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Iterable, Sequence

import numpy as np
import torch

from ..models import build_model
from ..models.losses import rank_loss
from ..registry import registrar
from .data import PlatformData
from .phase import PhaseTensors, StepHook, train_phase
from .settings import TransferSettings

TRANSFER_METHODS: dict[str, type[TransferMethod]] = {}


@dataclass
class PhaseRecord:
    phase: str                   # "cl" / "kd" (CKD), "train" (plain training), "moses", "mtl"
    platform: str
    seen: list[str]              # platforms of the sequence so far, this one last
    resident: tuple[str, ...]    # whose training data was in memory while the phase ran
    rows: int                    # training rows of the phase
    losses: list[float] = field(default_factory=list)
    metrics: list[dict[str, float]] = field(default_factory=list)  # per epoch, what the hooks measured


@dataclass
class TransferResult:
    model: torch.nn.Module       # the deployable target model
    model_name: str              # its tcl.models name: a bundle rebuilds it by name + hparams
    history: list[PhaseRecord]
    params_total: int            # every parameter the method keeps for the sequence (MTL: all its heads)


class SequenceHooks:
    """Callbacks around a sequence's phases; these do nothing (monitoring and tracking override them)."""

    def phase_start(self, phase: str, platform: str) -> None:
        pass

    def epoch_end(self, record: PhaseRecord, epoch: int, loss: float,
                  models: dict[str, torch.nn.Module]) -> dict[str, float]:
        """Metrics to keep for this epoch of `record` (`models`: what the phase wants watched)."""
        return {}

    def phase_end(self, record: PhaseRecord, snapshot: torch.nn.Module | None) -> None:
        """`snapshot`: a model the phase produced for keeping (CKD: the KB after distillation)."""


class TransferMethod(ABC):
    """Trains through a platform sequence; `fit_sequence` returns the target's deployable model."""

    name: ClassVar[str] = ""

    def __init__(self, settings: TransferSettings, hparams: dict[str, dict[str, Any]] | None = None, seed: int = 0):
        self.settings, self.hparams, self.seed = settings, dict(hparams or {}), int(seed)

    def fit_sequence(self, data: PlatformData, order: Sequence[str] | None = None,
                     hooks: SequenceHooks | None = None) -> TransferResult:
        """Sources then the target (`order`, default `settings.order`); only `data.train(p)` is read."""
        order = list(order or self.settings.order)
        if not order or len(set(order)) != len(order):
            raise ValueError(f"order must name each platform once, the target last; got {order}")
        return self._fit(data, order, hooks or SequenceHooks())

    @abstractmethod
    def _fit(self, data: PlatformData, order: list[str], hooks: SequenceHooks) -> TransferResult:
        """The method's walk over `order` (non-empty, distinct, target last)."""

    def build(self, name: str, arrays: dict[str, np.ndarray], **extra) -> torch.nn.Module:
        """A fresh `name` model for these arrays' shape with the train stage's hparams, seeded."""
        return build_model(name, feat_dim=arrays["x"].shape[2], seq_len=arrays["x"].shape[1], seed=self.seed,
                           **{**self.hparams.get(name, {}), **extra})

    def ranking_loss(self, model: torch.nn.Module, data: PhaseTensors) -> Callable[[torch.Tensor], torch.Tensor]:
        """The batch loss of plain training: LambdaRank of `model`'s scores against the labels, per task."""
        return lambda rows: rank_loss(model(data.x[rows]), data.y[rows], data.g[rows], kind=self.settings.loss)

    def run_phase(self, phase: str, seen: list[str], data: PlatformData,
                  module: torch.nn.Module, parameters: Iterable[torch.nn.Parameter],
                  batch_loss: Callable[[torch.Tensor], torch.Tensor], tensors: PhaseTensors, hooks: SequenceHooks,
                  watch: dict[str, torch.nn.Module], epochs: int | None = None, schedule: str = "cosine",
                  fixed_batches: list[np.ndarray] | None = None, step_hook: StepHook | None = None,
                  snapshot: torch.nn.Module | None = None, resident: tuple[str, ...] | None = None) -> PhaseRecord:
        """One phase on `seen[-1]` between the hooks' start and end calls; `watch` is what monitoring scores.

        `resident`: whose training data the phase holds, when that is more than `data.resident` (MTL).
        """
        record = PhaseRecord(phase, seen[-1], list(seen), resident or data.resident, len(tensors.x))
        hooks.phase_start(phase, seen[-1])

        def on_epoch(epoch: int, loss: float) -> None:
            record.losses.append(loss)
            record.metrics.append(hooks.epoch_end(record, epoch, loss, watch))

        train_phase(module, parameters, batch_loss, tensors,
                    self.settings.cl_epochs if epochs is None else epochs, self.settings, schedule,
                    self.seed + len(seen), fixed_batches, on_epoch, step_hook)
        hooks.phase_end(record, snapshot)
        return record


register_method = registrar(TRANSFER_METHODS, "transfer method")  # class decorator: @register_method("name")


def make_method(name: str, settings: TransferSettings, hparams: dict[str, dict[str, Any]] | None = None,
                seed: int = 0) -> TransferMethod:
    """Instantiate a registered transfer method; unknown names raise ValueError naming the known ones."""
    try:
        cls = TRANSFER_METHODS[name]
    except KeyError:
        raise ValueError(f"unknown transfer method {name!r}; known: {sorted(TRANSFER_METHODS)}") from None
    return cls(settings, hparams, seed)
