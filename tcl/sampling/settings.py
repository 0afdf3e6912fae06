"""The `sampling:` block of params.yaml as objects: which sampler, how many rounds, which model f."""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any

from ..train.loop import TrainConfig
from .base import SAMPLERS, Sampler, make_sampler


@dataclass
class SamplingSettings:
    strategy: str = "rdu"
    rate: float = 0.10
    rounds: int = 4
    first_batch: float = 0.2
    model: str = "tlp"
    epochs: int = 30
    ensemble: int = 1  # > 1: f is an ensemble (ALT reads its disagreement)
    strategies: dict[str, dict[str, Any]] = field(default_factory=dict)  # per-strategy constructor arguments
    device: str = "cpu"  # where f trains ("cuda" on a GPU machine)

    @classmethod
    def from_params(cls, params: dict[str, Any], **overrides) -> SamplingSettings:
        cfg = {k: v for k, v in (params.get("sampling") or {}).items() if k in cls.__dataclass_fields__}
        cfg.update({k: v for k, v in overrides.items() if v is not None})
        out = cls(**cfg)
        if out.strategy not in SAMPLERS:
            raise ValueError(f"sampling.strategy={out.strategy!r} is not a sampler; known: {sorted(SAMPLERS)}")
        return out

    def sampler(self, seed: int) -> Sampler:
        """The configured strategy; `seed` reaches it when its constructor takes one."""
        kwargs = dict(self.strategies.get(self.strategy) or {})
        if "seed" in inspect.signature(SAMPLERS[self.strategy]).parameters:
            kwargs["seed"] = seed
        return make_sampler(self.strategy, **kwargs)

    def train_config(self, params: dict[str, Any], seed: int) -> TrainConfig:
        """The train stage's optimizer settings with this block's epochs: f is the same kind of model."""
        t = params.get("train") or {}
        return TrainConfig(epochs=int(self.epochs), lr=float(t.get("lr", 7e-4)),
                           batch_size=int(t.get("batch_size", 1024)), loss=t.get("loss", "lambdarank"),
                           seed=seed, threads=int(t.get("threads", 1)), device=self.device)

    def hparams(self, params: dict[str, Any]) -> dict[str, Any]:
        return dict(((params.get("train") or {}).get("hparams") or {}).get(self.model) or {})
