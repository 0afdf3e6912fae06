"""Put model predictions on one scale, [0, 1], before a sampler compares them.

Why: a LambdaRank cost model's scores are only comparable within one task (its
loss does not change if one task's scores are shifted or scaled), so the raw
scores of two tasks can sit on very different scales. RDU multiplies f(x) by a
distance, which also needs f >= 0. Every method below returns values in [0, 1]:

- ``task_rank`` (the default everywhere): the program's rank within its task,
  divided by (task size - 1); ties get their average rank. Scale-free, and one
  outlier prediction cannot squash the rest of its task towards 0.
- ``task_minmax``: (s - task min) / (task max - task min). Keeps the gaps between
  predictions, so it still shows which programs the model cannot tell apart.
- ``global_rank`` / ``global_minmax``: the same over the whole pool; only
  meaningful when the model's scores are comparable across tasks (a regression
  model of normalized throughput, for example).

A task (or pool) whose predictions are all equal maps to 0.5.
"""

from __future__ import annotations

import numpy as np

METHODS = ("task_rank", "task_minmax", "global_rank", "global_minmax")


def codes(values) -> tuple[np.ndarray, np.ndarray]:
    """Dense integer codes 0..G-1 for any labels (strings, ints), and the sorted labels."""
    labels, inverse = np.unique(np.asarray(values), return_inverse=True)
    return inverse.astype(np.int64).reshape(-1), labels


def normalize(scores: np.ndarray, groups: np.ndarray, method: str = "task_rank") -> np.ndarray:
    """`scores` mapped into [0, 1] by `method` (see the module docstring); `groups` are task codes."""
    if method not in METHODS:
        raise ValueError(f"unknown normalization {method!r}; choose one of {list(METHODS)}")
    s = np.asarray(scores, dtype=np.float64)
    g = np.asarray(groups, dtype=np.int64) if method.startswith("task_") else np.zeros(len(s), np.int64)
    if len(s) == 0:
        return s.copy()
    return _rank(s, g) if method.endswith("_rank") else _minmax(s, g)


def _rank(s: np.ndarray, g: np.ndarray) -> np.ndarray:
    order = np.lexsort((s, g))
    gs, ss = g[order], s[order]
    starts_run = np.ones(len(s), dtype=bool)
    starts_run[1:] = (gs[1:] != gs[:-1]) | (ss[1:] != ss[:-1])
    run = np.cumsum(starts_run) - 1
    avg_pos = np.bincount(run, weights=np.arange(len(s), dtype=np.float64)) / np.bincount(run)
    size = np.bincount(g)
    first = np.cumsum(size) - size
    local = avg_pos[run] - first[gs]
    denom = size[gs] - 1
    out = np.empty(len(s))
    out[order] = np.where(denom > 0, local / np.maximum(denom, 1), 0.5)
    return out


def _minmax(s: np.ndarray, g: np.ndarray) -> np.ndarray:
    n_groups = int(g.max()) + 1
    lo = np.full(n_groups, np.inf)
    hi = np.full(n_groups, -np.inf)
    np.minimum.at(lo, g, s)
    np.maximum.at(hi, g, s)
    span = (hi - lo)[g]
    return np.where(span > 0, (s - lo[g]) / np.where(span > 0, span, 1.0), 0.5)
