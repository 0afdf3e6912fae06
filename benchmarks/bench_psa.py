"""How well PSA (tcl.tvm.psa) ranks measured programs without a learned model: the held-out test split.

For each platform, every test-split program's schedule is rebuilt from its trace (as
tcl.features.per_store does) and PSA estimates its latency. Printed and written to
reports/psa/<platform>.json + .md (with --update-report; tmp/bench/psa/ otherwise): pairwise accuracy and top-1 / top-5 (TCL eq. 12, as
tcl.train.evaluate computes them) for PSA, for a random scorer (20 seeds) and for the train stage's
learned models (`--models`, models/<platform>/<model>, scored on the same programs), and the recall of
each task's true top-5 programs within each scorer's top share: the draft's (tune.draft verify /
population, what PSA hands the learned model) and 25%. A cheap draft helps only if it drops the best
programs about as rarely as the model it saves time for would.

    taskset -c 0 python benchmarks/bench_psa.py --platforms zen4-avx512-1c [--max-tasks 40] [--update-report]
    taskset -c 0 python benchmarks/bench_psa.py --platforms nvidia-h200 --store data/records_gpu --every-task
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def store_workloads(store_root: Path, platform: str):
    """A task key's IRModule JSON as a record store keeps it."""
    from tcl.features.per_store import workload_dir

    return lambda key: (workload_dir(store_root, platform) / f"{key}.json").read_text()


def loop_nests(table, workload_json) -> list:
    """Every row's LoopNest (None where the trace does not replay), its schedule rebuilt from the trace on
    `workload_json(task_key)` one task at a time: what PSA reads, whatever its knobs."""
    import tvm

    from tcl.features.loop_nest import loop_nest
    from tcl.features.per_store import replay

    keys = np.asarray(table.column("task_key").to_pylist())
    programs = table.column("program").to_pylist()
    nests: list = [None] * len(keys)
    for key in dict.fromkeys(keys.tolist()):
        rows = np.flatnonzero(keys == key)
        mod = tvm.ir.load_json(workload_json(key))
        candidates, _ = replay(mod, [programs[i] for i in rows])
        for i, c in zip(rows, candidates):
            if c is not None:
                nests[i] = loop_nest(c.sch.mod)
    return nests


def ranking_split(table) -> dict:
    """The arrays tcl.train.evaluate and `recall` read, of a labelled split's rows (a task: network + key)."""
    net = np.asarray(table.column("network").to_pylist())
    key = np.asarray(table.column("task_key").to_pylist())
    return {"label": np.asarray(table.column("label").to_pylist(), dtype=float),
            "mean_sec": np.asarray([v if v is not None else np.nan for v in table.column("mean_sec").to_pylist()]),
            "network": net, "task_key": key, "task_weight": np.asarray(table.column("task_weight").to_pylist(), float),
            "group": pd.factorize(pd.Series(net) + "/" + pd.Series(key))[0]}


def learned_scores(models: list[str], platform: str, params, program_ids: np.ndarray) -> dict[str, np.ndarray]:
    """Each of the train stage's `models` bundles' score of each program in `program_ids` (NaN where the
    features' test split lacks it, e.g. a program the validation quarantined). Models that read the same
    input kind share one read of it."""
    from tcl.features.dataset import load_split
    from tcl.models import MODELS
    from tcl.models.base import predict
    from tcl.models.bundle import ModelBundle
    from tcl.train.inputs import model_inputs

    features = REPO / "data" / "features" / platform
    raw = load_split(features, "test") if models else None
    inputs: dict[str, dict] = {}  # input kind -> the test split's model inputs
    out = {}
    for model in models:
        kind = MODELS[model].input_kind
        if kind not in inputs:
            inputs[kind] = model_inputs(model, platform, params, features, {"test": raw})[0]["test"]
        test = inputs[kind]
        bundle = ModelBundle.load(REPO / "models" / platform / model)
        scored = dict(zip(test["program_id"].tolist(), predict(bundle.model, test["x"]).tolist()))
        out[model] = np.asarray([scored.get(pid, np.nan) for pid in program_ids.tolist()], dtype="float64")
    return out


