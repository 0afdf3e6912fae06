"""PSA's per-cycle rates (params.yaml tune.psa.cpu) searched on measured programs the test split never sees.

PSA learns nothing, but the rates a spec sheet leaves out (arithmetic and L1 loads per cycle, L2/L3/DRAM
bandwidth per core, a rolled loop's overhead) decide how it weighs compute against data movement, and so
which candidates the draft keeps (tcl/tvm/draft.py). A random search over log-uniform ranges scores each
setting on one platform's training and validation splits by pairwise accuracy plus the recall of each task's
5 fastest programs within PSA's top draft share (the programs the learned model gets to see); the best
setting and params.yaml's are then scored side by side on the held-out test split of every platform given.
Schedules are rebuilt from their traces once; each setting only re-runs the analysis.

    taskset -c 0 python benchmarks/calibrate_psa.py --platform host-avx512-1c --trials 400 \\
        --check host-avx512-1c zen4-avx512-1c zen4-avx2-1c emr-avx2-1c zen1-avx2-1c [--update-report]

`--check-databases DIR...` scores the rates on tuning databases of --platform too (a benchmark network no split
holds); `--rates JSON` scores given rates against params.yaml's without searching.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks._out import add_out_args, out_path, provenance, provenance_line  # noqa: E402
from benchmarks.bench_psa import draft_share_of, figures, loop_nests, ranking_split, store_workloads  # noqa: E402

REPORT = "reports/psa"
# log-uniform ranges of each rate; vector_registers is picked from its two x86-64 values, line_bytes is fixed
RANGES = {"ops_per_cycle": (0.5, 8.0), "l1_loads_per_cycle": (0.5, 4.0), "l2_bytes_per_cycle": (8.0, 128.0),
          "l3_bytes_per_cycle": (4.0, 64.0), "dram_gbs_per_core": (5.0, 100.0), "loop_overhead_cycles": (0.1, 10.0),
          "llvm_unroll_body": (20.0, 2000.0)}


def scored_split(platform_name: str, params, records: Path, splits: tuple[str, ...]):
    """(ranking arrays, LoopNest per row) of the platform's measured programs in `splits`."""
    import pyarrow as pa

    from tcl.data.splits import split_tables, task_networks_of
    from tcl.data.store import RecordStore

    parts = split_tables(RecordStore(records).read(platform_name), params, task_networks_of(records))
    table = pa.concat_tables([parts[s] for s in splits])
    return ranking_split(table), loop_nests(table, store_workloads(records, platform_name))


def database_split(directory: Path, platform_name: str):
    """(ranking arrays, LoopNest per row) of a MetaSchedule tuning database: a tuning run's measured programs,
    e.g. of a benchmark network no split holds. Unreadable lines are counted, not kept."""
    from tcl.data.ms_database import read_ms_database_table
    from tcl.data.splits import add_labels

    modules: dict[str, str] = {}
    table = read_ms_database_table(directory, platform=platform_name, on_module=modules.__setitem__)
    return ranking_split(add_labels(table)), loop_nests(table, modules.__getitem__)


def draw(rng: np.random.Generator):
    from tcl.tvm.psa.cpu import CpuKnobs

    rates = {k: round(float(np.exp(rng.uniform(np.log(lo), np.log(hi)))), 3) for k, (lo, hi) in RANGES.items()}
    return CpuKnobs(vector_registers=int(rng.choice([16, 32])), **rates)


def score(knobs, platform_name: str, params, split: dict, nests: list, share: float) -> dict:
    from tcl.platforms import get_platform
    from tcl.tvm.psa.cpu import CpuAnalyzer

    return figures(split, CpuAnalyzer(get_platform(params, platform_name), knobs).nest_scores(nests), share)


def objective(fig: dict) -> float:
    return fig["pairwise_accuracy"] + fig["recall_top5_in_draft_share"]


