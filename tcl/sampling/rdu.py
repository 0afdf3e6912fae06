"""TCL's RDU sampler (paper section 4, Algorithm 1, eqs. 1-3): representativeness, diversity, uncertainty.

One round, greedy: with f the normalized predictions and L the labelled set,

    d_i = min_{j in L} |f_i - f_j|                              (eq. 1, diversity)
    u_i = var({f_i} U {f_j : j in L})                           (eqs. 2-3, uncertainty)
        = M/(M+1) var_L + M/(M+1)^2 (f_i - mean_L)^2            (closed form, M = |L|)
    t_i = f_i * d_i + u_i                                       (Alg. 1 line 26)

take argmax t while its op type has budget left (representativeness: budgets by
the op type's share of tasks); an op type out of budget leaves the pool. Each pick
joins L at once, so d and u move before the next pick.

Choices the paper leaves open (constructor arguments):

- ``reference="task"`` (default): L, and so d and u, are the labelled programs of
  the candidate's own task. A ranking model is trained and used per task, so the
  question "which part of this task's score range has no label yet" is the useful
  one; a global L would let a label in task A suppress a similar score in task B,
  which says nothing about B. ``"global"`` is the paper's formula read literally.
- ``normalize="task_rank"`` (default; see :mod:`.normalize`): predictions become
  within-task rank percentiles in [0, 1], so tasks with different score scales are
  comparable and f * d is a product of non-negatives. ``"task_minmax"`` keeps the
  model's gaps instead.
- A reference set with no labels yet (a task the random first batch missed) is at
  distance 1, the largest possible in [0, 1], and has u = 0: the first pick in such
  a task is its best-predicted program.

Cost: sorting once (O(n log n)); then each pick touches one task's programs (or the
whole pool with ``reference="global"``): one vectorized minimum for d, an O(1)
Welford update of the task's mean/variance, and an argmax over per-task maxima.
Argmax ties go to the lower task code, then the lower pool index (deterministic).
"""

from __future__ import annotations

import numpy as np

from .base import Pool, Sampler, _op_budget_array, register_sampler
from .normalize import METHODS, normalize

REFERENCES = ("task", "global")


def uncertainty(f, count, mean, var):
    """Eqs. 2-3 in closed form: population variance of {f} U L from L's size, mean and population variance."""
    m = np.asarray(count, dtype=np.float64)
    return m / (m + 1.0) * var + m / (m + 1.0) ** 2 * (np.asarray(f) - mean) ** 2


def nearest_distance(f: np.ndarray, groups: np.ndarray, reference: np.ndarray, empty: float = 1.0) -> np.ndarray:
    """Eq. 1 for every program: min |f_i - f_j| over reference programs j of i's group.

    `f` must lie in [0, 1]; `empty` where i's group has no reference program. One
    sort and one binary search (O(n log n)), never the n x M distance matrix.
    """
    f = np.asarray(f, dtype=np.float64)
    if not reference.any():
        return np.full(len(f), empty)
    key = groups * 3.0 + f  # groups 3 apart: a neighbour from another group is >= 2 away, one from i's own <= 1
    ref = np.sort(key[reference])
    pos = np.searchsorted(ref, key)
    left = ref[np.clip(pos - 1, 0, len(ref) - 1)]
    right = ref[np.clip(pos, 0, len(ref) - 1)]
    dist = np.minimum(np.abs(key - left), np.abs(key - right))
    return np.where(dist <= 1.5, np.minimum(dist, 1.0), empty)


