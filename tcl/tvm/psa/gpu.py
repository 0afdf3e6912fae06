"""PSA for GPUs, in the paper's symbols and penalties (Pruner §4.1, Table 2, eq. 1).

    S1 local (register) bytes per thread    S2 ops per thread        S3 shared bytes per block
    S4 threads per block                    S5 global bytes moved    S6 blocks
    S7 contiguous bytes of a global row     S8 ops of the statement

    P_l0,m = min(m_l0 / S1, 1)   P_l0,c = 1 + S2^2 / S1
    P_l1,m = min(m_l1 / S3, 1)   P_l1,c = sch / (ceil(sch / pu_l1) pu_l1), sch = ceil(S4 / warp)
    P_l2,c = S6 / (ceil(S6 / pu_l2) pu_l2)   P_l2,m = S7 / (ceil(S7 / n_l2) n_l2)
    L = sum_i S8 / (T_p prod P_c) + S5 / (T_m prod P_m)

Two departures from the paper, both measured on H200 records (data/records_gpu, 21 tasks, 1,106 programs,
benchmarks/bench_psa.py): read literally, the memory term needs no parallelism and S5 reloads each thread's
tile, so a one-block program that reads the tensor once looks as fast as a grid that covers the GPU; PSA's
top pick then ran 60x slower than the best (top-1 0.016, random 0.084). Here S5 is what each block touches
(its threads share shared memory and L1; no reuse across blocks), and the bandwidth is reached only with
the warps and SMs that P_l1,c and P_l2,c count (top-1 0.669, pairwise 0.674 vs 0.570).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...features.loop_nest import THREAD, LoopNest, footprint
from .base import Estimate, SymbolAnalyzer, register


@dataclass(frozen=True)
class GpuKnobs:
    """`tune.psa.gpu` of params.yaml: the per-SM figures Table 1's GPU row leaves out."""

    warp_size: int = 32
    cores_per_sm: int = 128            # SMs = cuda_cores / cores_per_sm (pu_l2)
    warps_per_sm: int = 4              # warp schedulers issuing at once (pu_l1)
    registers_per_thread: int = 255    # m_l0, in 4-byte registers
    shared_kb_per_block: int = 48      # m_l1
    transaction_bytes: int = 32        # n_l2


def _fill(n: float, unit: float) -> float:
    return n / (math.ceil(n / unit) * unit) if n > 0 else 1.0


def _block_traffic(stmt, nest: LoopNest, blocks: list[int], unit: int) -> float:
    """S5: global bytes each block touches (once: shared memory and L1 serve its threads), over all blocks."""
    inside = set(stmt.loops) - set(blocks)
    per_block = sum(footprint(stmt, nest, inside, unit, a) for a in stmt.accesses if a.scope == "global")
    return math.prod(nest.loops[i].extent for i in blocks) * per_block


@register("gpu")
class GpuAnalyzer(SymbolAnalyzer):
    knobs_class = GpuKnobs

    def estimate(self, nest: LoopNest) -> Estimate:
        specs, k = self.platform.specs, self.knobs
        peak = float(specs["fp32_tflops"]) * 1e12
        bandwidth = float(specs["memory_bandwidth_gbs"]) * 1e9
        sms = max(1, int(specs["cuda_cores"]) // k.cores_per_sm)
        s1 = max(1, sum(b for _, scope, b in nest.allocs if scope.startswith("local")))
        s3 = sum(b for _, scope, b in nest.allocs if scope.startswith("shared"))
        compute = memory = 0.0
        par_w = flops = 0.0
        for stmt in nest.statements:
            loops = [nest.loops[i] for i in stmt.loops]
            blocks = [i for i in stmt.loops
                      if nest.loops[i].kind == THREAD and nest.loops[i].thread_tag.startswith("blockIdx")]
            s6 = math.prod(nest.loops[i].extent for i in blocks)
            s4 = math.prod(lp.extent for lp in loops if lp.kind == THREAD and lp.thread_tag.startswith("threadIdx"))
            s8 = nest.iterations(stmt) * stmt.ops
            s2 = s8 / (s4 * s6)
            s5 = _block_traffic(stmt, nest, blocks, k.transaction_bytes)
            tx = [lp_id for lp_id in stmt.loops if nest.loops[lp_id].thread_tag == "threadIdx.x"]
            rows = [a.indices[-1].span(nest.loops, set(tx), a.shape[-1]) * a.dtype_bytes
                    for a in stmt.accesses if a.scope == "global" and a.indices]
            s7 = min(rows) if rows else k.transaction_bytes
            sch = math.ceil(s4 / k.warp_size)
            occupancy = _fill(sch, k.warps_per_sm) * _fill(s6, sms)  # P_l1,c * P_l2,c
            p_c = (1 + s2 ** 2 / s1) * occupancy
            p_m = (min(k.registers_per_thread * 4 / s1, 1) * min(k.shared_kb_per_block * 1024 / max(s3, 1), 1)
                   * _fill(s7, k.transaction_bytes) * occupancy)
            compute += s8 / (peak * p_c)
            memory += s5 / (bandwidth * p_m)
            flops += s8
            par_w += s8 * _fill(s6, sms)
        return Estimate(seconds=compute + memory, compute_seconds=compute, memory_seconds={"global": memory},
                        parallel_efficiency=par_w / flops if flops else 1.0)
