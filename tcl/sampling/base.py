"""The sampler interface, the registry, and budget arithmetic shared by the strategies.

Shaped like MetaSchedule's ``cost_model`` package: one small abstract class, one
module per strategy, a registry by name (``make_sampler("rdu", ...)``). A sampler
sees the pool as flat arrays (a :class:`Pool`) and one round's budget, and returns
the pool indices to measure next. Retraining the cost model between rounds is the
caller's job: samplers never train, measure or read files.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from functools import cached_property
from typing import ClassVar

import numpy as np

from ..registry import registrar
from .normalize import codes

SAMPLERS: dict[str, type[Sampler]] = {}


@dataclass(frozen=True, eq=False)
class Pool:
    """One platform's program pool, one entry per program.

    op_type: operator type of the program's task (str); task: task id (any
    hashable); scores: the cost model's predictions, higher = predicted faster;
    labelled: True where the program is already measured. Optional: ensemble,
    (k, n) predictions of k models (ALT uses their disagreement); features, (n, d)
    embeddings (BALTO measures diversity in them).
    """

    op_type: np.ndarray
    task: np.ndarray
    scores: np.ndarray
    labelled: np.ndarray
    ensemble: np.ndarray | None = None
    features: np.ndarray | None = None

    def __post_init__(self):
        arrays = {"op_type": np.asarray(self.op_type), "task": np.asarray(self.task),
                  "scores": np.asarray(self.scores, dtype=np.float64),
                  "labelled": np.asarray(self.labelled, dtype=bool)}
        n = len(arrays["scores"])
        for name, a in arrays.items():
            if a.shape != (n,):
                raise ValueError(f"Pool.{name} has shape {a.shape}; expected ({n},) like scores")
        if not np.isfinite(arrays["scores"]).all():
            raise ValueError("Pool.scores must be finite")
        if self.ensemble is not None:
            arrays["ensemble"] = np.asarray(self.ensemble, dtype=np.float64)
            if arrays["ensemble"].ndim != 2 or arrays["ensemble"].shape[1] != n:
                raise ValueError(f"Pool.ensemble has shape {arrays['ensemble'].shape}; expected (k, {n})")
        if self.features is not None:
            arrays["features"] = np.asarray(self.features, dtype=np.float64)
            if arrays["features"].ndim != 2 or arrays["features"].shape[0] != n:
                raise ValueError(f"Pool.features has shape {arrays['features'].shape}; expected ({n}, d)")
        for name, a in arrays.items():
            object.__setattr__(self, name, a)

    def __len__(self) -> int:
        return len(self.scores)

    @cached_property
    def task_codes(self) -> np.ndarray:
        """Task ids as dense codes 0..n_tasks-1."""
        return codes(self.task)[0]

    @cached_property
    def op_codes(self) -> np.ndarray:
        return codes(self.op_type)[0]

    @cached_property
    def op_names(self) -> np.ndarray:
        """Operator type names, indexed by op code (sorted)."""
        return codes(self.op_type)[1]

    @cached_property
    def candidates(self) -> np.ndarray:
        """Indices of the programs not labelled yet."""
        return np.flatnonzero(~self.labelled)


class Sampler(ABC):
    """Picks which unlabelled programs of a pool to measure in one round."""

    name: ClassVar[str] = ""
    uses_model: ClassVar[bool] = True  # False: the round loop skips retraining the cost model

    def select(self, pool: Pool, budget: int) -> np.ndarray:
        """Up to `budget` distinct unlabelled pool indices (int64, in pick order).

        A budget above the number of unlabelled programs is cut to that number.
        """
        if budget < 0:
            raise ValueError(f"budget must be >= 0, got {budget}")
        budget = min(int(budget), len(pool.candidates))
        if budget == 0:
            return np.empty(0, dtype=np.int64)
        picks = np.asarray(self._select(pool, budget), dtype=np.int64)
        # Cheap (O(n)) guards on the contract every strategy must keep.
        if len(picks) > budget or len(np.unique(picks)) != len(picks) or pool.labelled[picks].any():
            raise RuntimeError(f"{type(self).__name__} broke the contract: {len(picks)} picks for "
                               f"budget {budget}, duplicates or labelled programs among them")
        return picks

    @abstractmethod
    def _select(self, pool: Pool, budget: int) -> np.ndarray:
        """Pick exactly min(budget, what the strategy can use) indices; 0 < budget <= candidates."""


register_sampler = registrar(SAMPLERS, "sampler")  # class decorator: @register_sampler("name")


def make_sampler(name: str, **kwargs) -> Sampler:
    """Instantiate a registered sampler; unknown names raise ValueError naming the known ones."""
    try:
        cls = SAMPLERS[name]
    except KeyError:
        raise ValueError(f"unknown sampler {name!r}; known samplers: {sorted(SAMPLERS)}") from None
    return cls(**kwargs)


def apportion(weights, total: int, caps=None) -> np.ndarray:
    """Split `total` into integers proportional to `weights` (largest remainder), never above `caps`.

    Why largest remainder: the parts sum to `total` exactly (rounding each share
    alone can lose or add units), and no part is more than one unit from its
    exact share. With caps, a part's excess goes to the others in proportion
    (water-filling), so an op type with fewer unlabelled programs than its share
    does not leave budget unspent. Returns sum = min(total, caps of the parts with
    weight > 0). Remainder ties go to the lower index.
    """
    w = np.asarray(weights, dtype=np.float64)
    if (w < 0).any() or total < 0:
        raise ValueError("weights and total must be non-negative")
    cap = np.full(len(w), np.inf) if caps is None else np.asarray(caps, dtype=np.float64)
    cap = np.where(w > 0, cap, 0.0)
    total = int(min(total, cap.sum()))
    quota = np.zeros(len(w))
    free = cap > 0
    left = float(total)
    while left > 0 and free.any():
        share = np.where(free, w, 0.0) / w[free].sum() * left
        over = free & (share > cap)
        if not over.any():
            quota[free] = share[free]
            break
        quota[over] = cap[over]
        left -= cap[over].sum()
        free &= ~over
    out = np.floor(quota).astype(np.int64)
    rest = total - int(out.sum())
    if rest > 0:
        room = out < cap
        frac = np.where(room, quota - out, -np.inf)
        out[np.argsort(-frac, kind="stable")[:rest]] += 1
    return out


def op_type_budgets(pool: Pool, total: int) -> dict[str, int]:
    """Representativeness (TCL Alg. 1, Calc_Dist): `total` split over op types by their share of TASKS.

    Shares count the pool's distinct (op type, task) pairs, labelled or not: the
    distribution of the dataset, as in Fig. 3 of the paper, not of the programs
    (tasks can have pools of different sizes). Each op type is capped at its
    unlabelled programs; the excess goes to the others (see :func:`apportion`).
    """
    return dict(zip(pool.op_names.tolist(), _op_budget_array(pool, total).tolist()))


def _op_budget_array(pool: Pool, total: int) -> np.ndarray:
    n_ops = len(pool.op_names)
    pairs = np.unique(pool.op_codes * (int(pool.task_codes.max()) + 1) + pool.task_codes)
    tasks_per_op = np.bincount(pairs // (int(pool.task_codes.max()) + 1), minlength=n_ops)
    unlabelled_per_op = np.bincount(pool.op_codes[pool.candidates], minlength=n_ops)
    return apportion(tasks_per_op, total, caps=unlabelled_per_op)


def round_budgets(total: int, rounds: int = 4, first_batch: float = 0.2) -> list[int]:
    """Split a labelling budget into [random first batch, round 1, ..., round T]; sums to `total`.

    The paper leaves these open. Defaults: a random first batch of 20% of the
    budget (Alg. 1 line 16: the model needs labels before its predictions mean
    anything; RDU on an untrained model is random sampling with extra steps),
    then T = 4 equal active rounds, so the cost model is retrained 4 times and
    each retraining costs about the same. At a 10% rate that is 5 batches of 2%.
    Remainders go to the earliest active rounds.
    """
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    if not 0.0 <= first_batch < 1.0:
        raise ValueError(f"first_batch is a fraction of the budget in [0, 1), got {first_batch}")
    first = int(math.floor(total * first_batch + 0.5))
    return [first, *apportion(np.ones(rounds), total - first).tolist()]


def total_budget(pool_size: int, rate: float) -> int:
    """Programs to label at sampling `rate` (0.1 = the paper's 10%), rounded to nearest."""
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"rate must be in [0, 1], got {rate}")
    return int(math.floor(pool_size * rate + 0.5))
