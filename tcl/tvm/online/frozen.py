"""The pretrained model as it is: what every learned model did in tuning before adaptation."""

from __future__ import annotations

import numpy as np

from ...models.base import predict
from .base import OnlineAdapter, register_adapter


@register_adapter("frozen")
class FrozenAdapter(OnlineAdapter):
    learns = False
    takes_prior = True

    def score(self, task: str, x: np.ndarray) -> np.ndarray:
        return self.prior(task, x) if self.prior is not None else predict(self.bundle.model, x)
