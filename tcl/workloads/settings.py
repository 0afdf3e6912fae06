"""The `workloads:` section of params.yaml: the input shapes a built-in network is built at when it is
named alone (the tune stage's `tune.network`, `python -m flows.tune --network resnet50`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..config import settings_from


@dataclass(frozen=True)
class WorkloadSettings:
    image_size: int = 32   # image networks take (batch, 3, image_size, image_size)
    batch: int = 1
    seq_len: int = 16      # token networks take (batch, seq_len) ids

    def __post_init__(self):
        bad = {k: v for k, v in vars(self).items() if isinstance(v, bool) or not isinstance(v, int) or v < 1}
        if bad:
            raise ValueError(f"params.yaml workloads: expected positive integers, got {bad}")

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> "WorkloadSettings":
        return settings_from(cls, params.get("workloads"), "workloads")