def main(argv=None) -> None:
    from tqdm import tqdm

    from tcl.config import load_params
    from tcl.tvm.psa.cpu import CpuKnobs

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--platform", default="host-avx512-1c", help="whose training + validation programs to search on")
    ap.add_argument("--trials", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--check", nargs="+", default=["host-avx512-1c"], help="platforms whose test split scores the result")
    ap.add_argument("--check-databases", nargs="*", default=[], metavar="DIR",
                    help="tuning databases (MetaSchedule JSONDatabase directories) of --platform that score it too")
    ap.add_argument("--rates", help="score these rates (JSON) instead of searching, e.g. the committed report's best")
    add_out_args(ap, REPORT)
    args = ap.parse_args(argv)
    params = load_params(REPO / "params.yaml")
    prov = provenance(__file__, argv)
    records = REPO / "data" / "records"
    share = draft_share_of(params)
    current = CpuKnobs(**((params.get("tune") or {}).get("psa") or {}).get("cpu", {}))

    split, nests = scored_split(args.platform, params, records, ("train", "validation"))
    rng = np.random.default_rng(args.seed)
    trials = [(current, score(current, args.platform, params, split, nests, share))]
    if args.rates:
        knobs = CpuKnobs(**json.loads(args.rates))
        trials.append((knobs, score(knobs, args.platform, params, split, nests, share)))
        args.trials = 0
    for _ in tqdm(range(args.trials), desc=f"PSA rates on {args.platform} train+validation", unit="setting"):
        knobs = draw(rng)
        trials.append((knobs, score(knobs, args.platform, params, split, nests, share)))
    best, best_fig = max(trials[1:], key=lambda t: objective(t[1]))
    print(f"params.yaml: {trials[0][1]}\nbest: {best_fig}\n{json.dumps(dataclasses.asdict(best))}", flush=True)

    checks = []
    held_out = [("test", name, scored_split(name, params, records, ("test",))) for name in args.check]
    held_out += [(f"tuning database `{d}`", args.platform, database_split(Path(d), args.platform))
                 for d in args.check_databases]
    for where, name, (test, test_nests) in held_out:
        for label, knobs in (("params.yaml", current), ("given" if args.rates else "searched", best)):
            checks.append({"split": where, "platform": name, "knobs": label, "tasks": int(len(set(test["group"]))),
                           "programs": int(len(test["group"])), **score(knobs, name, params, test, test_nests, share)})
            print(json.dumps(checks[-1]), flush=True)

    out = out_path(args, REPORT)
    out.mkdir(parents=True, exist_ok=True)
    result = {"search_platform": args.platform, "trials": args.trials, "seed": args.seed, "draft_share": share,
              "params_yaml": dataclasses.asdict(current), "best": dataclasses.asdict(best),
              "search_figures": {"params.yaml": trials[0][1], "best": best_fig},
              "all_trials": [{**dataclasses.asdict(k), **f} for k, f in trials], "test": checks, **prov}
    (out / "calibration.json").write_text(json.dumps(result, indent=2))
    lines = [f"# PSA's CPU rates searched on {args.platform}'s training + validation programs", "",
             provenance_line(prov), "",
             ("The rates given (--rates)" if args.rates else f"{args.trials} random settings")
             + "; objective: pairwise accuracy + recall of each task's 5 fastest programs in PSA's top "
             f"{share:.1%} (the draft's share). Best: `{json.dumps(dataclasses.asdict(best))}`.", "",
             "| split | platform | rates | tasks | programs | pairwise acc | recall top-5 in draft share | "
             "recall top-5 in top 25% |", "|---|---|---|---|---|---|---|---|"]
    for label, fig in (("params.yaml", trials[0][1]), ("given" if args.rates else "searched", best_fig)):
        lines.append(f"| train+validation | {args.platform} | {label} | | | {fig['pairwise_accuracy']:.3f} | "
                     f"{fig['recall_top5_in_draft_share']:.3f} | {fig['recall_top5_in_top25pct']:.3f} |")
    for c in checks:
        lines.append(f"| {c['split']} | {c['platform']} | {c['knobs']} | {c['tasks']} | {c['programs']} | "
                     f"{c['pairwise_accuracy']:.3f} | {c['recall_top5_in_draft_share']:.3f} | "
                     f"{c['recall_top5_in_top25pct']:.3f} |")
    (out / "calibration.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
