"""PSA (tcl.tvm.psa): a latency estimate from a scheduled program's loop nest and the platform's specs.

Programs are real MetaSchedule schedules of a matmul, analysed without building them; the ranking
test measures a tiny task's programs on this machine.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from conftest import toy_matmul_task


def _matmul(n: int, tile: int, vector: int = 0, parallel: bool = False, inner: str = "j"):
    """An n^3 matmul tiled (i0, j0, k0, i1, k1, j1) by `tile`, its innermost j split by `vector` and vectorized,
    i0 run in parallel if `parallel`. `inner` names the innermost tile loop: "i" walks down a column of C (neither
    the schedule nor LLVM can vectorize it), "k" is the reduction with j1 around it."""
    import tvm

    sch = tvm.s_tir.Schedule(toy_matmul_task(n).mod)
    i, j, k = sch.get_loops(sch.get_sblock("C"))
    i0, i1 = sch.split(i, [None, tile])
    j0, j1 = sch.split(j, [None, tile])
    k0, k1 = sch.split(k, [None, tile])
    sch.reorder(i0, j0, k0, *{"j": (i1, k1, j1), "i": (j1, k1, i1), "k": (i1, j1, k1)}[inner])
    if parallel:
        sch.parallel(i0)
    if vector:
        _, jv = sch.split(j1, [None, vector])
        sch.vectorize(jv)
    return sch.mod


def _with_specs(platform, **specs):
    return dataclasses.replace(platform, specs={**platform.specs, **specs})


def test_a_tile_that_overflows_l1_estimates_slower(params, host_platform):
    from tcl.tvm.psa import loop_nest, make_analyzer

    psa = make_analyzer(host_platform, params)
    assert host_platform.specs["l1_kb"] == 32  # 16x16 tiles of A, B, C take 3 KiB; 128x128 ones 192 KiB
    fits, overflows = (psa.estimate(loop_nest(_matmul(256, t))) for t in (16, 128))
    assert overflows.seconds > fits.seconds, (fits, overflows)
    # it is the L1 refills that differ: the same work, the same lanes
    assert overflows.memory_seconds["l1"] > 2 * fits.memory_seconds["l1"]
    assert overflows.compute_seconds == pytest.approx(fits.compute_seconds)
    # with an L1 the big tile fits in, the penalty is gone
    roomy = make_analyzer(_with_specs(host_platform, l1_kb=512), params).estimate(loop_nest(_matmul(256, 128)))
    assert roomy.memory_seconds["l1"] < overflows.memory_seconds["l1"] / 2


def test_statement_tiles_are_the_footprints_of_every_depth():
    """PSA's one-pass footprints (StatementTiles) against `footprint` asked depth by depth, on a tiled,
    vectorized matmul and on one whose outer loops are fused (floordiv/floormod: inexact indices)."""
    import math

    import tvm

    from tcl.features.loop_nest import StatementTiles, footprint, loop_nest

    sch = tvm.s_tir.Schedule(_matmul(64, 16, vector=8))
    i0, j0, *_ = sch.get_loops(sch.get_sblock("C"))
    sch.fuse(i0, j0)
    for mod in (_matmul(64, 16, vector=8), sch.mod):
        nest = loop_nest(mod)
        for stmt in nest.statements:
            tiles = StatementTiles(stmt, nest)
            for depth in range(len(stmt.loops) + 1):
                inside = set(stmt.loops[depth:])
                for unit in (1, 64):
                    assert tiles.working_set(depth, unit) == footprint(stmt, nest, inside, unit)
                    for k, access in enumerate(stmt.accesses):
                        assert tiles.tile(k, depth, unit) == footprint(stmt, nest, inside, unit, access)
                for k, access in enumerate(stmt.accesses):   # reloaded for the outer loops up to its last dependence
                    deps = [d for d in range(depth) if access.depends_on(stmt.loops[d])]
                    expected = math.prod(nest.loops[stmt.loops[d]].extent for d in range(max(deps) + 1)) if deps else 1
                    assert tiles.outer[k][depth] == expected
    assert any(not ix.exact for stmt in nest.statements for a in stmt.accesses for ix in a.indices)


def test_doubling_vector_lanes_speeds_up_a_vectorized_loop_only(params, host_platform):
    from tcl.tvm.psa import loop_nest, make_analyzer

    sse, avx = (make_analyzer(_with_specs(host_platform, simd_bytes=b), params) for b in (16, 32))
    vectorized, scalar = loop_nest(_matmul(64, 32, vector=16)), loop_nest(_matmul(64, 32, inner="i"))
    assert avx.estimate(vectorized).seconds < sse.estimate(vectorized).seconds
    assert avx.estimate(vectorized).compute_seconds == pytest.approx(sse.estimate(vectorized).compute_seconds / 2)
    assert avx.estimate(scalar).compute_seconds == pytest.approx(sse.estimate(scalar).compute_seconds)
    assert sse.estimate(vectorized).vector_efficiency == 1.0 and sse.estimate(scalar).vector_efficiency == 0.25


def test_loops_llvm_vectorizes_itself_count_their_lanes(params, host_platform):
    """Rolled loops still run on vector lanes when LLVM vectorizes them: the loop vectorizer takes a long
    contiguous loop, the SLP vectorizer packs a short loop LLVM unrolled. A loop down a column gets one lane."""
    from tcl.tvm.psa import loop_nest, make_analyzer

    psa = make_analyzer(_with_specs(host_platform, simd_bytes=32), params)
    rolled, unrolled = psa.estimate(loop_nest(_matmul(64, 64))), psa.estimate(loop_nest(_matmul(64, 16)))
    column = psa.estimate(loop_nest(_matmul(64, 64, inner="i")))
    scheduled = psa.estimate(loop_nest(_matmul(64, 64, vector=8)))
    assert psa.knobs.llvm_unroll_body < 5 * 64 and 5 * 16 <= psa.knobs.llvm_unroll_body  # j1 rolled / unrolled
    assert rolled.vector_efficiency > 0.9 and unrolled.vector_efficiency > 0.9 and column.vector_efficiency < 0.2
    assert rolled.compute_seconds == pytest.approx(scheduled.compute_seconds)
    assert column.compute_seconds > 4 * rolled.compute_seconds
    # the reduction k1 innermost: LLVM unrolls it and vectorizes j1 around it; kept rolled, k1 is what the loop
    # vectorizer meets, and C does not move along it
    reduction = loop_nest(_matmul(64, 16, inner="k"))
    assert psa.estimate(reduction).vector_efficiency > 0.9
    tight = make_analyzer(_with_specs(host_platform, simd_bytes=32), params)
    tight.knobs = dataclasses.replace(tight.knobs, llvm_unroll_body=0.0)
    assert tight.estimate(reduction).vector_efficiency < 0.2


def test_idle_cores_are_a_penalty(params, host_platform):
    import tvm

    from tcl.tvm.psa import loop_nest, make_analyzer

    def parallel(extent: int):
        sch = tvm.s_tir.Schedule(toy_matmul_task(96).mod)
        i, _, _ = sch.get_loops(sch.get_sblock("C"))
        outer, _ = sch.split(i, [extent, None])
        sch.parallel(outer)
        return loop_nest(sch.mod)

    four = make_analyzer(_with_specs(host_platform, cores=4, threads=4), params)
    # 3 chunks on 4 cores leave one idle; 4 chunks keep all busy; 6 chunks take two rounds, the second half idle
    eff = {n: four.estimate(parallel(n)).parallel_efficiency for n in (3, 4, 6)}
    assert eff == pytest.approx({3: 0.75, 4: 1.0, 6: 0.75})


def test_gpu_form_needs_blocks_on_every_sm_to_reach_the_bandwidth(params):
    """The GPU form on CPU-side logic (no CUDA needed: the schedule is analysed, not built). A one-block
    grid that reads each element once must not look as fast as a grid that covers the SMs: on H200
    records that mistake made PSA's top pick 60x slower than the best (tcl/tvm/psa/gpu.py)."""
    import tvm
    from tvm import te

    from tcl.platforms import get_platform
    from tcl.tvm.psa import loop_nest, make_analyzer

    n = 1 << 20
    a = te.placeholder((n,), name="A")
    b = te.compute((n,), lambda i: a[i] * 2.0, name="B")

    def grid(blocks: int):
        sch = tvm.s_tir.Schedule(tvm.IRModule({"main": te.create_prim_func([a, b])}))
        (i,) = sch.get_loops(sch.get_sblock("B"))
        bx, tx, inner = sch.split(i, [blocks, 256, None])
        sch.bind(bx, "blockIdx.x")
        sch.bind(tx, "threadIdx.x")
        return loop_nest(sch.mod)

    psa = make_analyzer(get_platform(params, "nvidia-h200"), params)
    one, full = psa.estimate(grid(1)), psa.estimate(grid(4096))
    assert one.seconds > 50 * full.seconds, (one, full)   # 132 SMs: a one-block grid keeps 1 busy
    # the same bytes move either way (each block fetches its own slice once): only the SMs in use differ
    assert one.memory_seconds["global"] * one.parallel_efficiency == pytest.approx(
        full.memory_seconds["global"] * full.parallel_efficiency, rel=1e-3)


