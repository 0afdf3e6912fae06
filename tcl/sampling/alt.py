"""ALT-style uncertainty sampling (our reading of Zeng et al., 2020).

ALT brought active learning into the online cost-model loop: instead of measuring
the programs the model likes best, measure those it is least sure about, so each
measurement teaches the model the most. Our reading, for an offline pool:

- With an ensemble (``Pool.ensemble``, k models or bootstrap replicas), the
  uncertainty of a program is the variance of its k predictions, each member first
  normalized within the task (``normalize``), so members with different scales or
  offsets do not count as disagreement.
- Without one, a single ranking model's uncertainty is read from crowding: a
  program whose predicted score is close to another program of its task is one
  whose order the model can barely decide. Uncertainty = minus the gap to its
  nearest neighbour in the task (predictions min-max normalized per task; ranks
  would make every gap equal). A task's only program is the least uncertain.

Then the `budget` most uncertain unlabelled programs, over the whole pool (ALT has
no op-type quota); ties are broken at random (seeded).
"""

from __future__ import annotations

import numpy as np

from .base import Pool, Sampler, register_sampler
from .normalize import METHODS, normalize


def neighbour_gap(f: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Distance from each f_i to the nearest other value of its group (inf when alone); O(n log n)."""
    order = np.lexsort((f, groups))
    fs, gs = f[order], groups[order]
    step = np.where(gs[1:] == gs[:-1], np.diff(fs), np.inf)
    gap = np.minimum(np.concatenate([[np.inf], step]), np.concatenate([step, [np.inf]]))
    out = np.empty(len(f))
    out[order] = gap
    return out


@register_sampler("alt")
class ALTSampler(Sampler):
    """Top-`budget` unlabelled programs by predictive uncertainty (module docstring)."""

    def __init__(self, normalize: str = "task_rank", seed: int = 0):
        if normalize not in METHODS:
            raise ValueError(f"unknown normalization {normalize!r}; choose one of {list(METHODS)}")
        self.normalize, self.seed = normalize, seed
        self._rng = np.random.default_rng(seed)

    def uncertainty(self, pool: Pool) -> np.ndarray:
        """Per-program uncertainty, higher = less certain."""
        if pool.ensemble is not None and len(pool.ensemble) > 1:
            members = np.stack([normalize(m, pool.task_codes, self.normalize) for m in pool.ensemble])
            return members.var(axis=0)
        return -neighbour_gap(normalize(pool.scores, pool.task_codes, "task_minmax"), pool.task_codes)

    def _select(self, pool: Pool, budget: int) -> np.ndarray:
        cand = pool.candidates
        u = self.uncertainty(pool)[cand]
        order = np.lexsort((self._rng.random(len(cand)), -u))
        return cand[order[:budget]]
