"""Featurization speed at tuning time: our tokenizer vs TVM's PerStoreFeature.

The evolutionary search scores ~512 candidates per cost-model call, so the
featurizer sits on the tuning loop's critical path. This builds a real task
(128x128x128 matmul + ReLU), lets MetaSchedule produce 512 real candidates
(evolutionary search, RandomModel, nothing measured), and times on the same
candidates: trace -> steps -> matrix (fast path and the JSON reference path)
against `PerStoreFeature().extract_from`. Prints one candidate's matrix.

    python benchmarks/bench_featurize.py [--n 512] [--repeat 3] [--threads 2]
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def build_task(n: int = 128):
    """A 128^3 matmul + ReLU PrimFunc, as an IRModule."""
    import tvm
    from tvm import te

    a = te.placeholder((n, n), name="A")
    b = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    c = te.compute((n, n), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    d = te.compute((n, n), lambda i, j: te.max(c[i, j], te.const(0.0, "float32")), name="D")
    return tvm.IRModule({"main": te.create_prim_func([a, b, d])})


def candidates(mod, target, n: int, threads: int, seed: int = 0):
    """`n` real candidates from one evolutionary-search round (TuneContext, RandomModel)."""
    from tvm.s_tir import meta_schedule as ms

    t0 = time.perf_counter()
    ctx = ms.TuneContext(mod=mod, target=target, space_generator="post-order-apply",
                         search_strategy="evolutionary", task_name="matmul_relu_128",
                         rand_state=seed, num_threads=threads)
    spaces = ctx.space_generator.generate_design_space(mod)
    print(f"TuneContext + design space: {time.perf_counter() - t0:.1f} s (first one in a process "
          "imports tensor intrinsics; excluded from the timings below)")
    ctx.search_strategy.pre_tuning(max_trials=n, num_trials_per_iter=n, design_spaces=spaces,
                                   database=ms.database.MemoryDatabase(),
                                   cost_model=ms.cost_model.RandomModel())
    t0 = time.perf_counter()
    cands = ctx.search_strategy.generate_measure_candidates()
    print(f"generate_measure_candidates: {len(cands)} candidates in {time.perf_counter() - t0:.1f} s")
    return ctx, list(cands)


def best_of(fn, repeat: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=512, help="candidates per call (evolutionary search: 512)")
    ap.add_argument("--repeat", type=int, default=3, help="best-of repeats (shared machines are noisy)")
    ap.add_argument("--threads", type=int, default=2, help="TuneContext threads (PerStoreFeature uses them)")
    args = ap.parse_args()

    import tvm
    from tvm.s_tir import meta_schedule as ms

    from tcl.config import load_params
    from tcl.data.metaschedule import to_plain_json, trace_to_steps
    from tcl.features import Tokenizer, sequence_stats, trace_steps
    from tcl.platforms import get_platform, load_platforms

    params = load_params()
    platform = get_platform(params, "host-avx512-2c")
    train_specs = [p.spec_vector for p in load_platforms(params).values() if p.kind == "cpu"]
    target = tvm.target.Target({"kind": "llvm", "num-cores": args.threads})
    ctx, cands = candidates(build_task(), target, args.n, args.threads)
    traces = [c.sch.trace for c in cands]
    spec = platform.spec_vector

    # Vocab/scales are fitted on the first half (and the CPU platforms of params.yaml) only.
    train_steps = [trace_to_steps(to_plain_json(t.as_json())) for t in traces[: len(traces) // 2]]
    tok = Tokenizer.for_kind("cpu").fit(train_steps, train_specs)

    ours_t, ours = best_of(lambda: tok.featurize_traces(traces, spec), args.repeat)
    ref_t, ref = best_of(lambda: tok.transform(
        [trace_to_steps(to_plain_json(t.as_json())) for t in traces], spec), args.repeat)
    assert np.array_equal(ours, ref), "fast path and reference path disagree"
    psf = ms.feature_extractor.PerStoreFeature()
    psf_t, psf_out = best_of(lambda: psf.extract_from(ctx, cands), args.repeat)
    steps_t, _ = best_of(lambda: [trace_steps(t) for t in traces], args.repeat)

    n = len(cands)
    print(f"\n== {n} candidates of matmul+relu 128^3, best of {args.repeat} ==")
    print(f"ours, fast path  (Trace -> steps -> {ours.shape[1]}x{ours.shape[2]}): {ours_t * 1e3:8.1f} ms "
          f"{n / ours_t:9.0f} cand/s   (trace -> steps alone: {steps_t * 1e3:.1f} ms)")
    print(f"ours, JSON path  (as_json -> trace_to_steps -> matrix): {ref_t * 1e3:8.1f} ms "
          f"{n / ref_t:9.0f} cand/s")
    print(f"TVM PerStoreFeature ({psf_out[0].shape[0]}x{psf_out[0].shape[1]} for candidate 0, "
          f"{args.threads} threads): {psf_t * 1e3:8.1f} ms {n / psf_t:9.0f} cand/s")
    print(f"ratio PerStoreFeature / ours fast path: {psf_t / ours_t:.1f}x")

    stats = sequence_stats(train_steps)
    print(f"\nsequence length (fitted half of the candidates): {stats['length']}")
    print(f"args per primitive: {stats['width']}")
    print(f"kind block: {tok.kind_width} cols (one-hot of {tok.kind_width - 1} most frequent of "
          f"{len(tok.kinds)} kinds + 'other'), args: {tok.arg_width} cols")

    print("\n== worked example: candidate 0 ==")
    steps = trace_to_steps(to_plain_json(traces[0].as_json()))
    np.set_printoptions(precision=2, suppress=True, linewidth=200)
    print(f"row 0 = hardware row of {platform.name}: {spec}")
    for p in load_platforms(params).values():
        if p.kind == "cpu":
            row = tok.hardware.transform(p.spec_vector, tok.cols)[0, : len(p.spec_vector)]
            print(f"   (normalized, {p.name:>15s}: {[round(float(v), 2) for v in row]})")
    for r, st in enumerate(steps[: tok.rows], start=1):
        print(f"row {r:2d} = {st['kind']:<20s} nums={st['nums']} strs={st['strs']}")
    if len(steps) > tok.rows:
        print(f"(cropped: {len(steps) - tok.rows} more primitives: {[s['kind'] for s in steps[tok.rows:]]})")
    print(ours[0])


if __name__ == "__main__":
    main()
