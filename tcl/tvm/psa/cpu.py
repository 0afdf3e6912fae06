"""PSA for CPUs: the paper's GPU symbols mapped onto cores, vector lanes and the cache hierarchy.

    compute (S2/S8)        iterations x arithmetic ops of every statement
    parallelism (S4/S6)    product of the parallel loops a statement runs under, spread over the cores:
                           P cores-worth of work in ceil(P / cores) rounds (idle cores are the penalty)
    lanes                  a vectorized innermost loop of extent e fills e / ceil(e / lanes) of the
                           simd_bytes / dtype lanes (idle lanes are the penalty); otherwise one lane, unless
                           LLVM vectorizes a rolled loop itself (below)
    LLVM                   the compiler fully unrolls innermost loops whose trip count x body stays within
                           llvm_unroll_body instructions, then vectorizes the loop around them, or packs the
                           unrolled copies of a loop (SLP), where the store runs contiguously and every access is
                           affine (strided loads become shuffles)
    memory (S1/S3/S5)      bytes moved into registers, L1, L2 and L3 (tcl.tvm.psa.base.traffic): a tile
                           that overflows a level is streamed again from the next one; rows are whole
                           cache lines (S7's transaction penalty)
    unroll                 a loop costs loop_overhead_cycles per iteration unless it is unrolled,
                           vectorized, of extent 1, or under pragma_auto_unroll_max_step >= its trip count

Latency = sum over statements of compute + memory time at each level's bandwidth (Pruner eq. 1,
compute and memory terms added), plus the loop overhead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...features.loop_nest import (PARALLEL, SERIAL, UNROLLED, VECTORIZED, LoopNest, StatementTiles, cpu_levels,
                                   statement_key, traffic)
from .base import Estimate, SymbolAnalyzer, register


@dataclass(frozen=True)
class CpuKnobs:
    """`tune.psa.cpu` of params.yaml: per-cycle rates a core's spec sheet leaves out. They are effective rates,
    searched on measured programs (benchmarks/calibrate_psa.py, reports/psa/calibration.md): the spec sheet's
    own figures (2 ops and 2 L1 loads a cycle, 32 / 16 bytes a cycle from L2 / L3, 25 GB/s of DRAM a core, a
    cycle a rolled iteration) ranked held-out programs worse on every CPU platform. llvm_unroll_body is the
    compiler's own threshold, not a fitted rate."""

    ops_per_cycle: float = 0.671        # arithmetic instructions per lane per cycle
    vector_registers: int = 16          # architectural vector registers (x86-64 without AVX-512: 16)
    l1_loads_per_cycle: float = 1.155   # vector loads from L1 per cycle
    l2_bytes_per_cycle: float = 50.381  # L2 -> L1
    l3_bytes_per_cycle: float = 38.867  # L3 -> L2, per core
    dram_gbs_per_core: float = 64.548   # one core cannot draw the socket's whole memory bandwidth
    line_bytes: int = 64
    loop_overhead_cycles: float = 0.594  # increment, compare, branch of a rolled loop iteration
    llvm_unroll_body: float = 300.0     # LLVM's full-unroll threshold (instructions: trip count x body) at -O3


_MAX_STATEMENTS = 50_000  # a full table of statement terms is cleared


def _used_cores(parallel_iterations: int, cores: int) -> float:
    """Cores' worth of work per round: P iterations take ceil(P / cores) rounds."""
    return parallel_iterations / math.ceil(parallel_iterations / cores)


