"""PSA (Pruner's Symbol-based Analyzer): a latency estimate from a program's loop nest and the
platform's specs, cheap enough to rank a whole evolutionary population. One analyzer per
platform kind (`cpu`, `gpu`), picked by name as the rest of the project picks methods."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...config import settings_from
from ...registry import registrar
from .nest import LoopNest, Statement, loop_nest

ANALYZERS: dict[str, type] = {}
register = registrar(ANALYZERS, "symbol analyzer")


@dataclass(frozen=True)
class Estimate:
    """A program's estimated latency and the symbols behind it (for reports and tests)."""

    seconds: float
    compute_seconds: float
    memory_seconds: dict[str, float] = field(default_factory=dict)  # by level the data moves into
    overhead_seconds: float = 0.0
    parallel_efficiency: float = 1.0  # flop-weighted share of the cores / SMs kept busy
    vector_efficiency: float = 1.0    # flop-weighted share of the vector lanes kept busy


def footprint(stmt: Statement, nest: LoopNest, inside: set[int], unit: int, access=None) -> float:
    """Bytes the accesses of `stmt` (or one `access`) touch while the loops in `inside` run; the last
    dimension is rounded up to `unit` bytes (a cache line, a memory transaction)."""
    total = 0.0
    for a in ([access] if access is not None else stmt.accesses):
        spans = [ix.span(nest.loops, inside, size) for ix, size in zip(a.indices, a.shape)] or [1]
        row = math.ceil(spans[-1] * a.dtype_bytes / unit) * unit
        total += row * math.prod(spans[:-1])
    return total


def traffic(stmt: Statement, nest: LoopNest, capacity: float, unit: int, scopes=None,
            working_sets: dict | None = None) -> float:
    """Bytes moved into a storage level of `capacity` bytes over the whole statement.

    The working set of the loops from depth d inward is kept there when it fits; d is the outermost
    such depth. An access's data is then loaded again for every iteration of the outer loops up to
    the innermost outer loop it depends on: further out, its data is the same and is reused.
    `working_sets` caches working-set sizes by (depth, unit) across the levels of one statement.
    """
    ids = stmt.loops
    sets = {} if working_sets is None else working_sets

    def working_set(d: int) -> float:
        if (d, unit) not in sets:
            sets[d, unit] = footprint(stmt, nest, set(ids[d:]), unit)
        return sets[d, unit]

    depth = next((d for d in range(len(ids) + 1) if working_set(d) <= capacity), len(ids))
    inside = set(ids[depth:])
    total = 0.0
    for a in stmt.accesses:
        if scopes is not None and a.scope not in scopes:
            continue
        deps = [j for j in range(depth) if a.depends_on(ids[j])]
        reloads = math.prod(nest.loops[ids[j]].extent for j in range(max(deps) + 1)) if deps else 1
        total += footprint(stmt, nest, inside, unit, a) * reloads
    return total


class SymbolAnalyzer:
    """Estimates latency from a LoopNest; subclasses hold one platform kind's symbols and penalties."""

    name: str
    knobs_class: type

    def __init__(self, platform, knobs=None):
        if platform.kind != self.name:
            raise ValueError(f"the {self.name} symbol analyzer got platform '{platform.name}' of kind {platform.kind}")
        self.platform = platform
        self.knobs = knobs if knobs is not None else self.knobs_class()

    def estimate(self, nest: LoopNest) -> Estimate:
        raise NotImplementedError

    def latency(self, mod) -> float:
        """Estimated seconds of a scheduled IRModule (a MeasureCandidate's `sch.mod`)."""
        return self.estimate(loop_nest(mod)).seconds

    def scores(self, mods) -> np.ndarray:
        """Higher is faster: -log(estimated seconds), so score gaps are latency ratios."""
        return -np.log(np.asarray([max(self.latency(m), 1e-15) for m in mods], dtype="float64"))


def make_analyzer(platform, params: dict[str, Any] | None = None) -> SymbolAnalyzer:
    """The analyzer of the platform's kind, with the knobs of params.yaml `tune.psa.<kind>`."""
    if platform.kind not in ANALYZERS:
        raise ValueError(f"no symbol analyzer for platform kind {platform.kind!r}; known: {sorted(ANALYZERS)}")
    cls = ANALYZERS[platform.kind]
    cfg = ((params or {}).get("tune") or {}).get("psa") or {}
    unknown = sorted(set(cfg) - set(ANALYZERS))
    if unknown:
        raise ValueError(f"params.yaml tune.psa: unknown key(s) {unknown}; known: {sorted(ANALYZERS)}")
    return cls(platform, settings_from(cls.knobs_class, cfg.get(platform.kind), f"tune.psa.{platform.kind}"))