def recall(split, scores: np.ndarray, share: float | None, count: int | None) -> float:
    """Mean over tasks of the share of the task's 5 fastest programs inside the scorer's top programs."""
    frame = pd.DataFrame({"g": split["group"], "lat": np.where(split["label"] > 0, split["mean_sec"], np.inf),
                          "s": np.nan_to_num(scores, nan=-np.inf)})
    hits = []
    for _, task in frame.groupby("g"):
        ok = task[np.isfinite(task["lat"])]
        if len(ok) < 5:
            continue
        keep = count if count is not None else max(1, int(np.ceil(share * len(task))))
        drafted = set(task.sort_values("s", ascending=False, kind="stable").index[:keep])
        hits.append(len(drafted & set(ok.nsmallest(5, "lat").index)) / 5)
    return float(np.mean(hits)) if hits else float("nan")


FIGURES = ("pairwise_accuracy", "top1_ratio_of_sums", "top5_ratio_of_sums")


def draft_share_of(params) -> float:
    """The share of the population PSA hands the learned model (tune.draft verify / population)."""
    from tcl.tvm.draft import DraftSettings

    draft = DraftSettings.from_params(params)
    return draft.verify / draft.population


def figures(split: dict, values: np.ndarray, draft_share: float) -> dict:
    """A scorer's pairwise accuracy, top-1/top-5 (eq. 12) and recall of each task's 5 fastest programs in its
    top draft share and top 25% (NaN scores rank last)."""
    from tcl.train.evaluate import EvalSettings, ranking_metrics

    m = ranking_metrics(split, np.nan_to_num(values, nan=-1e9), settings=EvalSettings(bootstrap=0))
    return {**{k: m[k] for k in FIGURES}, "unscored": int(np.isnan(values).sum()),
            "recall_top5_in_draft_share": recall(split, values, draft_share, None),
            "recall_top5_in_top25pct": recall(split, values, 0.25, None)}


def evaluate(platform_name: str, params, max_tasks: int, records: Path, every_task: bool = False,
             models: tuple[str, ...] = ()) -> dict:
    """PSA against a random scorer and the learned `models` on the platform's test split, or on every task
    of the store (`every_task`: PSA is not trained, so a store no model trains on, such as a GPU's, can be
    scored whole; no learned model then)."""
    from tcl.data.splits import add_labels, split_tables, task_networks_of
    from tcl.data.store import RecordStore
    from tcl.platforms import get_platform
    from tcl.train.evaluate import EvalSettings, random_scorer_metrics
    from tcl.tvm.psa import make_analyzer

    platform = get_platform(params, platform_name)
    table = RecordStore(records).read(platform_name)
    test = add_labels(table) if every_task else split_tables(table, params, task_networks_of(records))["test"]
    tasks = list(dict.fromkeys(test.column("task_key").to_pylist()))
    if max_tasks:
        import pyarrow as pa
        import pyarrow.compute as pc

        test = test.filter(pc.is_in(test.column("task_key"), pa.array(tasks[:max_tasks])))
    start = time.perf_counter()
    scores = make_analyzer(platform, params).nest_scores(loop_nests(test, store_workloads(records, platform_name)))
    seconds = time.perf_counter() - start
    split = ranking_split(test)
    net, key = split["network"], split["task_key"]
    draft_share = draft_share_of(params)
    scorer = functools.partial(figures, split, draft_share=draft_share)

    program_ids = np.asarray(test.column("program_id").to_pylist())
    trained = [] if every_task else [m for m in models
                                     if (REPO / "models" / platform_name / m / "bundle.json").exists()]
    if set(models) - set(trained) and not every_task:
        print(f"{platform_name}: no trained bundle of {sorted(set(models) - set(trained))} under models/ (the train "
              "stage trains the platforms of train.platforms)", flush=True)
    learned = {name: scorer(values)
               for name, values in learned_scores(trained, platform_name, params, program_ids).items()}
    psa = scorer(scores)
    rand = random_scorer_metrics(split, settings=EvalSettings(bootstrap=0))
    draws = [np.random.default_rng(seed).random(len(key)) for seed in range(20)]  # as random_scorer_metrics: 20
    rand.update({name: float(np.mean([recall(split, d, share, None) for d in draws]))
                 for name, share in (("recall_top5_in_draft_share", draft_share), ("recall_top5_in_top25pct", 0.25))})
    return {"platform": platform_name, "store": str(records.relative_to(REPO) if records.is_relative_to(REPO) else records),
            "scored": "every task" if every_task else "test split", "tasks": int(len(set(zip(net, key)))), "programs": int(len(key)),
            "unreplayed": int(np.isnan(scores).sum()), "psa_seconds_per_program": seconds / max(len(key), 1),
            "draft_share": draft_share, "psa": psa, "learned": learned,
            "random": {m: rand[m] for m in (*FIGURES, "recall_top5_in_draft_share", "recall_top5_in_top25pct")},
            "programs_per_task_max": int(pd.Series(split["group"]).value_counts().max())}


