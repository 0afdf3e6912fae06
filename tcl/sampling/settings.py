"""The `sampling:` block of params.yaml as objects: which sampler, how many rounds, which model f."""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any

from ..config import settings_from
from ..train.loop import TrainConfig, model_hparams
from .base import SAMPLERS, Sampler, make_sampler


MODES = ("offline", "active")  # "all" (no sampling) is what a platform outside sampling.platforms gets


@dataclass
class SamplingSettings:
    platforms: list[str] = field(default_factory=list)  # trained on a sample; the other platforms on all
    mode: str = "offline"  # offline: pick from the measured pool | active: measure only the picks
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
        """The `sampling:` block, overridden by any non-None keyword; unknown keys raise naming them."""
        cfg = dict(params.get("sampling") or {})
        cfg.update({k: v for k, v in overrides.items() if v is not None})
        cfg["platforms"] = list(cfg.get("platforms") or [])
        out = settings_from(cls, cfg, "sampling")
        if out.strategy not in SAMPLERS:
            raise ValueError(f"sampling.strategy={out.strategy!r} is not a sampler; known: {sorted(SAMPLERS)}")
        if out.mode not in MODES:
            raise ValueError(f"sampling.mode={out.mode!r}: choose one of {list(MODES)}")
        return out

    def mode_for(self, platform: str) -> str:
        """How `platform` gets its training programs: `mode` when it is one of `platforms`, else all of them."""
        return self.mode if platform in self.platforms else "all"

    def sampler(self, seed: int) -> Sampler:
        """The configured strategy; `seed` reaches it when its constructor takes one."""
        kwargs = dict(self.strategies.get(self.strategy) or {})
        if "seed" in inspect.signature(SAMPLERS[self.strategy]).parameters:
            kwargs["seed"] = seed
        return make_sampler(self.strategy, **kwargs)

    def train_config(self, params: dict[str, Any], seed: int) -> TrainConfig:
        """The train stage's optimizer settings with this block's epochs: f is the same kind of model."""
        return TrainConfig.from_params(params, self.model, epochs=self.epochs, seed=seed, device=self.device)

    def hparams(self, params: dict[str, Any]) -> dict[str, Any]:
        return model_hparams(params, self.model)