@register("cpu")
class CpuAnalyzer(SymbolAnalyzer):
    knobs_class = CpuKnobs

    def __init__(self, platform, knobs=None):
        super().__init__(platform, knobs)
        specs, k = self.platform.specs, self.knobs
        self.hz = max(float(specs["turbo_ghz"]), float(specs["boost_ghz"])) * 1e9
        self.cores, self.simd = max(self.platform.threads, 1), int(specs["simd_bytes"])
        dram = min(k.dram_gbs_per_core * self.cores, float(specs["mem_bandwidth_gbs"])) * 1e9
        # bandwidth into each level in bytes/s, and whether it is per core
        bandwidths = ((k.l1_loads_per_cycle * self.simd * self.hz, True), (k.l2_bytes_per_cycle * self.hz, True),
                      (k.l3_bytes_per_cycle * self.hz, True), (dram, False))
        self.levels = [(name, capacity, bandwidth, unit, per_core) for (name, capacity, unit), (bandwidth, per_core)
                       in zip(cpu_levels(specs, k.vector_registers, k.line_bytes), bandwidths)]
        # statement -> its terms. Candidates of a population differ in a few statements each: about half of the
        # statements PSA meets were met before (MobileNet-V2's populations), and their terms are looked up
        self._terms: dict[tuple, tuple] = {}

    def estimate(self, nest: LoopNest) -> Estimate:
        compute, flops, par_w, vec_w = 0.0, 0.0, 0.0, 0.0
        memory = [0.0] * len(self.levels)
        rolled: set[int] = set()   # loops some statement keeps rolled (outside its unrolled tail)
        for stmt in nest.statements:
            key = statement_key(stmt, nest)
            terms = self._terms.get(key)
            if terms is None:
                if len(self._terms) >= _MAX_STATEMENTS:
                    self._terms.clear()
                terms = self._terms[key] = self._statement_terms(stmt, nest)
            seconds, moved, work, par, vec, unrolled_from = terms
            rolled.update(stmt.loops[:unrolled_from])
            compute += seconds
            for level, value in enumerate(moved):
                memory[level] += value
            flops += work
            par_w += par
            vec_w += vec
        overhead = self._loop_overhead(nest, rolled) / self.hz
        return Estimate(seconds=compute + sum(memory) + overhead, compute_seconds=compute,
                        memory_seconds={name: m for (name, *_), m in zip(self.levels, memory)},
                        overhead_seconds=overhead,
                        parallel_efficiency=par_w / flops if flops else 1.0,
                        vector_efficiency=vec_w / flops if flops else 1.0)

    def _statement_terms(self, stmt, nest: LoopNest) -> tuple:
        """(compute seconds, seconds moving data into each level, work, its parallel and vector weights, the
        position of its unrolled tail)."""
        loops = [nest.loops[i] for i in stmt.loops]
        work = nest.iterations(stmt) * stmt.ops
        used = _used_cores(math.prod(lp.extent for lp in loops if lp.kind == PARALLEL), self.cores)
        lanes = max(1, self.simd // stmt.dtype_bytes)
        unrolled_from = self._unrolled_from(stmt, nest)
        inner = self._vector_loop(stmt, nest, unrolled_from)
        speed = nest.loops[inner].extent / math.ceil(nest.loops[inner].extent / lanes) if inner is not None else 1.0
        tiles = StatementTiles(stmt, nest)
        moved = tuple(traffic(stmt, nest, capacity, unit, tiles) / (bandwidth * (used if per_core else 1.0))
                      for _, capacity, bandwidth, unit, per_core in self.levels)
        return (work / (self.hz * self.knobs.ops_per_cycle * speed * used), moved, work,
                work * used / self.cores, work * speed / lanes, unrolled_from)

    def _unrolled_from(self, stmt, nest: LoopNest) -> int:
        """Position of the statement's first loop of its fully unrolled tail: loops TVM unrolls (kind, pragma)
        and innermost loops LLVM unrolls because their trip count x body fits its threshold."""
        body = stmt.ops + len(stmt.accesses)
        pos, trips = len(stmt.loops), 1
        while pos > 0:
            lp = nest.loops[stmt.loops[pos - 1]]
            trips *= lp.extent
            llvm = lp.kind in (SERIAL, VECTORIZED) and trips * body <= self.knobs.llvm_unroll_body
            if not (llvm or self._unrolled(lp, trips)):
                break
            pos -= 1
        return pos

    @staticmethod
    def _unrolled(lp, trips: int) -> bool:
        """TVM unrolls it: an unroll annotation, one iteration, or a pragma step covering the nest below."""
        return lp.kind == UNROLLED or lp.extent == 1 or 0 < trips <= lp.unroll_step

    def _vector_loop(self, stmt, nest: LoopNest, pos: int) -> int | None:
        """The loop whose iterations share the vector lanes: an innermost loop the schedule vectorizes, else one
        LLVM vectorizes itself, in the order of its -O3 passes: the loop vectorizer takes the rolled serial loop
        around the unrolled tail, the SLP vectorizer packs the copies of an unrolled loop. Either needs the
        store to run contiguously in the loop and affine accesses; `pos` is where the unrolled tail starts. None:
        the statement runs on one lane."""
        if not stmt.loops:
            return None
        if nest.loops[stmt.loops[-1]].kind == VECTORIZED:
            return stmt.loops[-1]
        rolled = [stmt.loops[pos - 1]] if pos > 0 and nest.loops[stmt.loops[pos - 1]].kind == SERIAL else []
        store = next((a for a in stmt.accesses if a.buffer == stmt.store), None)
        for loop in rolled + list(reversed(stmt.loops[pos:])):
            if store is not None and store.contiguous_in(loop) and all(
                    ix.exact for a in stmt.accesses if a.depends_on(loop) for ix in a.indices):
                return loop
        return None

    def _loop_overhead(self, nest: LoopNest, rolled: set[int]) -> float:
        """Cycles spent running the `rolled` loops (each counted once, however many statements it holds)."""
        trips: dict[int, tuple[int, float]] = {}   # loop -> (iterations, cores sharing them)
        inner: dict[int, int] = {}                 # loop -> largest trip count of the nest below and at it
        for stmt in nest.statements:
            loops = [nest.loops[i] for i in stmt.loops]
            below = [1] * (len(loops) + 1)   # below[p]: trip count of the loops from position p inward
            for pos in range(len(loops) - 1, -1, -1):
                below[pos] = below[pos + 1] * loops[pos].extent
            outer, par = 1, 1
            for pos, (i, lp) in enumerate(zip(stmt.loops, loops)):
                outer *= lp.extent
                par *= lp.extent if lp.kind == PARALLEL else 1
                trips[i] = (outer, _used_cores(par, self.cores))
                inner[i] = max(inner.get(i, 0), below[pos])
        cycles = 0.0
        for i, (iterations, used) in trips.items():
            lp = nest.loops[i]
            if i in rolled and lp.kind != VECTORIZED and not self._unrolled(lp, inner[i]):
                cycles += iterations * self.knobs.loop_overhead_cycles / used
        return cycles
