"""The `features:` section of params.yaml: token-matrix crops per platform kind and the platforms the
hardware row's scale is fitted on."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..config import check_keys, settings_from

TOKENIZER_KEYS = ("rows", "cols", "kind_cols", "skip_kinds")  # Tokenizer's constructor arguments


@dataclass(frozen=True)
class FeatureSettings:
    cpu: dict = field(default_factory=dict)   # Tokenizer arguments for CPU platforms (the paper: 25x22)
    gpu: dict = field(default_factory=dict)   # ... for GPU platforms (40x20)
    hardware_scale_platforms: list | None = None  # None: every declared platform of the kind

    def __post_init__(self):
        for kind in ("cpu", "gpu"):
            check_keys(getattr(self, kind), TOKENIZER_KEYS, f"features.{kind}")

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> "FeatureSettings":
        return settings_from(cls, params.get("features"), "features")

    def tokenizer_args(self, kind: str) -> dict[str, Any]:
        return dict(getattr(self, kind))
