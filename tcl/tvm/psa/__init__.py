"""Pruner's Symbol-based Analyzer for CPUs and GPUs (tcl.tvm.psa.cpu, tcl.tvm.psa.gpu)."""

from . import cpu, gpu  # noqa: F401  (register the analyzers)
from .base import ANALYZERS, Estimate, SymbolAnalyzer, make_analyzer
from ...features.loop_nest import LoopNest, loop_nest

__all__ = ["ANALYZERS", "Estimate", "LoopNest", "SymbolAnalyzer", "loop_nest", "make_analyzer"]