def test_psa_settings_are_strict(params, host_platform):
    from tcl.tvm.psa import make_analyzer

    with pytest.raises(ValueError, match=r"tune\.psa\.cpu"):
        make_analyzer(host_platform, {"tune": {"psa": {"cpu": {"line_byte": 64}}}})
    with pytest.raises(ValueError, match=r"tune\.psa"):
        make_analyzer(host_platform, {"tune": {"psa": {"fpga": {}}}})


@pytest.mark.slow
def test_psa_ranks_a_measured_task_better_than_random(tmp_path, params, host_platform, measurer):
    import tvm

    from tcl.collect.collector import measure_task
    from tcl.data.splits import add_labels
    from tcl.data.store import RecordStore
    from tcl.features.per_store import replay, workload_dir
    from tcl.models.metrics import pairwise_accuracy
    from tcl.tvm.psa import make_analyzer

    store = RecordStore(tmp_path / "records")
    task = toy_matmul_task(64, "toy_psa")
    measure_task(task, host_platform, host_platform, store, measurer,
                 dict(params["collect"], pool_size=32, batch_size=16), 0, lambda _: None)
    table = add_labels(store.read(host_platform.name))
    ok = [i for i, e in enumerate(table.column("error_code").to_pylist()) if not e]
    labels = np.asarray(table.column("label").to_pylist(), dtype=float)[ok]
    mod = tvm.ir.load_json((workload_dir(store.root, host_platform.name) / f"{task.key}.json").read_text())
    candidates, _ = replay(mod, [table.column("program")[i].as_py() for i in ok])
    assert len(candidates) >= 16 and all(c is not None for c in candidates)
    scores = make_analyzer(host_platform, params).scores([c.sch.mod for c in candidates])
    groups = np.zeros(len(labels), dtype=np.int64)
    psa = pairwise_accuracy(scores, labels, groups)
    rng = np.random.default_rng(0)
    rand = np.mean([pairwise_accuracy(rng.random(len(labels)), labels, groups) for _ in range(20)])
    flipped = pairwise_accuracy(-scores, labels, groups)
    assert psa > rand + 0.1 and psa > 0.65, (psa, rand)
    assert flipped < 0.5  # a sign flip in the estimate ranks the programs backwards


