"""Uniform random sampling: the baseline every active strategy has to beat, and RDU's first batch."""

from __future__ import annotations

import numpy as np

from .base import Pool, Sampler, register_sampler


@register_sampler("random")
class RandomSampler(Sampler):
    """Uniform over the unlabelled programs, without replacement.

    The generator is made once per sampler, so successive rounds draw differently
    while a whole run stays reproducible from `seed`.
    """

    uses_model = False

    def __init__(self, seed: int = 0):
        self.seed = seed
        self._rng = np.random.default_rng(seed)

    def _select(self, pool: Pool, budget: int) -> np.ndarray:
        return self._rng.choice(pool.candidates, size=budget, replace=False)
