"""How far do `+boost`'s trees move a pretrained XGB's ranking, and does growing more of them rank better?

A check of one explanation for the boosted prior's late stall in tuning (docs/results.md): that
`tune.online.boost_rounds` trees are too few to overturn the prior once a task has measurements.
For each task of the validation split with at least 2 x `--measured` programs, a random `--measured`
of them are handed to the adapter as one measured batch; the rest are scored. Prints, per number
of trees, the spread of the trees' correction over the prior's spread, and pairwise accuracy and
the best of the top 8 (pool best / best of the 8 scored highest; 1 = found) for the prior alone,
the boosted prior and trees grown from nothing (TVM's xgb); mean +- std over `--seeds` draws.

    python benchmarks/bench_boost_rounds.py --platform zen4-avx512-1c --measured 32 --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._out import REPO  # noqa: E402
from benchmarks.bench_online import blank_bundle  # noqa: E402


def best_of_top(score: np.ndarray, latency: np.ndarray, k: int = 8) -> float:
    return float(latency.min() / latency[np.argsort(-score)[:k]].min())


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--platform", required=True)
    ap.add_argument("--measured", type=int, default=32, help="programs of a task handed to the trees")
    ap.add_argument("--rounds", type=int, nargs="+", default=[10, 50, 200], help="trees grown per update")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="draws of the measured programs")
    args = ap.parse_args(argv)

    from tcl.config import load_params
    from tcl.features.dataset import load_split
    from tcl.models.bundle import ModelBundle
    from tcl.models.metrics import pairwise_accuracy
    from tcl.train.inputs import model_inputs
    from tcl.tvm.online import OnlineSettings, make_adapter
    from tcl.tvm.online.replay import replayable_tasks

    params = load_params(REPO / "params.yaml")
    settings = OnlineSettings.from_params(params)
    bundle_dir = REPO / "models" / args.platform / "xgb"
    if not (bundle_dir / "bundle.json").exists():
        raise SystemExit(f"{bundle_dir}: no trained bundle (dvc pull, or dvc repro train@{args.platform})")
    bundle = ModelBundle.load(bundle_dir)
    blank = blank_bundle(bundle)
    features_dir = REPO / "data" / "features" / args.platform
    splits, _ = model_inputs("xgb", args.platform, params, features_dir,
                             {"validation": load_split(features_dir, "validation")}, records_root=REPO / "data" / "records")
    split = splits["validation"]
    x, latency = split["x"], split["mean_sec"]
    tasks = replayable_tasks(split, 2 * args.measured)
    if not tasks:
        raise SystemExit(f"{features_dir}: no validation task with >= {2 * args.measured} measured programs")
    for rounds in args.rounds:
        per_seed = []
        for seed in args.seeds:
            rows = []
            for task, idx in tasks.items():
                idx = np.random.default_rng(seed).permutation(idx)
                measured, rest = idx[:args.measured], idx[args.measured:]
                boosted, scratch = (make_adapter("boost", b, replace(settings, boost_rounds=rounds)) for b in (bundle, blank))
                prior = np.asarray(boosted.score(str(task), x[rest]))
                for adapter in (boosted, scratch):
                    adapter.observe(str(task), x[measured], latency[measured])
                after, learned = (np.asarray(a.score(str(task), x[rest])) for a in (boosted, scratch))
                lat = latency[rest]
                rows.append([np.std(after - prior) / max(np.std(prior), 1e-12),
                             *(pairwise_accuracy(s, -lat, np.zeros(len(lat))) for s in (prior, after, learned)),
                             *(best_of_top(s, lat) for s in (prior, after, learned))])
            per_seed.append(np.mean(rows, axis=0))
        m, s = np.mean(per_seed, axis=0), np.std(per_seed, axis=0, ddof=1) if len(per_seed) > 1 else np.zeros(7)
        f = [f"{a:.3f} +- {b:.3f}" for a, b in zip(m, s)]
        print(f"{args.platform}, {len(tasks)} tasks, {args.measured} measured, {rounds} trees: correction/prior spread {f[0]}; "
              f"pairwise accuracy prior {f[1]}, boosted {f[2]}, from nothing {f[3]}; best of top 8 prior {f[4]}, "
              f"boosted {f[5]}, from nothing {f[6]}", flush=True)


if __name__ == "__main__":
    main()
