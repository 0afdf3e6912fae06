"""PSA (Pruner's Symbol-based Analyzer): a latency estimate from a program's loop nest and the
platform's specs, cheap enough to rank a whole evolutionary population. One analyzer per
platform kind (`cpu`, `gpu`), picked by name as the rest of the project picks methods."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...config import check_keys, settings_from
from ...features.loop_nest import LoopNest, loop_nest
from ...registry import registrar

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

    def scores(self, mods) -> np.ndarray:
        """Higher is faster: -log(estimated seconds), so score gaps are latency ratios."""
        return self.nest_scores([loop_nest(m) for m in mods])

    def nest_scores(self, nests) -> np.ndarray:
        """`scores` of programs already read into LoopNests (NaN for None: a program that could not be read)."""
        return np.asarray([-np.log(max(self.estimate(n).seconds, 1e-15)) if n is not None else np.nan
                           for n in nests], dtype="float64")


def make_analyzer(platform, params: dict[str, Any] | None = None) -> SymbolAnalyzer:
    """The analyzer of the platform's kind, with the knobs of params.yaml `tune.psa.<kind>`."""
    if platform.kind not in ANALYZERS:
        raise ValueError(f"no symbol analyzer for platform kind {platform.kind!r}; known: {sorted(ANALYZERS)}")
    cls = ANALYZERS[platform.kind]
    cfg = ((params or {}).get("tune") or {}).get("psa") or {}
    check_keys(cfg, ANALYZERS, "tune.psa")
    return cls(platform, settings_from(cls.knobs_class, cfg.get(platform.kind), f"tune.psa.{platform.kind}"))
