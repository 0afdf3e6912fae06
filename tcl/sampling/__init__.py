"""Active-learning samplers: which programs of a pool to measure next, by name.

``make_sampler("rdu")`` (TCL), ``"alt"`` (uncertainty), ``"balto"`` (biased
diversity), ``"random"``. Every sampler's ``select(pool, budget)`` returns distinct
unlabelled pool indices; ``round_budgets`` splits a total budget into a random
first batch and T active rounds.
"""

from __future__ import annotations

from .alt import ALTSampler
from .balto import BALTOSampler
from .base import (SAMPLERS, Pool, Sampler, apportion, make_sampler, op_type_budgets, register_sampler,
                   round_budgets, total_budget)
from .random import RandomSampler
from .rdu import RDUSampler

__all__ = ["SAMPLERS", "Pool", "Sampler", "make_sampler", "register_sampler", "apportion",
           "op_type_budgets", "round_budgets", "total_budget", "RandomSampler", "RDUSampler",
           "ALTSampler", "BALTOSampler"]
