"""Where a cost model's time goes in MetaSchedule's search: per candidate, each scorer's parts.

A learned model's share of tuning wall time (bench_tune.py's `cost_model_share`) is the search
waiting for scores. This captures the populations MetaSchedule's evolutionary search asks a cost
model to score (the network's heaviest tasks, one batch each, a random model steering, nothing
measured) and times on exactly those candidates, per candidate: the program hash the feature
memo is keyed on (tcl.tvm.memo), each trained bundle's featurizer (models/<platform>/<model>;
PerStoreFeature lowers every program, our tokenizer reads only the trace), its forward pass, and
PSA's estimate (the draft of tcl.tvm.draft); next to the search's own seconds per candidate.

    taskset -c 0 python benchmarks/bench_cost_overhead.py --platform zen4-avx512-1c --network mobilenet_v2 \
        --tasks 4 [--update-report]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks._out import add_out_args, out_path, provenance, provenance_line  # noqa: E402

REPORT = "reports/cost_overhead"
MODELS = ("tenset_mlp", "xgb", "pacm", "tcl_stores", "tcl")  # the train stage's names


def capture_populations(platform, network: str, tasks: int, params, seed: int = 0):
    """[(TuneContext, candidates)] of every cost-model call of one batch of the `tasks` heaviest tasks, and
    the search's own seconds (a random model scores, so they are the search alone)."""
    from tvm.ir.utils import derived_object
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule.cost_model import PyCostModel

    from tcl.collect.intrinsics import load_tensor_intrinsics
    from tcl.tvm.tuning import SearchSettings, tune_contexts
    from tcl.workloads import fuse_for_tuning, load_network
    from tcl.workloads.settings import WorkloadSettings

    load_tensor_intrinsics()
    calls: list = []

    @derived_object
    class Recorder(PyCostModel):
        """Keeps what it is asked to score; random scores steer the search."""

        def __init__(self):
            super().__init__()
            self.rng = np.random.default_rng(seed)

        def load(self, path): ...

        def save(self, path): ...

        def update(self, context, candidates, results): ...

        def predict(self, context, candidates):
            calls.append((context, list(candidates)))
            return self.rng.random(len(candidates))

    net = load_network(network, WorkloadSettings.from_params(params))
    work_dir = REPO / "tmp" / "bench" / "cost_overhead_work"
    contexts, weights = tune_contexts(fuse_for_tuning(net.relax_mod, platform.tvm_target()), platform, work_dir,
                                      seed, SearchSettings.from_params(params), network)
    recorder, search_seconds = Recorder(), 0.0
    for i in np.argsort(-np.asarray(weights, dtype=float))[:tasks]:
        ctx = contexts[int(i)]
        spaces = ctx.generate_design_space()
        start = time.perf_counter()
        ctx.pre_tuning(max_trials=64, num_trials_per_iter=8, design_spaces=spaces,
                       database=ms.database.MemoryDatabase(), cost_model=recorder)
        ctx.search_strategy.generate_measure_candidates()
        search_seconds += time.perf_counter() - start
    return calls, search_seconds


def seconds(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def time_scorers(calls, platform, params, models: list[str]) -> dict[str, float]:
    """Seconds of each scorer part over all `calls`."""
    from tvm.s_tir.meta_schedule.utils import shash2hex

    from tcl.models.bundle import ModelBundle
    from tcl.tvm.cost_model import LearnedCostModel
    from tcl.tvm.psa import make_analyzer

    totals = {"program hash (memo key)": sum(seconds(lambda: [shash2hex(c.sch.mod) for c in cands])
                                             for _, cands in calls)}
    psa = make_analyzer(platform, params)
    totals["PSA estimate (draft)"] = sum(seconds(lambda: psa.scores([c.sch.mod for c in cands])) for _, cands in calls)
    for name in models:
        bundle_dir = REPO / "models" / platform.name / name
        if not (bundle_dir / "bundle.json").exists():
            print(f"{bundle_dir}: no trained bundle, skipped (the train stage writes it)", flush=True)
            continue
        model = LearnedCostModel(ModelBundle.load(bundle_dir), spec_vector=platform.spec_vector)
        featurize = forward = 0.0
        for ctx, cands in calls:
            start = time.perf_counter()
            x = model.bundle.featurize_candidates(ctx, cands, model.spec_vector)
            featurize += time.perf_counter() - start
            forward += seconds(lambda: model.adapter.score(str(ctx.task_name), x))
        kind = type(model.bundle.featurizer).__name__
        totals[f"{name}: featurize ({kind})"] = featurize
        totals[f"{name}: forward pass"] = forward
    return totals


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--platform", default="zen4-avx512-1c")
    ap.add_argument("--network", default="mobilenet_v2")
    ap.add_argument("--tasks", type=int, default=4, help="the network's heaviest tasks, one batch each")
    ap.add_argument("--models", nargs="*", default=list(MODELS))
    add_out_args(ap, REPORT)
    args = ap.parse_args(argv)

    import torch

    from tcl.config import load_params
    from tcl.platforms import get_platform

    torch.set_num_threads(1)
    params = load_params(REPO / "params.yaml")
    platform = get_platform(params, args.platform)
    prov = provenance(__file__, argv)
    calls, search_seconds = capture_populations(platform, args.network, args.tasks, params)
    n = sum(len(c) for _, c in calls)
    totals = time_scorers(calls, platform, params, args.models)
    per = {part: 1e3 * s / n for part, s in totals.items()}
    lines = [f"# Cost-model time per candidate, {args.network} on {args.platform}", "",
             f"{n} candidates in {len(calls)} scoring calls of the {args.tasks} heaviest tasks (one batch each); "
             f"the evolutionary search itself: {1e3 * search_seconds / n:.3f} ms a candidate (a random model "
             "scoring). One process on one core.", "",
             "| part | ms per candidate | x the search's own |", "|---|---|---|"]
    lines += [f"| {part} | {ms:.3f} | {ms / (1e3 * search_seconds / n):.2f} |" for part, ms in per.items()]
    lines += ["", provenance_line(prov)]
    print("\n".join(lines))
    out = out_path(args, REPORT)
    out.mkdir(parents=True, exist_ok=True)
    base = out / f"{args.network}-{args.platform}"
    base.with_suffix(".md").write_text("\n".join(lines) + "\n")
    base.with_suffix(".json").write_text(json.dumps(
        {**prov, "platform": args.platform, "network": args.network, "tasks": args.tasks, "candidates": n,
         "calls": len(calls), "search_ms_per_candidate": 1e3 * search_seconds / n, "ms_per_candidate": per},
        indent=2) + "\n")


if __name__ == "__main__":
    main()