def table_lines(results: list[dict]) -> list[str]:
    share = results[0]["draft_share"] if results else 0.0
    lines = ["| platform | tasks | programs | scorer | pairwise acc | top-1 | top-5 | "
             f"recall top-5 in top {share:.1%} (the draft's) | recall top-5 in top 25% |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        for name, m in [("psa", r["psa"]), *r["learned"].items(), ("random", r["random"])]:
            rec = (f"{m['recall_top5_in_draft_share']:.3f} | {m['recall_top5_in_top25pct']:.3f}"
                   if "recall_top5_in_top25pct" in m else "- | -")
            lines.append(f"| {r['platform']} | {r['tasks']} | {r['programs']} | {name} | {m['pairwise_accuracy']:.3f} | "
                         f"{m['top1_ratio_of_sums']:.3f} | {m['top5_ratio_of_sums']:.3f} | {rec} |")
    return lines


def main(argv=None) -> None:
    from benchmarks._out import add_out_args, out_path, provenance, provenance_line
    from tcl.config import load_params

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--platforms", nargs="+", default=["zen4-avx512-1c"])
    ap.add_argument("--max-tasks", type=int, default=0, help="first N test tasks only (0 = all)")
    ap.add_argument("--store", default="data/records", help="the records' store, e.g. data/records_gpu")
    ap.add_argument("--every-task", action="store_true", help="score every task of the store, not its test split")
    ap.add_argument("--models", nargs="*", default=["tenset_mlp", "xgb", "pacm", "tcl_stores", "tcl"],
                    help="the train stage's models (models/<platform>/<model>) to score beside PSA")
    add_out_args(ap, "reports/psa")
    args = ap.parse_args(argv)
    params = load_params(REPO / "params.yaml")
    prov = provenance(__file__, argv)  # the data as locked when the run starts
    records = (REPO / args.store).resolve()
    results = [evaluate(p, params, args.max_tasks, records, args.every_task, tuple(args.models))
               for p in args.platforms]
    lines = table_lines(results)
    print("\n".join(lines))
    out = out_path(args, "reports/psa")
    out.mkdir(parents=True, exist_ok=True)
    for r in results:
        r.update(prov)
        (out / f"{r['platform']}.json").write_text(json.dumps(r, indent=2))
        (out / f"{r['platform']}.md").write_text(
            f"# PSA ranking on {r['platform']} ({r['scored']} of {r['store']})\n\n{provenance_line(prov)}\n\n"
            + "\n".join(table_lines([r])) +
            f"\n\nPSA: {r['psa_seconds_per_program'] * 1e3:.2f} ms per program (replay + analysis); "
            f"{r['unreplayed']} programs did not replay; up to {r['programs_per_task_max']} programs per task.\n")


if __name__ == "__main__":
    main()
