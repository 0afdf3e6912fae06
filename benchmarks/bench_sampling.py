"""Selection speed of the active-learning samplers on a TCL-sized synthetic pool.

TCL labels 10% of a pool of millions of programs, so a sampler must pick tens of
thousands of programs in seconds: RDU's greedy loop re-scores after every pick,
which is hours if each pick recomputes eqs. 1-3 against the whole labelled set.
The pool: `tasks` x `per_task` programs (800 x 125 = 100,000), `ops` op types with
skewed task shares, random predictions on per-task scales that differ by orders
of magnitude, a random 2% already labelled (the first batch). Each strategy picks
`rate` of the pool in one call; wall time over `seeds` seeds, each a new pool.

    taskset -c 0 python benchmarks/bench_sampling.py [--tasks 800] [--per-task 125] [--rate 0.1]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from tcl.sampling import Pool, make_sampler, total_budget

OPS = ["conv2d", "dense", "batch_matmul", "depthwise_conv2d", "pool", "softmax", "layer_norm", "elementwise"]
VARIANTS = [  # (label, sampler name, kwargs, pool extras)
    ("random", "random", {}, {}),
    ("rdu (task reference)", "rdu", {}, {}),
    ("rdu (global reference)", "rdu", {"reference": "global"}, {}),
    ("alt (ensemble of 5)", "alt", {}, {"ensemble": 5}),
    ("alt (single model)", "alt", {}, {}),
    ("balto (16-d features)", "balto", {}, {"features": 16}),
    ("balto (prediction space)", "balto", {}, {}),
]


def make_pool(seed: int, tasks: int, per_task: int, labelled_share: float, ensemble: int = 0,
              features: int = 0) -> Pool:
    rng = np.random.default_rng(seed)
    task = np.repeat(np.arange(tasks), per_task)
    share = np.array([30, 25, 10, 10, 8, 7, 5, 5], dtype=float)[: len(OPS)]
    op_of_task = rng.choice(OPS, size=tasks, p=share / share.sum())
    scale = 10.0 ** rng.uniform(-3, 3, size=tasks)
    scores = rng.normal(size=len(task)) * scale[task]
    labelled = rng.random(len(task)) < labelled_share  # drawn before the extras: same for every variant
    ens = scores + rng.normal(size=(ensemble, len(task))) * scale[task] * 0.3 if ensemble else None
    feats = rng.normal(size=(len(task), features)) if features else None
    return Pool(op_type=op_of_task[task], task=task, scores=scores,
                labelled=labelled, ensemble=ens, features=feats)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=800)
    ap.add_argument("--per-task", type=int, default=125)
    ap.add_argument("--rate", type=float, default=0.1)
    ap.add_argument("--labelled", type=float, default=0.02, help="share already labelled (the random first batch)")
    ap.add_argument("--seeds", type=int, default=3)
    args = ap.parse_args()

    print(f"{'strategy':<26} {'pool':>8} {'labelled':>9} {'picks':>7} {'seconds (mean ± std)':>22}")
    for label, name, kwargs, extras in VARIANTS:
        times, picks, labelled = [], 0, 0
        for seed in range(args.seeds):
            pool = make_pool(seed, args.tasks, args.per_task, args.labelled, **extras)
            sampler = make_sampler(name, **kwargs)
            budget = total_budget(len(pool), args.rate)
            t0 = time.perf_counter()
            out = sampler.select(pool, budget)
            times.append(time.perf_counter() - t0)
            assert len(out) == budget, (label, len(out), budget)
            picks, labelled = len(out), int(pool.labelled.sum())
        t = np.array(times)
        print(f"{label:<26} {len(pool):>8} {labelled:>9} {picks:>7} {t.mean():>13.3f} ± {t.std():.3f}")


if __name__ == "__main__":
    main()
