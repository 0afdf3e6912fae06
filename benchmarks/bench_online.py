"""Online adaptation replayed on measured pools (tcl.tvm.online.replay): which way of learning
while tuning finds a task's best program soonest, before an hour-long tuning run is spent on it.

    python benchmarks/bench_online.py --platform zen4-avx512-1c --model tenset_mlp \
        --adaptations frozen boost moa ft --seeds 0 1 2
    python benchmarks/bench_online.py --platform zen4-avx512-1c --model tenset_mlp,xgb --adaptations frozen boost

(`--model a,b`: the bundles' ensemble, tcl.tvm.ensemble, as the adapters' prior.)

Each task of the split (default: validation, so settings are not chosen on the benchmark's
held-out networks) is a pool of measured programs; every round the adapter picks the `batch`
programs it scores best, their latencies are revealed and handed to it. Baselines in the same
run: `scratch` (XGBoost trees learned from nothing on the task's measurements, as TVM's xgb
does: the same adapter over a prior that scores everything 0) and `random`. Prints and writes,
per adaptation and round, the mean over tasks of pool best / best found (1 = found), mean +- std
over seeds, and how many tasks found their best.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._out import REPO, add_out_args, out_path, provenance, provenance_line  # noqa: E402
from tcl.config import apply_overrides, load_params  # noqa: E402
from tcl.data.store import atomic_write_bytes  # noqa: E402

BASELINES = ("scratch", "random")


class RandomAdapter:
    """Random picks: the floor every adapter must clear."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed + 1000)

    def score(self, task, x):
        return self.rng.random(len(x))

    def observe(self, task, x, latencies):
        pass


def blank_bundle(bundle):
    """An untrained XGB over `bundle`'s PerStoreFeature: `boost` over it grows trees from nothing, as TVM's xgb."""
    from tcl.models import build_model
    from tcl.models.bundle import ModelBundle

    return ModelBundle("xgb", build_model("xgb", feat_dim=164, seq_len=None, seed=0), bundle.featurizer,
                       bundle.platform, bundle.spec_vector, {})


def adapters(names: list[str], bundles: list, settings, scratch_rounds: int, seed: int) -> dict:
    """name -> a factory of fresh adapters over `bundles` (one model, or their ensemble; the baselines over a
    prior that knows nothing)."""
    import torch

    from tcl.tvm.ensemble import EnsemblePrior
    from tcl.tvm.online import make_adapter

    bundle = bundles[0]

    def make(name):
        torch.manual_seed(seed)
        if name == "random":
            return RandomAdapter(seed)
        if name == "scratch":
            return make_adapter("boost", blank_bundle(bundle), replace(settings, boost_rounds=scratch_rounds))
        prior = EnsemblePrior(bundles, [b.model_name for b in bundles]) if len(bundles) > 1 else None
        return make_adapter(name, bundle, settings, prior)

    return {n: (lambda n=n: make(n)) for n in names}


def summarize(curves: dict[str, list[dict[str, np.ndarray]]], rounds: int) -> dict[str, dict]:
    """Per adaptation: mean over tasks per round (mean and std over seeds), tasks that found their best."""
    out = {}
    for name, per_seed in curves.items():
        means = np.array([np.mean(list(c.values()), axis=0) for c in per_seed])  # (seeds, rounds)
        found = np.array([np.mean([v[-1] >= 1.0 for v in c.values()]) for c in per_seed])
        out[name] = {"mean": means.mean(axis=0).round(4).tolist(), "std": means.std(axis=0, ddof=1).round(4).tolist()
                     if len(means) > 1 else [0.0] * rounds, "found_share": round(float(found.mean()), 3),
                     "tasks": len(per_seed[0])}
    return out


