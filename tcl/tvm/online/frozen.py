"""The pretrained model as it is: what every learned model did in tuning before adaptation."""

from __future__ import annotations

import numpy as np

from ...models.base import predict
from .base import OnlineAdapter, register_adapter


@register_adapter("frozen")
class FrozenAdapter(OnlineAdapter):
    learns = False

    def score(self, task: str, x: np.ndarray) -> np.ndarray:
        return predict(self.bundle.model, x)