def test_buffers_read_once_for_many_programs_keep_each_programs_own_shapes():
    """The walk keeps what it read of a buffer for the next programs (tcl.features.loop_nest._buffer_info):
    programs whose buffers share names but not shapes must each get their own."""
    from tcl.features.loop_nest import loop_nest

    def shapes(nest):
        return {a.buffer: a.shape for s in nest.statements for a in s.accesses}

    small, large = _matmul(64, 16), _matmul(128, 16)
    for mod, n in ((small, 64), (large, 128), (small, 64), (_matmul(64, 8), 64)):
        assert shapes(loop_nest(mod)) == {"A": (n, n), "B": (n, n), "C": (n, n)}
    assert loop_nest(small) == loop_nest(small)


def test_statements_met_before_are_looked_up_and_estimate_as_if_new(params, host_platform):
    """The CPU analyzer keeps each statement's terms (tcl.tvm.psa.cpu): programs whose statements differ in a
    tile or only in how a loop runs must not share them, and a program scores as it does alone."""
    from tcl.tvm.psa import loop_nest, make_analyzer

    platform = _with_specs(host_platform, cores=4, threads=4)
    programs = [_matmul(256, 16), _matmul(256, 16, parallel=True), _matmul(256, 32), _matmul(256, 16, inner="i"),
                _matmul(256, 32), _matmul(128, 16)]
    alone = [make_analyzer(platform, params).estimate(loop_nest(m)) for m in programs]
    assert len({e.seconds for e in alone}) == 5  # the repeated program aside, every estimate differs
    shared = make_analyzer(platform, params)
    assert [shared.estimate(loop_nest(m)) for m in programs] == alone
    # the repeated program's statements were looked up, not analysed again
    assert len(shared._terms) == sum(len(loop_nest(m).statements) for m in programs[:4] + programs[5:])