def render(summary: dict[str, dict], rounds: int, batch: int, shown: list[int]) -> str:
    head = ["adaptation"] + [f"round {r} ({r * batch} measured)" for r in shown] + ["tasks finding their best"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, s in summary.items():
        cells = [f"{s['mean'][r - 1]:.3f} +- {s['std'][r - 1]:.3f}" for r in shown]
        lines.append("| " + " | ".join([name, *cells, f"{s['found_share']:.0%} of {s['tasks']}"]) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--params", default=str(REPO / "params.yaml"))
    ap.add_argument("--platform", required=True)
    ap.add_argument("--model", default="tenset_mlp",
                    help="the trained bundle models/<platform>/<model>; a,b: those bundles' ensemble")
    ap.add_argument("--split", default="validation")
    ap.add_argument("--adaptations", nargs="+", default=["frozen", "boost", "moa"])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--batch", type=int, default=4, help="programs measured per round")
    ap.add_argument("--min-programs", type=int, default=32)
    ap.add_argument("--scratch-rounds", type=int, default=50, help="trees of the from-scratch baseline")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a params key for this run, e.g. --set tune.online.boost_rounds=20 (repeatable)")
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    add_out_args(ap, "reports/online/summary")
    args = ap.parse_args(argv)

    from tcl.features.dataset import load_split
    from tcl.models.bundle import ModelBundle
    from tcl.train.inputs import model_inputs
    from tcl.tvm.online import OnlineSettings
    from tcl.tvm.online.replay import replay_split, replayable_tasks

    try:
        params = apply_overrides(load_params(args.params), args.set)
    except ValueError as e:
        raise SystemExit(str(e)) from e
    settings = OnlineSettings.from_params(params)
    bundles = []
    for model in args.model.split(","):
        bundle_dir = REPO / "models" / args.platform / model
        if not (bundle_dir / "bundle.json").exists():
            raise SystemExit(f"{bundle_dir}: no trained bundle (dvc pull, or dvc repro train@{args.platform})")
        bundles.append(ModelBundle.load(bundle_dir))
    bundle = bundles[0]
    features_dir = REPO / "data" / "features" / args.platform
    splits, _ = model_inputs(bundle.model_name, args.platform, params, features_dir,
                             {args.split: load_split(features_dir, args.split)}, records_root=REPO / "data" / "records")
    split = splits[args.split]
    if not replayable_tasks(split, args.min_programs):
        raise SystemExit(f"{features_dir}: the {args.split} split has no task with >= {args.min_programs} measured "
                         f"programs (the split holds {len(np.unique(split['task_key']))} tasks, {len(split['task_key'])} programs "
                         "measured or not); "
                         "lower --min-programs or pick another platform")
    names = list(dict.fromkeys([*args.adaptations, *BASELINES]))
    curves: dict[str, list] = {n: [] for n in names}
    for seed in args.seeds:
        for name, make in adapters(names, bundles, settings, args.scratch_rounds, seed).items():
            curves[name].append(replay_split(make, split, args.rounds, args.batch, seed, args.min_programs))
            last = np.mean([c[-1] for c in curves[name][-1].values()])
            print(f"seed {seed} {name}: {len(curves[name][-1])} tasks, after {args.rounds} rounds {last:.3f}")
    summary = summarize(curves, args.rounds)
    shown = sorted({1, 2, args.rounds // 2, args.rounds} - {0})
    prov = provenance(__file__, argv)
    text = (f"# Online adaptation replayed on measured pools ({args.platform}, {args.split} split, {args.model})\n\n"
            + render(summary, args.rounds, args.batch, shown)
            + f"\nPool best / best found, mean over tasks (mean +- std over seeds {args.seeds}); each task's pool is "
              f"its measured programs, {args.batch} revealed a round; a seed changes the random tie-breaks and the "
              f"baselines, the trained adapters are deterministic. Settings: {settings}.\n\n"
            + provenance_line(prov) + "\n")
    print(text)
    base = out_path(args, "reports/online/summary")
    base.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(base.with_suffix(".md"), text.encode())
    atomic_write_bytes(base.with_suffix(".json"), json.dumps({**prov, "settings": settings.__dict__, "rounds":
                                                              args.rounds, "batch": args.batch, "summary": summary},
                                                             indent=1).encode())


if __name__ == "__main__":
    main()