class RDUState:
    """The greedy loop's incremental state over the unlabelled programs.

    Programs are laid out sorted by reference group, so one pick updates one
    contiguous slice. `index[k]` is the pool index of local position k; `d`, `u`,
    `t` are local arrays (t = -inf once a program is taken or its op type is out).
    """

    def __init__(self, f: np.ndarray, groups: np.ndarray, ops: np.ndarray, labelled: np.ndarray,
                 op_budget: np.ndarray):
        n_groups = int(groups.max()) + 1
        cand = np.flatnonzero(~labelled)
        self.index = cand[np.argsort(groups[cand], kind="stable")]
        self.f, self.g, self.op = f[self.index], groups[self.index], ops[self.index]
        size = np.bincount(self.g, minlength=n_groups)
        self.stop = np.cumsum(size)
        self.start = self.stop - size
        lg, lf = groups[labelled], f[labelled]
        self.count = np.bincount(lg, minlength=n_groups).astype(np.float64)
        self.mean = np.divide(np.bincount(lg, weights=lf, minlength=n_groups), self.count,
                              out=np.zeros(n_groups), where=self.count > 0)
        self.m2 = np.bincount(lg, weights=(lf - self.mean[lg]) ** 2, minlength=n_groups).astype(np.float64)
        self.d = nearest_distance(f, groups, labelled)[self.index]
        self.u = uncertainty(self.f, self.count[self.g], self.mean[self.g], self._var()[self.g])
        self.budget = np.asarray(op_budget, dtype=np.int64).copy()
        self.alive = self.budget[self.op] > 0
        self.t = np.where(self.alive, self.f * self.d + self.u, -np.inf)
        self.best = np.full(n_groups, -np.inf)
        self._refresh_best()

    def _var(self) -> np.ndarray:
        return np.divide(self.m2, self.count, out=np.zeros_like(self.m2), where=self.count > 0)

    def _refresh_best(self) -> None:
        nonempty = self.stop > self.start
        if len(self.t):
            self.best[nonempty] = np.maximum.reduceat(self.t, self.start[nonempty])

    def next(self) -> int | None:
        """Local position of argmax t, or None when nothing with budget is left."""
        g = int(np.argmax(self.best))
        if self.best[g] == -np.inf:
            return None
        return int(self.start[g] + np.argmax(self.t[self.start[g]:self.stop[g]]))

    def take(self, k: int) -> None:
        """Label local position k: update d, the group's mean/var (Welford) and t for its group."""
        g, x = self.g[k], self.f[k]
        sl = slice(self.start[g], self.stop[g])
        np.minimum(self.d[sl], np.abs(self.f[sl] - x), out=self.d[sl])
        self.count[g] += 1.0
        delta = x - self.mean[g]
        self.mean[g] += delta / self.count[g]
        self.m2[g] += delta * (x - self.mean[g])
        self.u[sl] = uncertainty(self.f[sl], self.count[g], self.mean[g], self.m2[g] / self.count[g])
        self.alive[k] = False
        self.t[sl] = np.where(self.alive[sl], self.f[sl] * self.d[sl] + self.u[sl], -np.inf)
        self.best[g] = self.t[sl].max()
        op = self.op[k]
        self.budget[op] -= 1
        if self.budget[op] == 0:  # Alg. 1 lines 29-32: the op type's remaining programs leave the pool
            out = self.alive & (self.op == op)
            self.alive[out] = False
            self.t[out] = -np.inf
            self._refresh_best()


@register_sampler("rdu")
class RDUSampler(Sampler):
    """TCL's RDU: op-type budgets by task share, then greedy argmax of f*d + u (module docstring)."""

    def __init__(self, normalize: str = "task_rank", reference: str = "task"):
        if normalize not in METHODS:
            raise ValueError(f"unknown normalization {normalize!r}; choose one of {list(METHODS)}")
        if reference not in REFERENCES:
            raise ValueError(f"unknown reference {reference!r}; choose one of {list(REFERENCES)}")
        self.normalize, self.reference = normalize, reference

    def state(self, pool: Pool, budget: int) -> RDUState:
        """The initial greedy state for this pool and round budget (exposed for tests and tracing)."""
        f = normalize(pool.scores, pool.task_codes, self.normalize)
        groups = pool.task_codes if self.reference == "task" else np.zeros(len(pool), np.int64)
        return RDUState(f, groups, pool.op_codes, pool.labelled, _op_budget_array(pool, budget))

    def _select(self, pool: Pool, budget: int) -> np.ndarray:
        st = self.state(pool, budget)
        picks = []
        while len(picks) < budget:
            k = st.next()
            if k is None:
                break
            st.take(k)
            picks.append(st.index[k])
        return np.asarray(picks, dtype=np.int64)
